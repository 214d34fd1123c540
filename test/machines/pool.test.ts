import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createMachine, SimulatedClock } from 'xstate';
import { poolMachine } from '../../machines/pool.machine.js';
import type { PoolInput } from '../../machines/pool.machine.js';
import { nextRandom } from '../../machines/random.js';
import type { KeyContext } from '../../machines/key.machine.js';
import { UNDER_MEASURED } from '../../machines/keyLearn.js';
import { keyActorId } from '../../machines/poolBook.js';
import type { KeyLimits, LeaseOutcome, LeaseReply, Usage } from '../../machines/protocol.js';
import { advanceClock } from '../helpers/clock.js';

const usage = (inputTokens: number, outputTokens: number): Usage => ({ inputTokens, outputTokens, cacheWriteTokens: 0, cacheReadTokens: 0 });
const OK: LeaseOutcome = { kind: 'ok', usage: usage(10, 10) };


/** A pool on a SimulatedClock, with one agent stand-in that logs every reply. */
function harness(keys: PoolInput['keys']) {
  const clock = new SimulatedClock();
  const replies: Array<{ at: number; reply: LeaseReply }> = [];
  const grants = new Map<string, Extract<LeaseReply, { type: 'LEASE.GRANTED' }>>();
  const grantOrder: string[] = [];
  const onReply = (reply: LeaseReply) => {
    replies.push({ at: clock.now(), reply });
    if (reply.type === 'LEASE.GRANTED') grants.set(reply.requestId, reply) && grantOrder.push(reply.requestId);
  };
  const agent = createActor(createMachine({ on: { '*': { actions: ({ event }) => onReply(event as LeaseReply) } } })).start();
  const pool = createActor(poolMachine, { clock, input: { provider: 'acme', keys } }).start();
  const granted = () => grantOrder.map((id) => grants.get(id)!);
  const grantOf = (requestId: string) => grants.get(requestId)!;
  return {
    clock,
    pool,
    replies,
    granted,
    grantedIds: () => [...grantOrder],
    lastGranted: () => grantOrder[grantOrder.length - 1],
    keyOf: (requestId: string) => grantOf(requestId)?.keyId,
    denied: () => replies.flatMap((r) => (r.reply.type === 'LEASE.DENIED' ? [r.reply] : [])),
    request: (requestId: string, priority = 0, inputTokens = 10, outputTokens = 10) =>
      pool.send({ type: 'LEASE.REQUEST', requestId, priority, inputTokens, outputTokens, replyTo: agent }),
    release: (requestId: string, outcome: LeaseOutcome = OK) => {
      const { leaseId, keyId } = grantOf(requestId);
      pool.send({ type: 'LEASE.RELEASE', leaseId, keyId, outcome });
    },
    cancel: (requestId: string) => pool.send({ type: 'LEASE.CANCEL', requestId }),
    at: (ms: number) => advanceClock(clock, ms),
  };
}

const key = (keyId: string, limits: KeyLimits) => ({ keyId, limits });

describe('poolMachine: order', () => {
  it('grants by priority, then first come first served', () => {
    const h = harness([key('A', { concurrency: 1 })]);
    h.request('first', 0);
    for (const [id, priority] of [['a', 1], ['b', 3], ['c', 1], ['d', 2], ['e', 3]] as const) h.request(id, priority);
    expect(h.grantedIds()).toEqual(['first']);
    for (let i = 0; i < 5; i++) h.release(h.grantedIds().at(-1)!);
    expect(h.grantedIds()).toEqual(['first', 'b', 'e', 'd', 'a', 'c']);
  });

  it('keeps order at 10,000 queued requests, with O(log n) work per event', () => {
    const h = harness([key('A', { concurrency: 1 })]);
    let seed = 7;
    const expected: Array<{ id: string; priority: number; seq: number }> = [];
    h.request('head', 100);
    for (let i = 0; i < 10_000; i++) {
      let r: number;
      [r, seed] = nextRandom(seed);
      const priority = Math.floor(r * 5);
      expected.push({ id: `r${i}`, priority, seq: i });
      h.request(`r${i}`, priority);
    }
    // Counted, not timed (a loaded machine is slow whatever the complexity): the queue's
    // comparisons while 10,000 releases each pop the next request, at most 2 per heap level.
    const queue = h.pool.getSnapshot().context.book.queue as unknown as { before: (a: unknown, b: unknown) => boolean };
    const before = queue.before;
    let comparisons = 0;
    queue.before = (a, b) => (comparisons++, before(a, b));
    for (let i = 0; i < 10_000; i++) h.release(h.lastGranted());
    expect(comparisons).toBeGreaterThan(0);
    expect(comparisons).toBeLessThanOrEqual(10_000 * 2 * Math.ceil(Math.log2(10_001)));
    expected.sort((a, b) => b.priority - a.priority || a.seq - b.seq);
    expect(h.grantedIds().slice(1)).toEqual(expected.map((e) => e.id));
  });
});

