/**
 * The pool as its routes' breakers' front desk (machines/breakerDesk.ts): a real pool and a real
 * breaker in one actor system, an agent stand-in that logs what it is sent, and the breaker's
 * inbox counted through `inspect`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createMachine, setup, SimulatedClock, type AnyActorRef, type InspectionEvent } from 'xstate';
import { breakerMachine, type BreakerContext } from '../../machines/breaker.machine.js';
import { BreakerDesk } from '../../machines/breakerDesk.js';
import { handBack } from '../../machines/agent/index.js';
import { poolMachine, type PoolContext } from '../../machines/pool.machine.js';
import type { BreakerVerdict, LeaseEvent, LeaseOutcome } from '../../machines/protocol.js';
import { advanceClock } from '../helpers/clock.js';

const ROUTE = 'acme/m';
const OK: LeaseOutcome = { kind: 'ok', usage: { inputTokens: 1, outputTokens: 1, cacheWriteTokens: 0, cacheReadTokens: 0 } };

/** `pool:acme` (one key, room for 10) and `breaker:acme/m`, spawned in the runtime's order (pool first). */
function harness(breaker: { failureThreshold?: number; cooldownMs?: number } = {}) {
  const clock = new SimulatedClock();
  const toBreaker: { type: string; seq?: number; requestId?: string }[] = [];
  const inspect = (e: InspectionEvent) => {
    if (e.type === '@xstate.event' && (e.actorRef as { logic?: { id?: string } }).logic?.id === 'breaker') toBreaker.push(e.event as never);
  };
  const root = createActor(
    setup({ actors: { pool: poolMachine, breaker: breakerMachine } }).createMachine({
      invoke: [
        { src: 'pool', id: 'pool:acme', systemId: 'pool:acme', input: { provider: 'acme', keys: [{ keyId: 'A', limits: { concurrency: 10 } }] } },
        { src: 'breaker', id: `breaker:${ROUTE}`, systemId: `breaker:${ROUTE}`, input: { route: ROUTE, ...breaker } },
      ],
    }),
    { clock, inspect },
  ).start();
  const heard: { type: string; requestId?: string; leaseId?: string; keyId?: string }[] = [];
  const agent = createActor(createMachine({ on: { '*': { actions: ({ event }) => void heard.push(event as never) } } })).start();
  const pool = root.system.get('pool:acme') as AnyActorRef;
  const grantOf = (requestId: string) => heard.find((e) => e.type === 'LEASE.GRANTED' && e.requestId === requestId) as { leaseId: string; keyId: string } | undefined;
  return {
    clock,
    toBreaker,
    /** What the breaker got since the last call (its init aside). */
    breakerInbox: () => toBreaker.splice(0).filter((e) => e.type !== 'xstate.init').map((e) => e.type),
    heard,
    pool: () => pool.getSnapshot() as { context: PoolContext },
    breaker: () => root.system.get(`breaker:${ROUTE}`)!.getSnapshot() as { value: string; context: BreakerContext },
    request: (requestId: string, more: Partial<Extract<LeaseEvent, { type: 'LEASE.REQUEST' }>> = {}) =>
      pool.send({ type: 'LEASE.REQUEST', requestId, priority: 0, inputTokens: 1, outputTokens: 1, replyTo: agent, route: ROUTE, ...more }),
    granted: (requestId: string) => grantOf(requestId) !== undefined,
    release: (requestId: string, verdict: BreakerVerdict, outcome: LeaseOutcome = OK) => {
      const { leaseId, keyId } = grantOf(requestId)!;
      pool.send({ type: 'LEASE.RELEASE', leaseId, keyId, outcome, verdict });
    },
    cancel: (requestId: string) => pool.send({ type: 'LEASE.CANCEL', requestId }),
    /** A first call on the route fails: with a threshold of 1 the breaker opens. */
    sicken: (outcome: LeaseOutcome = OK) => {
      pool.send({ type: 'LEASE.REQUEST', requestId: 'sick', priority: 0, inputTokens: 1, outputTokens: 1, replyTo: agent, route: ROUTE });
      const { leaseId, keyId } = grantOf('sick')!;
      pool.send({ type: 'LEASE.RELEASE', leaseId, keyId, outcome, verdict: 'failure' });
    },
    at: (ms: number) => advanceClock(clock, ms),
  };
}

