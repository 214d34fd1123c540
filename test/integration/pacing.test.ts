/**
 * Pacing against a server that enforces each key's limit as the providers document it: a token
 * bucket enforced over short intervals (a bucket of one second's worth), over real loopback HTTP.
 * Time runs 10x faster on one clock shared by the runtime and the server (faster would magnify
 * this machine's few ms of jitter past the 3% of headroom the keys keep).
 *
 * `maxRetries: 0`: a 429 that used a retry would fail its task. Whatever this machine's speed,
 * every task completes, with limits stated and with limits known only from the headers.
 */
import { describe, expect, it } from 'vitest';
import { createSwarm, type RunEvent } from '../../src/index.js';
import { startSim } from '../../src/sim/index.js';
import { scaledClock } from '../helpers/scaledClock.js';

const SPEED = 10;
const RPM = 30; // per key: a bucket of 1 request refilling every 2 s (200 ms of real time)
const keys = { KEY_A: 'sk-pace-aaaaaaaa', KEY_B: 'sk-pace-bbbbbbbb' };

/**
 * 40 tasks on the two keys against a bucket server at RPM a key (`headers`: whether it says so),
 * every answer checked: all completed, none failed, no retry used. The key:rate events it saw.
 */
async function runAgainst(headers: boolean, limits: { rpm: number } | undefined): Promise<Extract<RunEvent, { type: 'key:rate' }>[]> {
  const clock = scaledClock(SPEED);
  const sim = await startSim({
    seed: 3,
    keys: { [keys.KEY_A]: { rpm: RPM }, [keys.KEY_B]: { rpm: RPM } },
    latency: { ttftMs: 200 },
    headers,
    now: () => clock.now(),
  });
  try {
    const plan = {
      providers: { main: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'KEY_A' }, { env: 'KEY_B' }], ...(limits ? { limits } : {}) } },
      models: { fast: { provider: 'main', model: 'claude-haiku-4-5', maxTokens: 32 } },
      defaults: { maxInFlight: 12, maxRetries: 0 },
      tasks: Array.from({ length: 40 }, (_, i) => ({ id: `t${i}`, model: 'fast', prompt: `Task ${i}. [[sim:reply out-${i}]]` })),
    };
    const swarm = createSwarm({ env: keys, clock, seed: 2 });
    const run = swarm.run(plan);
    const rates: Extract<RunEvent, { type: 'key:rate' }>[] = [];
    run.events.on('key:rate', (e) => rates.push(e));
    const result = await run.result;
    await swarm.close();
    expect(result.totals).toMatchObject({ completed: 40, failed: 0 });
    for (const [id, task] of Object.entries(result.tasks)) expect(task).toMatchObject({ status: 'completed', output: `out-${id.slice(1)}`, retries: 0 });
    // The server refused next to nothing: requests per task close to 1 (a 429 is retried as a wait).
    const stats = sim.stats();
    expect(stats.requests).toBe(40 + (stats.byStatus['429'] ?? 0));
    return rates;
  } finally {
    await sim.close();
  }
}

for (const stated of [true, false]) {
  describe(`a bucket server with a one-second burst, limits ${stated ? 'stated' : 'unknown (headers only)'}`, () => {
    it('completes every task, none failed for rate limits, no retry used, and the keys pace at the rate', async () => {
      const rates = await runAgainst(true, stated ? { rpm: RPM } : undefined);
      // The rate each key paced at: the plan's, or the one the first response's headers gave
      // (a 429 from jitter on a loaded machine may cut it later: it is a wait, never a failure).
      for (const keyId of new Set(rates.map((r) => r.keyId))) {
        const first = rates.find((r) => r.keyId === keyId && r.source !== 'adaptive')!;
        expect(first.source).toBe(stated ? 'stated' : 'learned');
        expect(first.rpm).toBeCloseTo(RPM * 0.97, 1);
      }
      expect(new Set(rates.map((r) => r.keyId)).size).toBe(2);
    });
  });
}

describe('a bucket server that says nothing (no rate-limit headers, no retry-after), limits unknown', () => {
  it('completes every task with no retry used: each key learns its rate from its 429s and paces near it', async () => {
    const rates = await runAgainst(false, undefined);
    // Nothing told the keys a rate: every one they paced at came from their 429s.
    expect(rates.length).toBeGreaterThan(0);
    expect(rates.every((r) => r.source === 'adaptive')).toBe(true);
    expect(new Set(rates.map((r) => r.keyId)).size).toBe(2);
    for (const keyId of new Set(rates.map((r) => r.keyId))) {
      const last = rates.filter((r) => r.keyId === keyId).at(-1)!;
      expect(last.rpm! / RPM).toBeGreaterThan(0.5);
      expect(last.rpm! / RPM).toBeLessThan(1.3);
    }
  });
});