describe('poolMachine: capacity', () => {
  it('grants nothing while every key is saturated, and resumes when the clock refills them', () => {
    // rpm 2 paced at 97%: a bucket of one request, refilled every 30,928 ms; no minute at once.
    const h = harness([key('A', { rpm: 2 }), key('B', { rpm: 2 })]);
    const every = Math.ceil(60_000 / (2 * 0.97));
    for (let i = 0; i < 6; i++) h.request(`r${i}`);
    expect(h.grantedIds()).toEqual(['r0', 'r1']);
    for (const id of h.grantedIds()) h.release(id);
    h.at(every - 1);
    expect(h.granted()).toHaveLength(2);
    h.at(every);
    expect(h.grantedIds()).toEqual(['r0', 'r1', 'r2', 'r3']);
    h.at(2 * every);
    expect(h.grantedIds()).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
    expect(h.replies.at(-1)!.at).toBe(2 * every);
  });

  it('sends the next requests to key B while key A backs off after a 429, then uses A again', () => {
    const h = harness([key('A', {}), key('B', {})]);
    h.request('r1');
    expect(h.keyOf('r1')).toBe('A');
    h.release('r1', { kind: 'rate_limited', retryAfterMs: 10_000 });
    for (const id of ['r2', 'r3', 'r4']) h.request(id);
    expect(['r2', 'r3', 'r4'].map(h.keyOf)).toEqual(['B', 'B', 'B']);
    h.at(9_999);
    h.request('r5');
    expect(h.keyOf('r5')).toBe('B');
    h.at(10_000);
    h.request('r6');
    h.request('r7');
    expect([h.keyOf('r6'), h.keyOf('r7')]).toContain('A');
  });

  it('denies every queued and every later request with no_keys once every key is revoked', () => {
    const h = harness([key('A', { concurrency: 1 }), key('B', { concurrency: 1 })]);
    for (const id of ['r1', 'r2', 'r3', 'r4']) h.request(id);
    expect(h.grantedIds()).toEqual(['r1', 'r2']);
    h.release('r1', { kind: 'auth' });
    expect(h.grantedIds()).toEqual(['r1', 'r2']); // A is gone, B still busy
    expect(h.denied()).toEqual([]);
    h.release('r2', { kind: 'auth' });
    h.request('r5');
    expect(h.denied().map((d) => d.requestId)).toEqual(['r3', 'r4', 'r5']);
    expect(h.denied()[0].error).toMatchObject({ code: 'no_keys', retryable: false, provider: 'acme' });
    expect(h.denied()[0].error.message).toMatch(/every key of provider acme is revoked \(401\/403\)/);
    expect(h.pool.getSnapshot().value).toBe('exhausted');
  });

  it('denies at once when the provider has no keys', () => {
    const h = harness([]);
    h.request('r1');
    expect(h.denied()).toMatchObject([{ requestId: 'r1', error: { code: 'no_keys' } }]);
  });
});

