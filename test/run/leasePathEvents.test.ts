/**
 * What a task costs on the lease path (breaker, pool, key), counted in a real run through XState's
 * inspection API: every event an actor receives is a macrostep, a snapshot copy and garbage.
 * A task on a key with room, on a route whose breaker is closed with no failure counted, takes
 * LEASE.REQUEST, KEY.GRANT, LEASE.GRANTED, LEASE.RELEASE and KEY.RELEASE: the key answers the
 * agent itself and tells the pool nothing that has not changed (it used to add KEY.GRANTED and a
 * KEY.STATE per task), and the pool, which the breaker told it is clear, neither hands the
 * request to the breaker nor passes it the success (they used to add BREAKER.ADMIT and
 * BREAKER.REPORT per task).
 */
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { createScriptedProvider, createSwarm } from '../../src/index.js';

const LEASE_PATH = /^(LEASE|KEY|BREAKER)\./;

async function leasePathEvents(tasks: number, keys: number): Promise<{ counts: Map<string, number>; toBreaker: string[] }> {
  const counts = new Map<string, number>();
  const toBreaker: string[] = [];
  const inspect = (e: InspectionEvent) => {
    if (e.type !== '@xstate.event') return;
    if ((e.actorRef as { logic?: { id?: string } }).logic?.id === 'breaker') toBreaker.push(e.event.type);
    if (!LEASE_PATH.test(e.event.type)) return;
    counts.set(e.event.type, (counts.get(e.event.type) ?? 0) + 1);
  };
  const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => 'ok' }) }, store: false, seed: 1, inspect });
  const plan = {
    providers: { p: { type: 'custom', keys: Array.from({ length: keys }, (_, i) => `k${i}`) } },
    models: { m: { provider: 'p', model: 'x', maxTokens: 8 } },
    defaults: { maxInFlight: 25 },
    tasks: Array.from({ length: tasks }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: 'hi' })),
  };
  const result = await swarm.run(plan as Parameters<typeof swarm.run>[0]).result;
  await swarm.close();
  expect(result.totals.completed).toBe(tasks);
  return { counts, toBreaker };
}

describe('the lease path', () => {
  // Plus three KEY.STATE per key, at its start: a key is on probation until the server accepts it
  // (ready for one request, saturated, ready without bound once proven); and the breaker's one
  // BREAKER.STATE to the pool, at its start (clear).
  it.each([1, 3])('costs at most 5 events per task on keys with room (%i key(s)), plus three KEY.STATE per key and one BREAKER.STATE', async (keys) => {
    const tasks = 200;
    const { counts } = await leasePathEvents(tasks, keys);
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    expect(total, JSON.stringify(Object.fromEntries(counts))).toBeLessThanOrEqual(5 * tasks + 3 * keys + 1);
    // What is left: each of these once per task; the pool hears nothing from a key after its start.
    for (const type of ['LEASE.REQUEST', 'KEY.GRANT', 'LEASE.GRANTED', 'LEASE.RELEASE', 'KEY.RELEASE']) {
      expect(counts.get(type), type).toBe(tasks);
    }
    expect(counts.get('KEY.STATE')).toBe(3 * keys);
    expect(counts.get('BREAKER.STATE')).toBe(1);
  });

  it('costs the breaker no event at all on a clean run: the pool lets requests through and keeps successes', async () => {
    const { counts, toBreaker } = await leasePathEvents(200, 1);
    expect(toBreaker).toEqual(['xstate.init']);
    expect(counts.has('BREAKER.ADMIT')).toBe(false);
    expect(counts.has('BREAKER.REPORT')).toBe(false);
  });
});
