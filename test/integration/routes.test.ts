/**
 * Weighted routes for one logical model (a 95/5 canary between two providers): each attempt
 * picks a route by weight from the run's seed; the result has per-route calls, error rate,
 * latency percentiles and cost.
 */
import { describe, expect, it } from 'vitest';
import { createSwarm, type RunEvent } from '../../src/index.js';

const plan = {
  providers: { main: { type: 'sim', sim: { ttftMs: 5 } }, canary: { type: 'sim', sim: { ttftMs: 20, faults: { http500: 0.3 } } } },
  models: {
    m: {
      provider: 'main',
      model: 'sim-stable',
      weight: 95,
      price: { input: 1, output: 2 },
      routes: [{ provider: 'canary', model: 'sim-next', weight: 5, price: { input: 2, output: 4 } }],
    },
  },
  defaults: { maxInFlight: 8, maxRetries: 8 },
  tasks: Array.from({ length: 400 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `task ${i}` })),
};

describe('weighted routes', () => {
  it('splits attempts about 95/5 and reports each route', async () => {
    const swarm = createSwarm({ seed: 3, backoff: { baseMs: 1, maxMs: 4 } });
    const run = swarm.run(plan);
    const started: string[] = [];
    run.events.on('task:started', (e: Extract<RunEvent, { type: 'task:started' }>) => started.push(e.route!));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    const canaryShare = started.filter((r) => r === 'canary/sim-next').length / started.length;
    expect(canaryShare).toBeGreaterThan(0.01);
    expect(canaryShare).toBeLessThan(0.12);
    const routes = result.routes!;
    expect(Object.keys(routes).sort()).toEqual(['canary/sim-next', 'main/sim-stable']);
    expect(routes['main/sim-stable']!.errorRate).toBe(0);
    expect(routes['canary/sim-next']!.errors).toBeGreaterThan(0);
    // Each route's latencies are its own server's: no answer comes before that server's time to
    // first token (5 ms main; 20 ms canary, whose slowest call is an answer, not an instant 500).
    // Lower bounds only (less 1 ms of clock granularity): comparing the two routes' timings
    // would depend on the machine's load.
    expect(routes['main/sim-stable']!.p50Ms).toBeGreaterThanOrEqual(4);
    expect(routes['canary/sim-next']!.p99Ms).toBeGreaterThanOrEqual(19);
    expect(routes['main/sim-stable']!.p99Ms).toBeGreaterThanOrEqual(routes['main/sim-stable']!.p50Ms);
    const routeCost = routes['main/sim-stable']!.costUsd + routes['canary/sim-next']!.costUsd;
    expect(routeCost).toBeCloseTo(result.totals.costUsd!, 6);
    expect(routes['main/sim-stable']!.requests + routes['canary/sim-next']!.requests).toBe(result.totals.requests);
  });
});
