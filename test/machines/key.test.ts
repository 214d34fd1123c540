import { getShortestPaths } from '@xstate/graph';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, setup, SimulatedClock, spawnChild } from 'xstate';
import type { ActorRefFrom } from 'xstate';
import { keyMachine } from '../../machines/key.machine.js';
import type { KeyEvent, KeyReply } from '../../machines/key.machine.js';
import { advance, canGrant, grant, msUntilCapacity, newBook, rateLimitDelay, release } from '../../machines/keyLimits.js';
import type { KeyLimits, KeyState, LeaseOutcome, LeaseRequest, RunEvent, Usage } from '../../machines/protocol.js';
import { advanceClock, pendingTimers } from '../helpers/clock.js';

const request = (inputTokens = 10, outputTokens = 10): LeaseRequest => ({ requestId: 'r', priority: 0, inputTokens, outputTokens });
const usage = (inputTokens: number, outputTokens: number): Usage => ({ inputTokens, outputTokens, cacheWriteTokens: 0, cacheReadTokens: 0 });



/** A key under a minimal parent that logs what the key tells it, on a SimulatedClock. */
function harness(limits: KeyLimits, probation?: boolean) {
  const clock = new SimulatedClock();
  const replies: Array<{ at: number; reply: KeyReply }> = [];
  const reports: Array<RunEvent & { at: number }> = [];
  const key = keyMachine.provide({ actions: { report: (_, e: RunEvent) => void reports.push({ ...e, at: clock.now() }) } });
  const parent = createActor(
    setup({ actors: { key } }).createMachine({
      entry: spawnChild('key', { id: 'key', input: probation === undefined ? { keyId: 'k1', limits } : { keyId: 'k1', limits, probation } }),
      on: { '*': { actions: ({ event }) => void replies.push({ at: clock.now(), reply: event as KeyReply }) } },
    }),
    { clock },
  ).start();
  const ref = parent.getSnapshot().children.key as ActorRefFrom<typeof keyMachine>;
  const state = (): KeyState => {
    const snap = ref.getSnapshot();
    return (typeof snap.value === 'string' ? snap.value : Object.keys(snap.value)[0]) as KeyState;
  };
  return {
    clock,
    replies,
    reports,
    ref,
    state,
    grant: (leaseId: string, req = request()) => ref.send({ type: 'KEY.GRANT', leaseId, request: req }),
    release: (leaseId: string, outcome: LeaseOutcome) => ref.send({ type: 'KEY.RELEASE', leaseId, outcome }),
    at: (ms: number) => advanceClock(clock, ms),
    last: () => replies[replies.length - 1]?.reply,
    answers: () => replies.filter((r) => r.reply.type !== 'KEY.STATE').map((r) => r.reply),
  };
}

describe('keyMachine: graph', () => {
  it('reaches ready, saturated (by refill and by release), backoff and revoked by shortest paths', () => {
    const quiet = keyMachine.provide({ actions: { tellPool: () => {} } });
    const ok: LeaseOutcome = { kind: 'ok', usage: usage(10, 10) };
    const events = [
      ...['a', 'b'].map((leaseId): KeyEvent => ({ type: 'KEY.GRANT', leaseId, request: request() })),
      ...['a', 'b'].flatMap((leaseId): KeyEvent[] => [
        { type: 'KEY.RELEASE', leaseId, outcome: ok },
        { type: 'KEY.RELEASE', leaseId, outcome: { kind: 'rate_limited', retryAfterMs: 5_000 } },
        { type: 'KEY.RELEASE', leaseId, outcome: { kind: 'auth' } },
      ]),
      { type: 'xstate.after.refill.key.saturated.untilRefill' },
      { type: 'xstate.after.backoffEnds.key.backoff' },
    ] as KeyEvent[];
    const paths = getShortestPaths(quiet, {
      input: { keyId: 'k1', limits: { concurrency: 1, rpm: 2 } },
      events,
      serializeState: (s) => JSON.stringify([s.value, s.context.leasesOut, s.context.window.length, s.context.strikes]),
    });
    const reached = new Set(paths.map((p) => JSON.stringify(p.state.value)));
    for (const value of ['ready', { saturated: 'untilRefill' }, { saturated: 'untilRelease' }, 'backoff', 'revoked']) {
      expect(reached).toContain(JSON.stringify(value));
    }
    expect(paths.every((p) => p.state.value !== 'deciding')).toBe(true);
  });
});