describe('poolMachine: keys that meet nothing but 429s', () => {
  const limited = (keyId: string) => ({ keyId, limits: { rpm: 6_000, concurrency: 1 }, maxRateLimitedMs: 5_000 });
  const LIMITED: LeaseOutcome = { kind: 'rate_limited', retryAfterMs: 2_000 };

  it('denies the waiting requests and every later one with rate_limited once its last key is set aside', () => {
    const h = harness([limited('A'), limited('B')]);
    for (let i = 0; i < 10; i++) h.request(`r${i}`);
    // Every answer is a 429 (Retry-After 2 s): both keys back off together and take the next two at their end.
    for (const t of [0, 2_000, 4_000]) {
      h.at(t);
      const out = h.grantedIds().slice(-2);
      expect(out).toEqual([`r${t / 1_000}`, `r${t / 1_000 + 1}`]);
      for (const id of out) h.release(id, LIMITED);
    }
    h.at(4_999);
    expect(h.denied()).toEqual([]);
    h.at(5_000);
    expect(h.denied().map((d) => d.requestId)).toEqual(['r6', 'r7', 'r8', 'r9']);
    h.request('later');
    expect(h.denied().map((d) => d.requestId)).toEqual(['r6', 'r7', 'r8', 'r9', 'later']);
    for (const { error } of h.denied()) {
      expect(error).toMatchObject({ code: 'rate_limited', retryable: false, provider: 'acme' });
      expect(error.message).toBe(
        'every key of provider acme is set aside: each met nothing but 429s (rate limited) for 5000 ms (maxRateLimitedMs). Add keys, wait for the limit to lift, or check the provider\'s limits for these keys',
      );
    }
    expect(h.grantedIds()).toHaveLength(6);
  });

  it('says what became of each key when one was revoked and the other set aside', () => {
    const h = harness([limited('A'), limited('B')]);
    for (const id of ['r0', 'r1', 'w']) h.request(id);
    h.release('r0', { kind: 'auth' });
    h.release('r1', { kind: 'rate_limited', retryAfterMs: 6_000 });
    h.at(5_000);
    expect(h.denied()).toEqual([
      {
        type: 'LEASE.DENIED',
        requestId: 'w',
        error: {
          code: 'rate_limited',
          retryable: false,
          provider: 'acme',
          message:
            "no key of provider acme is left: 1 revoked (401/403), 1 set aside after nothing but 429s (rate limited) for 5000 ms (maxRateLimitedMs). Add keys, wait for the limit to lift, or check the provider's limits for these keys",
        },
      },
    ]);
  });

  it('sends nothing more to a key set aside while its other keys serve', () => {
    const h = harness([limited('A'), { keyId: 'B', limits: { rpm: 6_000 } }]);
    let n = 0;
    for (let t = 0; t <= 6_000; t += 500) {
      h.at(t);
      // Two requests each step: A (while it is in service) answers 429, B answers.
      for (const id of [`r${n++}`, `r${n++}`]) {
        h.request(id);
        if (h.keyOf(id) !== undefined) h.release(id, h.keyOf(id) === 'A' ? LIMITED : OK);
      }
    }
    const onA = h.granted().filter((g) => g.keyId === 'A');
    expect(onA.length).toBeGreaterThan(1);
    expect(h.replies.filter((r) => r.reply.type === 'LEASE.GRANTED' && r.reply.keyId === 'A' && r.at >= 5_000)).toEqual([]);
    expect(h.replies.filter((r) => r.reply.type === 'LEASE.GRANTED' && r.at >= 5_000).length).toBeGreaterThan(0);
    expect(h.denied()).toEqual([]);
  });
});

describe('poolMachine: cancel and stale state', () => {
  it('releases the slot of a lease cancelled after its grant: the next request gets it', () => {
    const h = harness([key('A', { concurrency: 1, rpm: 1 })]);
    h.request('r1');
    h.request('r2');
    h.cancel('r1');
    expect(h.grantedIds()).toEqual(['r1', 'r2']); // rpm 1: only possible if r1's slot came back
    h.request('r3');
    h.cancel('r3'); // still queued: dropped
    h.release('r2');
    h.request('r4');
    h.at(120_000);
    expect(h.grantedIds()).toEqual(['r1', 'r2', 'r4']);
    expect(h.replies.filter((r) => r.reply.requestId === 'r3')).toEqual([]);
  });

  it('never tells the agent about a grant the key refused: the request keeps its place', () => {
    const h = harness([key('A', {})]);
    h.request('r1');
    h.release('r1', { kind: 'rate_limited', retryAfterMs: 5_000 });
    h.request('r2');
    h.request('r3', 0);
    // A stale "ready" (sent before the key heard of the 429): the pool tries, the key refuses.
    h.pool.send({ type: 'KEY.STATE', keyId: 'A', state: 'ready' });
    expect(h.grantedIds()).toEqual(['r1']);
    h.at(4_999);
    expect(h.grantedIds()).toEqual(['r1']);
    // A lone 429, with nothing admitted before it, measures no rate (machines/keyLearn.ts): at
    // the end of the backoff the key takes both.
    h.at(5_000);
    expect(h.grantedIds()).toEqual(['r1', 'r2', 'r3']);
  });

  it('ignores a second release of the same lease', () => {
    const h = harness([key('A', { concurrency: 1 })]);
    h.request('r1');
    h.release('r1');
    h.release('r1', { kind: 'auth' });
    h.request('r2');
    expect(h.grantedIds()).toEqual(['r1', 'r2']);
  });

  it('ignores a request sent again with the same id, granted or queued: the first one stands', () => {
    const h = harness([key('A', { concurrency: 1 })]);
    h.request('r1');
    h.request('r2');
    h.request('r1', 5); // granted already
    h.request('r2', 5); // queued: keeps its one place
    h.request('r3');
    expect(h.grantedIds()).toEqual(['r1']);
    h.release('r1');
    h.release('r2');
    h.release('r3');
    expect(h.grantedIds()).toEqual(['r1', 'r2', 'r3']);
    expect(h.pool.getSnapshot().context.book.waiting).toBe(0);
    expect(h.replies).toHaveLength(3);
  });
});