describe('the pool as the breaker\'s front desk', () => {
  it('lets a clean route\'s requests through and keeps their successes: the breaker hears only the failure', () => {
    const h = harness({ failureThreshold: 3 });
    for (const id of ['a', 'b', 'c']) h.request(id);
    expect(['a', 'b', 'c'].every(h.granted)).toBe(true);
    h.release('a', 'success');
    h.release('b', 'neutral');
    expect(h.breakerInbox()).toEqual([]);
    h.release('c', 'failure');
    expect(h.toBreaker.map(({ type, seq, requestId }) => ({ type, seq, requestId }))).toEqual([{ type: 'BREAKER.REPORT', seq: 1, requestId: 'c' }]);
    expect(h.breaker().context.failures).toBe(1);
  });

  it('after a failure, hands requests to the breaker and passes every outcome on until the breaker is clean again', () => {
    const h = harness({ failureThreshold: 3 });
    h.request('a');
    h.release('a', 'failure');
    h.breakerInbox();
    // Closed with a failure counted: the breaker passes the request on (back to the pool, admitted).
    h.request('b');
    expect(h.granted('b')).toBe(true);
    expect(h.breakerInbox()).toEqual(['BREAKER.ADMIT']);
    expect(h.pool().context.book.byRequest.get('b')).toMatchObject({ guarded: true });
    // Its success resets the count; the breaker says it is clear, and the next request goes straight.
    h.release('b', 'success');
    expect(h.breakerInbox()).toEqual(['BREAKER.REPORT']);
    expect(h.breaker().context.failures).toBe(0);
    h.request('c');
    h.release('c', 'success');
    expect(h.granted('c')).toBe(true);
    expect(h.breakerInbox()).toEqual([]);
  });

  it('does not hand a request sent again with the same id to the breaker: the first one stands', () => {
    const h = harness({ failureThreshold: 3 });
    h.sicken();
    h.breakerInbox();
    h.request('a');
    expect(h.breakerInbox()).toEqual(['BREAKER.ADMIT']);
    h.request('a'); // booked by the pool now
    expect(h.breakerInbox()).toEqual([]);
    expect(h.heard.filter((e) => e.type === 'LEASE.GRANTED').map((e) => e.requestId)).toEqual(['sick', 'a']);
  });

  it('holds a request at an open breaker, and a cancel withdraws it there: it is never granted', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 1_000 });
    h.sicken();
    expect(h.breaker().value).toBe('open');
    h.request('held');
    expect(h.granted('held')).toBe(false);
    expect(h.breaker().context.waiters.map((w) => w.requestId)).toEqual(['held']);
    expect(h.pool().context.book.byRequest.has('held')).toBe(false);
    h.cancel('held');
    expect(h.breaker().context.waiters).toEqual([]);
    expect(h.pool().context.book.desk.awaySize).toBe(0);
    h.at(1_000);
    expect(h.breaker().value).toBe('halfOpen');
    expect(h.granted('held')).toBe(false);
  });

  it('relays the breaker\'s refusal of a request that asked to be refused while open', () => {
    const h = harness({ failureThreshold: 1 });
    h.sicken();
    h.request('turn', { unlessOpen: true });
    expect(h.heard.filter((e) => e.requestId === 'turn').map((e) => e.type)).toEqual(['BREAKER.REFUSED']);
    expect(h.breaker().context.waiters).toEqual([]);
    expect(h.pool().context.book.desk.awaySize).toBe(0);
  });

  it('lets one probe through while half-open and passes its success on, which closes the breaker and lets the waiters go', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 1_000 });
    h.sicken();
    h.at(1_000);
    h.request('probe');
    h.request('next');
    expect([h.granted('probe'), h.granted('next')]).toEqual([true, false]);
    expect(h.breaker().context.probe).toBe('probe');
    h.release('probe', 'success');
    expect(h.breaker().value).toBe('closed');
    expect(h.granted('next')).toBe(true);
    // Clear again (the news heard the probe's success): the next one goes straight.
    h.breakerInbox();
    h.request('after');
    expect(h.granted('after')).toBe(true);
    expect(h.breakerInbox()).toEqual([]);
  });

  it('withdraws a probe cancelled after its grant: the slot goes to the next request, the lease back to its key', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 1_000 });
    h.sicken();
    h.at(1_000);
    h.request('probe');
    h.request('next');
    h.cancel('probe');
    expect(h.breaker().context.probe).toBe('next');
    expect(h.granted('next')).toBe(true);
    expect(h.pool().context.book.byLease.size).toBe(1);
  });

  it('withdraws a probe it denies (every key revoked), so the next request can probe', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 1_000 });
    h.sicken({ kind: 'auth' }); // opens the breaker and revokes the only key
    expect(h.pool().context.book.revoked).toBe(1);
    h.at(1_000);
    h.request('probe');
    expect(h.heard.filter((e) => e.requestId === 'probe').map((e) => e.type)).toEqual(['LEASE.DENIED']);
    expect(h.breaker().context.probe).toBe(null);
    h.request('next');
    expect(h.heard.filter((e) => e.requestId === 'next').map((e) => e.type)).toEqual(['LEASE.DENIED']);
    expect(h.breaker()).toMatchObject({ value: 'halfOpen', context: { probe: null, waiters: [] } });
  });

  it('drops a request back from the breaker that nobody waits for any more (cancelled on its way back)', () => {
    const h = harness();
    h.request('late', { admitted: true });
    expect(h.granted('late')).toBe(false);
    expect(h.pool().context.book.byRequest.has('late')).toBe(false);
  });

  it('is unguarded on a route with no breaker actor', () => {
    const h = harness();
    h.request('elsewhere', { route: 'acme/other' });
    expect(h.granted('elsewhere')).toBe(true);
    h.release('elsewhere', 'failure');
    expect(h.breakerInbox()).toEqual([]);
  });
});