describe('keyMachine: limits', () => {
  it('starts ready and tells its parent so', () => {
    const h = harness({ rpm: 10 });
    expect(h.state()).toBe('ready');
    expect(h.last()).toEqual({ type: 'KEY.STATE', keyId: 'k1', state: 'ready' });
    expect(h.reports).toEqual([{ type: 'key:state', keyId: 'k1', state: 'ready', at: 0 }]);
  });

  it('saturates when every lease slot is out, sets no timer, and a release frees it', () => {
    const h = harness({ concurrency: 2 });
    h.grant('a');
    expect(h.state()).toBe('ready');
    h.grant('b');
    expect(h.state()).toBe('saturated');
    expect(pendingTimers(h.clock)).toBe(0);
    h.grant('c');
    expect(h.answers()).toEqual([
      { type: 'KEY.GRANTED', keyId: 'k1', leaseId: 'a' },
      { type: 'KEY.GRANTED', keyId: 'k1', leaseId: 'b' },
      { type: 'KEY.REJECTED', keyId: 'k1', leaseId: 'c', request: request() },
    ]);
    expect(h.last()).toEqual({ type: 'KEY.STATE', keyId: 'k1', state: 'saturated' });
    h.release('a', { kind: 'ok', usage: usage(1, 1) });
    expect(h.state()).toBe('ready');
  });

  it('never grants more than rpm in 60 s: the oldest grant leaves the window at exactly +60 s', () => {
    const h = harness({ rpm: 2 });
    h.grant('a');
    h.at(10_000);
    h.grant('b');
    expect(h.state()).toBe('saturated');
    h.at(59_999);
    expect(h.state()).toBe('saturated');
    h.at(60_000);
    expect(h.state()).toBe('ready');
    expect(h.replies.find((r) => r.reply.type === 'KEY.STATE' && r.reply.state === 'ready' && r.at > 0)?.at).toBe(60_000);
  });

  it('debits token estimates at grant, lets a big request run into debt, and refills continuously', () => {
    const h = harness({ itpm: 6_000 }); // 0.1 token per ms
    h.grant('a', request(12_000, 0));
    expect(h.state()).toBe('saturated'); // bucket at -6000: needs 6001 tokens = 60010 ms
    h.at(60_009);
    expect(h.state()).toBe('saturated');
    h.at(60_010);
    expect(h.state()).toBe('ready');
  });

  it('settles tokens to actual usage at release, never above capacity', () => {
    let book = advance(newBook({ itpm: 1_000, otpm: 500 }, 0), 0);
    book = grant(book, 'a', request(800, 400));
    expect([book.inputTokens, book.outputTokens]).toEqual([200, 100]);
    book = release(book, 'a', { kind: 'ok', usage: { inputTokens: 100, outputTokens: 50, cacheWriteTokens: 100, cacheReadTokens: 5_000 } });
    expect([book.inputTokens, book.outputTokens]).toEqual([800, 450]); // cache reads do not count
    book = grant(book, 'b', request(10, 10));
    book = release(book, 'b', { kind: 'unused' });
    expect([book.inputTokens, book.outputTokens]).toEqual([800, 450]);
    expect(grant(grant(book, 'x', request(1, 1)), 'x', request(1, 1)).leasesOut).toBe(1); // a repeated id counts once
    book = grant(book, 'c', request(0, 0));
    book = release(book, 'c', { kind: 'ok', usage: usage(2_000, 0) });
    expect(book.inputTokens).toBe(-1_200); // used more than estimated: debt
  });

  it('counts a call sent later than granted (it waited for a worker) from when it was sent', () => {
    let book = advance(newBook({ rpm: 2 }, 0), 0);
    book = grant(book, 'a', request(1, 1));
    book = grant(book, 'b', request(1, 1));
    expect(book.window).toEqual([0, 0]);
    book = advance(book, 3_000);
    book = release(book, 'a', { kind: 'ok', usage: usage(1, 1), sentAt: 2_500 });
    book = release(book, 'b', { kind: 'ok', usage: usage(1, 1), sentAt: -5 }); // earlier than granted: no move
    expect(book.window).toEqual([0, 2_500]);
    // One slot frees at 60 s (b's grant), the other only at 62.5 s (a's send), not at 60 s.
    book = advance(book, 60_001);
    expect(canGrant(book)).toBe(true);
    book = grant(book, 'c', request(1, 1));
    expect(canGrant(book)).toBe(false);
    expect(msUntilCapacity(book)).toBe(2_499); // a's send (2.5 s) + 60 s - now (60.001 s)
  });

  it('refunds the window slot and the tokens of an unused lease', () => {
    const h = harness({ rpm: 1, otpm: 100 });
    h.grant('a', request(0, 100));
    expect(h.state()).toBe('saturated');
    h.release('a', { kind: 'unused' });
    expect(h.state()).toBe('ready');
    expect(h.ref.getSnapshot().context.window).toEqual([]);
  });

  it('pauses grants until the reset when the server says no requests remain', () => {
    const h = harness({});
    h.grant('a');
    h.at(1_000);
    h.release('a', { kind: 'ok', usage: usage(1, 1), rateLimit: { requestsRemaining: 0, requestsResetMs: 3_000 } });
    expect(h.state()).toBe('saturated');
    h.at(3_999);
    expect(h.state()).toBe('saturated');
    h.at(4_000);
    expect(h.state()).toBe('ready');
  });

  it('lowers a token bucket to what the server says remains', () => {
    const h = harness({ otpm: 60_000 }); // 1 token per ms
    h.grant('a', request(0, 10));
    h.release('a', { kind: 'ok', usage: usage(0, 10), rateLimit: { outputTokensRemaining: -49 } });
    expect(h.state()).toBe('saturated');
    h.at(49);
    expect(h.state()).toBe('saturated');
    h.at(50);
    expect(h.state()).toBe('ready');
  });

  it('ignores a release of an unknown lease but still tells its parent where it is', () => {
    const h = harness({ concurrency: 1 });
    h.grant('a');
    h.release('a', { kind: 'ok', usage: usage(1, 1) });
    const before = h.replies.length;
    h.release('a', { kind: 'auth' });
    expect(h.state()).toBe('ready');
    expect(h.replies.slice(before).map((r) => r.reply)).toEqual([{ type: 'KEY.STATE', keyId: 'k1', state: 'ready' }]);
  });
});

