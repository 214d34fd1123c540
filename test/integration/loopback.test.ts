/**
 * The runtime against the simulated provider over real loopback HTTP (Anthropic wire protocol):
 * 300 tasks, 3 keys with rpm limits, 10% HTTP 500 and 5% connection resets, and a fourth key the
 * server does not know. Time runs 50x faster on one clock shared by the runtime and the server,
 * so minutes of rate-limit windows take seconds.
 *
 * The server's rpm is below the plan's, but whether the runtime ever reaches it depends on how
 * fast this machine is (a loaded one sends slower and never does): a few tasks ask the server for
 * one 429 each (`[[sim:error 429 1]]`), so every run meets Retry-After.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { createSwarm, type RunEvent } from '../../src/index.js';
import type { KeyContext } from '../../machines/key.machine.js';
import { fingerprint } from '../../src/keys.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { scaledClock } from '../helpers/scaledClock.js';

const SPEED = 50;
const RPM = 60; // the plan's promise per key
const SIM_RPM = 40; // the server is stricter than the plan says: 429s, each with a Retry-After
/** Tasks whose first request the server answers 429 (Retry-After 1 s). */
const LIMITED = ['t3', 't61', 't142', 't250'];
const keys = { KEY_A: 'sk-sim-aaaaaaaa', KEY_B: 'sk-sim-bbbbbbbb', KEY_C: 'sk-sim-cccccccc', KEY_BAD: 'sk-sim-not-known' };

describe('300 tasks over loopback: limits, faults, a revoked key', () => {
  const clock = scaledClock(SPEED);
  let sim: SimServer;
  beforeAll(async () => {
    sim = await startSim({
      seed: 11,
      keys: { [keys.KEY_A]: { rpm: SIM_RPM }, [keys.KEY_B]: { rpm: SIM_RPM }, [keys.KEY_C]: { rpm: SIM_RPM } },
      faults: { http500: 0.1, reset: 0.05 },
      now: () => clock.now(),
    });
  });
  afterAll(() => sim.close());

  it('completes every task once with its own output, within every key limit', async () => {
    const tasks = Array.from({ length: 300 }, (_, i) => ({
      id: `t${i}`,
      model: 'fast',
      prompt: `Task ${i}. [[sim:reply out-t${i}]]${LIMITED.includes(`t${i}`) ? ' [[sim:error 429 1]]' : ''}`,
      deps: i >= 50 ? [`t${i - 50}`, `t${(i * 7) % 50 + Math.floor(i / 50 - 1) * 50}`].filter((d, j, a) => a.indexOf(d) === j) : [],
    }));
    const plan = {
      providers: {
        main: {
          type: 'anthropic',
          baseURL: sim.url,
          keys: [{ env: 'KEY_A' }, { env: 'KEY_B' }, { env: 'KEY_C' }, { env: 'KEY_BAD' }],
          limits: { rpm: RPM, concurrency: 8 },
          headersTimeoutMs: 5_000,
        },
      },
      models: { fast: { provider: 'main', model: 'claude-haiku-4-5', maxTokens: 64 } },
      defaults: { maxInFlight: 24, maxRetries: 8 },
      tasks,
    };
    // Grant times as the keys record them (each lease's grantedAt, on the key's own clock), read
    // from the keys' snapshots through XState's inspection API. Reading the clock when the grant
    // is seen instead would add this machine's delay, 50x: on a loaded machine, tens of seconds.
    const grants = new Map<string, number[]>();
    const seen = new Set<string>();
    const inspect = (ev: InspectionEvent) => {
      if (ev.type !== '@xstate.snapshot' || !(ev.actorRef as AnyActorRef).id.startsWith('key:')) return;
      const key = (ev.snapshot as { context?: KeyContext }).context;
      for (const lease of key?.leases ?? []) {
        if (seen.has(`${key!.keyId} ${lease.leaseId}`)) continue;
        seen.add(`${key!.keyId} ${lease.leaseId}`);
        (grants.get(key!.keyId) ?? grants.set(key!.keyId, []).get(key!.keyId)!).push(lease.grantedAt);
      }
    };
    const swarm = createSwarm({ env: keys, clock, seed: 5, backoff: { baseMs: 200, maxMs: 5_000 }, inspect });
    const run = swarm.run(plan);
    const timed: { at: number; event: RunEvent }[] = [];
    run.events.on('*', (_t, e) => timed.push({ at: clock.now(), event: e as RunEvent }));
    const result = await run.result;
    await swarm.close();
    const stats = sim.stats();

    // Every task completed exactly once, each with its own output.
    expect(result.status).toBe('completed');
    const completions = timed.filter((t) => t.event.type === 'task:completed').map((t) => (t.event as { taskId: string }).taskId);
    expect(completions.length).toBe(300);
    expect(new Set(completions).size).toBe(300);
    for (const t of tasks) expect(result.tasks[t.id]!.output).toBe(`out-${t.id}`);

    // The faults really happened and were retried.
    expect(stats.byStatus['500']).toBeGreaterThan(10);
    expect(stats.byStatus['0']).toBeGreaterThan(3);

    // The unknown key answered 401 and was never used after its first 401 came back (the plan
    // states the rate, so the key had no probation: what went out before then is one burst at
    // most); the run finished on the others.
    const bad = `main:${fingerprint(keys.KEY_BAD)}`;
    const badLog = stats.log.filter((l) => l.key === fingerprint(keys.KEY_BAD));
    expect(badLog.length).toBeGreaterThanOrEqual(1);
    expect(badLog.every((l) => l.status === 401)).toBe(true);
    const revokedAt = timed.findIndex((t) => t.event.type === 'key:revoked');
    const badCalls = timed.flatMap((t, i) => (t.event.type === 'model:request' && t.event.keyId === bad ? [i] : []));
    expect(badCalls.length).toBe(badLog.length);
    for (const i of badCalls) expect(i).toBeLessThan(revokedAt);
    expect(timed.filter((t) => t.event.type === 'key:revoked').map((t) => (t.event as { keyId: string }).keyId)).toEqual([bad]);

    // Every model call had a grant of its own, and no key granted more than RPM in any 60 s window.
    const requests = new Map<string, number>();
    for (const t of timed) if (t.event.type === 'model:request') requests.set(t.event.keyId, (requests.get(t.event.keyId) ?? 0) + 1);
    expect(new Map([...grants].map(([k, v]) => [k, v.length]))).toEqual(requests);
    for (const [keyId, times] of grants) {
      let j = 0;
      for (let i = 0; i < times.length; i++) {
        while (times[i]! - times[j]! >= 60_000) j++;
        expect(i - j + 1, `${keyId} grants in the 60 s up to ${times[i]}`).toBeLessThanOrEqual(RPM);
      }
    }

    // After a 429 with Retry-After, no new request on that key until it has passed.
    const limited = timed.filter((t) => t.event.type === 'model:error' && t.event.error.code === 'rate_limited');
    const limitedTasks = new Set(limited.map((l) => (l.event as { taskId: string }).taskId));
    for (const id of LIMITED) expect(limitedTasks, `a 429 for ${id}`).toContain(id);
    for (const l of limited) {
      const e = l.event as Extract<RunEvent, { type: 'model:error' }>;
      const until = l.at + e.error.retryAfterMs!;
      const early = timed.filter((t) => t.event.type === 'model:request' && t.event.keyId === e.keyId && t.at > l.at && t.at < until - 1);
      expect(early, `requests on ${e.keyId} inside its Retry-After`).toEqual([]);
    }
  });
});