// ---------------------------------------------------------------------------------------------
// Property: random requests, releases, cancels and waits; every request is answered exactly once
// (or never, when cancelled while queued), and no key goes over its limits.
// ---------------------------------------------------------------------------------------------

type Op =
  | { kind: 'request'; priority: number }
  | { kind: 'release'; pick: number; outcome: LeaseOutcome }
  | { kind: 'cancel'; pick: number }
  | { kind: 'wait'; ms: number };

const outcomeArb: fc.Arbitrary<LeaseOutcome> = fc.oneof(
  { weight: 6, arbitrary: fc.constant(OK) },
  { weight: 2, arbitrary: fc.constant({ kind: 'error' } as const) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('rate_limited' as const), retryAfterMs: fc.integer({ min: 0, max: 30_000 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'rate_limited' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unused' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'auth' } as const) },
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('request' as const), priority: fc.nat(3) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat(), outcome: outcomeArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.oneof(fc.nat(3_000), fc.nat(70_000)) }) },
);

const keysArb = fc.array(fc.record({ rpm: fc.integer({ min: 1, max: 4 }), concurrency: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 3 });

describe('poolMachine: properties', () => {
  it('answers every request exactly once and keeps every key within its limits', () => {
    fc.assert(
      fc.property(keysArb, fc.array(opArb, { maxLength: 60 }), (limits, ops) => {
        const h = harness(limits.map((l, i) => key(`k${i}`, l)));
        const limitsOf = new Map(limits.map((l, i) => [`k${i}`, l]));
        const held = new Set<string>(); // granted, not released or cancelled
        const cancelled = new Set<string>();
        const outOn = new Map<string, number>(); // leases out per key, as the agents see it
        const unused = new Set<string>();
        const answered = new Set<string>();
        let n = 0;
        let seen = 0;
        /** Book-keeps grants as they arrive and checks concurrency at every moment. */
        const observe = () => {
          for (; seen < h.replies.length; seen++) {
            const { reply } = h.replies[seen];
            answered.add(reply.requestId);
            if (reply.type !== 'LEASE.GRANTED') continue;
            held.add(reply.requestId);
            outOn.set(reply.keyId, (outOn.get(reply.keyId) ?? 0) + 1);
            expect(outOn.get(reply.keyId)).toBeLessThanOrEqual(limitsOf.get(reply.keyId)!.concurrency);
          }
        };
        const giveBack = (requestId: string, how: LeaseOutcome | 'cancel') => {
          const keyId = h.keyOf(requestId)!;
          held.delete(requestId);
          outOn.set(keyId, outOn.get(keyId)! - 1);
          if (how === 'cancel' || how.kind === 'unused') unused.add(requestId);
          if (how === 'cancel') h.cancel(requestId);
          else h.release(requestId, how);
        };
        for (const op of ops) {
          if (op.kind === 'request') h.request(`r${n++}`, op.priority);
          if (op.kind === 'wait') h.at(h.clock.now() + op.ms);
          if (op.kind === 'release' && held.size > 0) giveBack([...held][op.pick % held.size], op.outcome);
          if (op.kind === 'cancel') {
            // Half the time a request still waiting, else one granted and held.
            const waiting = Array.from({ length: n }, (_, i) => `r${i}`).filter((id) => !answered.has(id) && !cancelled.has(id));
            if (op.pick % 2 === 0 && waiting.length > 0) {
              const requestId = waiting[op.pick % waiting.length];
              cancelled.add(requestId);
              h.cancel(requestId);
            } else if (held.size > 0) giveBack([...held][op.pick % held.size], 'cancel');
          }
          observe();
        }
        // Drain: give everything back and let time pass until every request is answered.
        for (let round = 0; round < 20; round++) {
          for (const requestId of [...held]) giveBack(requestId, OK);
          h.at(h.clock.now() + 120_000);
          observe();
        }
        for (let i = 0; i < n; i++) {
          const answers = h.replies.filter((r) => r.reply.requestId === `r${i}`);
          expect(answers.length).toBe(cancelled.has(`r${i}`) ? 0 : 1);
        }
        // rpm: the used grants of each key, never rpm + 1 within 60 s.
        for (const [keyId, { rpm }] of limitsOf) {
          const times = h.replies
            .filter((r) => r.reply.type === 'LEASE.GRANTED' && r.reply.keyId === keyId && !unused.has(r.reply.requestId))
            .map((r) => r.at);
          for (let i = 0; i + rpm < times.length; i++) expect(times[i + rpm] - times[i]).toBeGreaterThanOrEqual(60_000);
        }
      }),
      { seed: 42, numRuns: 200 },
    );
  });
});

describe('poolMachine: the common ways cost no action list', () => {
  /** The kinds of the actions the pool's machine picks for `event` now (enqueueActions builds a list per call). */
  const actionKinds = (h: ReturnType<typeof harness>, event: Parameters<typeof poolMachine.getTransitionData>[1]) => {
    const [transition] = poolMachine.getTransitionData(h.pool.getSnapshot(), event);
    const impls = poolMachine.implementations.actions as Record<string, { type?: string }>;
    return transition!.actions.map((a) => {
      const name = typeof a === 'string' ? a : (a as { type: string }).type;
      return impls[name]?.type ?? name;
    });
  };

  it('a request a ready key takes at once, and the release of its lease, are fixed actions (no enqueueActions)', () => {
    const h = harness([key('A', { concurrency: 2 })]);
    const agent = createActor(createMachine({})).start();
    const request = { type: 'LEASE.REQUEST' as const, requestId: 'r1', priority: 0, inputTokens: 10, outputTokens: 10, replyTo: agent };
    expect(actionKinds(h, request)).not.toContain('xstate.enqueueActions');
    h.request('r1');
    const { leaseId, keyId } = h.granted()[0]!;
    expect(actionKinds(h, { type: 'LEASE.RELEASE', leaseId, keyId, outcome: OK })).not.toContain('xstate.enqueueActions');
    // And they do what the general way does: the grant was booked, the release gives the slot back.
    h.release('r1');
    h.request('r2');
    h.request('r3');
    expect(h.grantedIds()).toEqual(['r1', 'r2', 'r3']);
    h.request('r4');
    expect(h.grantedIds()).toEqual(['r1', 'r2', 'r3']);
    h.release('r2');
    expect(h.grantedIds()).toEqual(['r1', 'r2', 'r3', 'r4']);
  });
});

describe('poolMachine: a rate learned from 429s', () => {
  it('passes the rate one key measured from its 429s to the others: a key with none of its own starts from it', () => {
    const h = harness([key('A', { concurrency: 1 }), key('B', { concurrency: 1 }), key('C', { rpm: 600 })]);
    const contextOf = (keyId: string) => (h.pool.getSnapshot().children[keyActorId(keyId)]!.getSnapshot() as { context: KeyContext }).context;
    let n = 0;
    /** Requests until key A takes one (B's and C's are answered at once), and answers A's with `outcome`. */
    const onA = (outcome: LeaseOutcome) => {
      for (let tries = 0; tries < 20; tries++) {
        const id = `r${n++}`;
        h.request(id);
        if (h.keyOf(id) === 'A') return h.release(id, outcome);
        h.release(id);
      }
      throw new Error('key A took nothing');
    };
    onA({ kind: 'rate_limited' }); // the first 429, at 0: nothing admitted before it, no rate
    expect(contextOf('B').learning?.measured).toBeUndefined();
    for (let i = 0; i < 5; i++) {
      h.at(1_000 + i * 300);
      onA(OK);
    }
    h.at(2_600);
    onA({ kind: 'rate_limited' }); // 5 admitted in the 2.6 s since the first 429
    const measured = (5 * 60_000) / 2_600;
    expect(contextOf('A').learning?.measured).toBeCloseTo(measured);
    expect(contextOf('B').learning?.measured).toBeCloseTo(measured); // from A, through the pool
    expect(contextOf('B').adaptive).toBeCloseTo(measured * UNDER_MEASURED);
    expect(contextOf('C').learning?.measured).toBeUndefined(); // its rate is stated: not a peer's business
  });
});