describe('keyMachine: probation', () => {
  it('takes one request at a time until the server accepts the key, then its full concurrency', () => {
    const h = harness({ concurrency: 4 }, true);
    h.grant('a');
    expect(h.state()).toBe('saturated');
    h.grant('b');
    expect(h.answers().map((a) => a.type)).toEqual(['KEY.GRANTED', 'KEY.REJECTED']);
    h.release('a', { kind: 'ok', usage: usage(1, 1) });
    for (const id of ['c', 'd', 'e']) h.grant(id);
    expect(h.state()).toBe('ready');
    h.grant('f');
    expect(h.state()).toBe('saturated');
    expect(h.ref.getSnapshot().context.leasesOut).toBe(4);
  });

  it('is proven by a 429 too (the key authenticated), but not by a server error', () => {
    const h = harness({}, true);
    h.grant('a');
    h.release('a', { kind: 'error' });
    expect(h.ref.getSnapshot().context.proven).toBe(false);
    h.grant('b');
    h.release('b', { kind: 'rate_limited', retryAfterMs: 10 });
    expect(h.ref.getSnapshot().context.proven).toBe(true);
  });

  it('a bad key on probation is used once: its 401 revokes it before a second request', () => {
    const h = harness({ concurrency: 8 }, true);
    h.grant('a');
    h.grant('b');
    h.release('a', { kind: 'auth' });
    expect(h.state()).toBe('revoked');
    expect(h.answers().map((a) => a.type).filter((t) => t.startsWith('KEY.'))).toEqual(['KEY.GRANTED', 'KEY.REJECTED']);
  });
});