describe('BreakerDesk: what the pool believes', () => {
  it('believes a route clear only on news that heard every failure it passed on', () => {
    const desk = new BreakerDesk();
    expect(desk.isClear(ROUTE)).toBe(false); // no news yet
    desk.note({ type: 'BREAKER.STATE', route: ROUTE, clear: true, heard: 0 });
    expect(desk.isClear(ROUTE)).toBe(true);
    expect(desk.tells(ROUTE, 'success')).toBe(false);
    expect(desk.tells(ROUTE, 'failure')).toBe(true);
    // A failure passed on: not clear at once, before any news.
    expect(desk.passOn(ROUTE, 'failure')).toBe(1);
    expect(desk.isClear(ROUTE)).toBe(false);
    desk.note({ type: 'BREAKER.STATE', route: ROUTE, clear: false, heard: 1 });
    // A success resets it, then another failure goes before the news of the reset arrives.
    expect(desk.passOn(ROUTE, 'success')).toBe(2);
    expect(desk.passOn(ROUTE, 'failure')).toBe(3);
    desk.note({ type: 'BREAKER.STATE', route: ROUTE, clear: true, heard: 2 });
    expect(desk.isClear(ROUTE)).toBe(false); // stale: it had not heard failure 3
    desk.note({ type: 'BREAKER.STATE', route: ROUTE, clear: false, heard: 3 });
    desk.passOn(ROUTE, 'success');
    desk.passOn(ROUTE, 'neutral'); // changes nothing at the breaker: no news about it
    desk.note({ type: 'BREAKER.STATE', route: ROUTE, clear: true, heard: 4 });
    expect(desk.isClear(ROUTE)).toBe(true);
  });
});

describe('handBack: what a crashed agent gives back on a guarded route', () => {
  const base = { input: { taskId: 't', attempt: 1, provider: 'acme', model: 'm', maxTokens: 1 }, call: 'turn', routeIndex: 0, override: null, tools: null };
  it('cancels its pending lease request at the pool only (the pool withdraws it from the breaker), and releases a held lease with a neutral verdict', () => {
    const pending = handBack({ ...base, held: { pending: { kind: 'lease', requestId: 'r' }, lease: null, reservation: null, reroute: null } } as never);
    expect(pending).toEqual([{ to: 'pool:acme', event: { type: 'LEASE.CANCEL', requestId: 'r' } }]);
    const holding = handBack({ ...base, held: { pending: null, lease: { leaseId: 'L', keyId: 'A' }, reservation: null, reroute: null } } as never);
    expect(holding).toEqual([{ to: 'pool:acme', event: { type: 'LEASE.RELEASE', leaseId: 'L', keyId: 'A', outcome: { kind: 'error' }, verdict: 'neutral' } }]);
  });
});