describe('keyMachine: 429 and auth', () => {
  it('backs off for the Retry-After exactly, rejecting grants meanwhile', () => {
    const h = harness({});
    h.grant('a');
    h.release('a', { kind: 'rate_limited', retryAfterMs: 5_000 });
    expect(h.state()).toBe('backoff');
    expect(h.reports).toContainEqual({ type: 'key:backoff', keyId: 'k1', retryAfterMs: 5_000, at: 0 });
    h.grant('b');
    expect(h.answers().at(-1)).toMatchObject({ type: 'KEY.REJECTED', leaseId: 'b' });
    h.at(4_999);
    expect(h.state()).toBe('backoff');
    h.at(5_000);
    expect(h.state()).toBe('ready');
  });

  it('extends backoff on a later 429 and never shortens it', () => {
    const h = harness({});
    for (const id of ['a', 'b', 'c']) h.grant(id);
    h.release('a', { kind: 'rate_limited', retryAfterMs: 5_000 });
    h.at(1_000);
    h.release('b', { kind: 'rate_limited', retryAfterMs: 1_000 }); // would end at 2000: ignored
    h.at(4_999);
    expect(h.state()).toBe('backoff');
    h.release('c', { kind: 'rate_limited', retryAfterMs: 3_000 }); // extends to 7999
    h.at(7_998);
    expect(h.state()).toBe('backoff');
    h.at(7_999);
    expect(h.state()).toBe('ready');
  });

  it('without Retry-After waits 1 s, doubling on consecutive 429s, capped at 60 s, reset by a success', () => {
    expect([1, 2, 3, 4, 7, 8, 50].map((n) => rateLimitDelay(n, undefined))).toEqual([1_000, 2_000, 4_000, 8_000, 60_000, 60_000, 60_000]);
    const h = harness({});
    const backoffs = () => h.reports.filter((r) => r.type === 'key:backoff').map((r) => (r as { retryAfterMs: number }).retryAfterMs);
    let t = 0;
    for (const id of ['a', 'b', 'c']) {
      h.grant(id);
      h.release(id, { kind: 'rate_limited' });
      t += 100_000;
      h.at(t);
    }
    h.grant('ok');
    h.release('ok', { kind: 'ok', usage: usage(1, 1) });
    h.grant('d');
    h.release('d', { kind: 'rate_limited' });
    expect(backoffs()).toEqual([1_000, 2_000, 4_000, 1_000]);
  });

  it('is revoked for good on an auth failure and says so', () => {
    const h = harness({});
    h.grant('a');
    h.release('a', { kind: 'auth' });
    expect(h.ref.getSnapshot().status).toBe('done');
    expect(h.replies.map((r) => r.reply.type).slice(-2)).toEqual(['KEY.STATE', 'xstate.done.actor.key']);
    expect(h.replies.at(-2)?.reply).toEqual({ type: 'KEY.STATE', keyId: 'k1', state: 'revoked' });
    expect(h.reports.map((r) => r.type)).toEqual(['key:state', 'key:state', 'key:revoked']);
  });

  it('reports key:state only when the state changes', () => {
    const h = harness({ rpm: 1 });
    h.grant('a');
    h.at(30_000);
    h.grant('b'); // rejected while saturated: no new key:state
    h.at(60_000);
    expect(h.reports.filter((r) => r.type === 'key:state').map((r) => [(r as { state: string }).state, r.at])).toEqual([
      ['ready', 0],
      ['saturated', 0],
      ['ready', 60_000],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// Property: random grants, releases and clock moves never break the key's promises.
// ---------------------------------------------------------------------------------------------

type Op =
  | { kind: 'grant'; input: number; output: number }
  | { kind: 'release'; pick: number; outcome: LeaseOutcome }
  | { kind: 'wait'; ms: number };

const outcomeArb: fc.Arbitrary<LeaseOutcome> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('ok' as const), usage: fc.tuple(fc.nat(3_000), fc.nat(1_000)).map(([i, o]) => usage(i, o)) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('ok' as const),
      usage: fc.constant(usage(10, 10)),
      rateLimit: fc.record({ requestsRemaining: fc.constant(0), requestsResetMs: fc.integer({ min: 1, max: 30_000 }) }),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: 'error' } as const) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('rate_limited' as const), retryAfterMs: fc.integer({ min: 0, max: 90_000 }) }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'rate_limited' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'unused' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'auth' } as const) },
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('grant' as const), input: fc.nat(4_000), output: fc.nat(2_000) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat(), outcome: outcomeArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.oneof(fc.nat(2_000), fc.nat(70_000)) }) },
);

const limitsArb: fc.Arbitrary<KeyLimits> = fc.record(
  { rpm: fc.integer({ min: 1, max: 6 }), concurrency: fc.integer({ min: 1, max: 4 }), itpm: fc.integer({ min: 2_000, max: 20_000 }), otpm: fc.integer({ min: 1_000, max: 10_000 }) },
  { requiredKeys: ['rpm', 'concurrency'] },
);

describe('keyMachine: properties', () => {
  it('never exceeds concurrency or rpm, grants only when ready, and never leaves backoff before its Retry-After', () => {
    fc.assert(
      fc.property(limitsArb, fc.array(opArb, { maxLength: 80 }), (limits, ops) => {
        const h = harness(limits);
        const out: string[] = [];
        const grants = new Map<string, { at: number; unused: boolean }>();
        let strikes = 0;
        let backoffUntil = 0;
        let seen = 0;
        let n = 0;
        /** Every state the key announced after a 429 respects the backoff so far. */
        const checkReplies = () => {
          for (; seen < h.replies.length; seen++) {
            const { at, reply } = h.replies[seen];
            if (reply.type === 'KEY.STATE' && reply.state !== 'backoff' && reply.state !== 'revoked') expect(at).toBeGreaterThanOrEqual(backoffUntil);
          }
        };
        for (const op of ops) {
          if (h.state() === 'revoked') break;
          if (op.kind === 'wait') h.at(h.clock.now() + op.ms);
          if (op.kind === 'grant') {
            const wasReady = h.state() === 'ready';
            const leaseId = `L${n++}`;
            h.grant(leaseId, request(op.input, op.output));
            const answer = h.answers().at(-1);
            expect(answer?.type).toBe(wasReady ? 'KEY.GRANTED' : 'KEY.REJECTED');
            if (wasReady) {
              out.push(leaseId);
              grants.set(leaseId, { at: h.clock.now(), unused: false });
            }
          }
          if (op.kind === 'release') {
            // Mostly a lease that is out; sometimes one released before (must be ignored).
            const leaseId = out.length > 0 && op.pick % 5 !== 0 ? out[op.pick % out.length] : `L${op.pick % (n + 1)}`;
            const known = out.includes(leaseId);
            if (known) out.splice(out.indexOf(leaseId), 1);
            h.release(leaseId, op.outcome);
            if (known) {
              if (op.outcome.kind === 'unused') grants.get(leaseId)!.unused = true;
              if (op.outcome.kind === 'ok') strikes = 0;
              if (op.outcome.kind === 'rate_limited') {
                strikes++;
                backoffUntil = Math.max(backoffUntil, h.clock.now() + rateLimitDelay(strikes, op.outcome.retryAfterMs));
              }
            }
          }
          checkReplies();
          expect(out.length).toBeLessThanOrEqual(limits.concurrency!);
          expect(h.ref.getSnapshot().context.leasesOut).toBe(out.length);
        }
        // Sliding window over the grants that were used: never rpm + 1 within 60 s.
        const times = [...grants.values()].filter((g) => !g.unused).map((g) => g.at).sort((a, b) => a - b);
        for (let i = 0; i + limits.rpm! < times.length; i++) expect(times[i + limits.rpm!] - times[i]).toBeGreaterThanOrEqual(60_000);
        // Liveness: with everything released and time passed, an unrevoked key is ready again.
        if (h.state() !== 'revoked') {
          for (const leaseId of out.splice(0)) h.release(leaseId, { kind: 'ok', usage: usage(0, 0) });
          h.at(h.clock.now() + 10 * 60_000);
          checkReplies();
          expect(h.state()).toBe('ready');
        }
      }),
      { seed: 42, numRuns: 300 },
    );
  });

  it('the refill timer never fires before a grant is possible, and never needlessly late', () => {
    fc.assert(
      fc.property(limitsArb, fc.array(fc.tuple(fc.nat(5_000), fc.nat(3_000), fc.nat(20_000)), { minLength: 1, maxLength: 10 }), (limits, grants) => {
        let book = newBook({ ...limits, concurrency: undefined }, 0);
        let now = 0;
        grants.forEach(([input, output, gap], i) => {
          now += gap;
          book = advance(book, now);
          if (canGrant(book)) book = grant(book, `g${i}`, request(input, output));
        });
        if (canGrant(book)) return;
        const wait = msUntilCapacity(book);
        expect(canGrant(advance(book, now + wait))).toBe(true);
        if (wait > 1) expect(canGrant(advance(book, now + wait - 1))).toBe(false);
      }),
      { seed: 42, numRuns: 500 },
    );
  });
});