describe('the front desk, against random runs', () => {
  type Op = { op: 'request' } | { op: 'release'; pick: number; verdict: BreakerVerdict } | { op: 'cancel'; pick: number } | { op: 'wait' };
  const ops = (withTime: boolean) =>
    fc.array(
      fc.oneof(
        { weight: 4, arbitrary: fc.constant<Op>({ op: 'request' }) },
        { weight: 5, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat(), verdict: fc.constantFrom<BreakerVerdict>('success', 'failure', 'neutral') }) },
        { weight: 1, arbitrary: fc.record({ op: fc.constant('cancel' as const), pick: fc.nat() }) },
        ...(withTime ? [{ weight: 1, arbitrary: fc.constant<Op>({ op: 'wait' }) }] : []),
      ),
      { minLength: 20, maxLength: 80 },
    );

  /**
   * Plays `script`; after every step checks that a request the pool granted without handing it to
   * the breaker was granted while the breaker really was closed with no failure counted.
   */
  function play(script: Op[], breaker: { failureThreshold: number; cooldownMs: number }, each: (h: ReturnType<typeof harness>, done: Op | null) => void) {
    const h = harness(breaker);
    const open: string[] = []; // granted, not released
    const pending: string[] = []; // asked, not granted yet
    let n = 0;
    const stats = { direct: 0, directAfterFailure: 0, viaBreaker: 0 };
    let failedBefore = false;
    for (const op of script) {
      let done: Op | null = op;
      if (op.op === 'request' && open.length + pending.length < 8) {
        const id = `r${n++}`;
        h.toBreaker.length = 0;
        h.request(id);
        const viaBreaker = h.toBreaker.some((e) => e.type === 'BREAKER.ADMIT' && e.requestId === id);
        if (h.granted(id)) {
          open.push(id);
          if (viaBreaker) stats.viaBreaker++;
          else {
            // The pool let it through on its own: the breaker must really be clear now.
            expect(h.breaker().value).toBe('closed');
            expect(h.breaker().context.failures).toBe(0);
            stats.direct++;
            if (failedBefore) stats.directAfterFailure++;
          }
        } else pending.push(id);
      } else if (op.op === 'release' && open.length > 0) {
        const [id] = open.splice(op.pick % open.length, 1);
        h.release(id!, op.verdict);
        if (op.verdict === 'failure') failedBefore = true;
      } else if (op.op === 'cancel' && pending.length > 0) {
        const [id] = pending.splice(op.pick % pending.length, 1);
        h.cancel(id!);
      } else if (op.op === 'wait') h.at(breaker.cooldownMs);
      else done = null; // nothing to release or cancel, or enough requests out
      // Requests held at the breaker may have been let through meanwhile.
      for (let i = pending.length - 1; i >= 0; i--) if (h.granted(pending[i]!)) open.push(...pending.splice(i, 1));
      each(h, done);
    }
    return stats;
  }

  it('a breaker that never opens counts exactly the consecutive failures, though the pool keeps successes on a clean route', () => {
    const total = { direct: 0, directAfterFailure: 0, viaBreaker: 0 };
    fc.assert(
      fc.property(ops(false), (script) => {
        let expected = 0; // consecutive failures, as a breaker that heard every outcome counts them
        const stats = play(script, { failureThreshold: 1_000, cooldownMs: 1_000 }, (h, op) => {
          if (op?.op === 'release') {
            if (op.verdict === 'failure') expected++;
            else if (op.verdict === 'success') expected = 0;
          }
          expect(h.breaker().context.failures).toBe(expected);
        });
        for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += stats[k];
      }),
      { numRuns: 150 },
    );
    // The interesting cases were reached: straight grants after a failure was reset, and grants through the breaker.
    expect(total.directAfterFailure).toBeGreaterThan(200);
    expect(total.viaBreaker).toBeGreaterThan(200);
  });

  it('with a breaker that opens and probes, the pool lets a request through on its own only while the breaker is clear', () => {
    const total = { direct: 0, directAfterFailure: 0, viaBreaker: 0 };
    fc.assert(
      fc.property(ops(true), (script) => {
        const stats = play(script, { failureThreshold: 2, cooldownMs: 1_000 }, () => {});
        for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += stats[k];
      }),
      { numRuns: 150 },
    );
    expect(total.directAfterFailure).toBeGreaterThan(100);
    expect(total.viaBreaker).toBeGreaterThan(100);
  });
});
