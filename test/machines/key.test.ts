import { getShortestPaths } from '@xstate/graph';
import { describe, expect, it } from 'vitest';
import { createActor, setup } from 'xstate';
import { keyMachine } from '../../machines/key.machine.js';
import type { KeyEvent } from '../../machines/key.machine.js';
import { advance, awaiting, canGrant, capacityOf, grant, JITTER_MS, msUntilCapacity, newBook, PACING_SHARE, rateOf, rateSourceOf } from '../../machines/keyLimits.js';
import { rateLimitDelay, release } from '../../machines/keyRelease.js';
import type { LeaseOutcome, RateLimitHint } from '../../machines/protocol.js';
import { pendingTimers } from '../helpers/clock.js';
import { harness, request, usage } from '../helpers/keyHarness.js';

describe('keyMachine: graph', () => {
  it('reaches ready, saturated (by refill and by release), backoff and revoked by shortest paths', () => {
    const quiet = keyMachine.provide({ actions: { tellPool: () => {}, tellAgent: () => {} } });
    const replyTo = createActor(setup({}).createMachine({})); // never told: tellAgent is stubbed
    const ok: LeaseOutcome = { kind: 'ok', usage: usage(10, 10) };
    const events = [
      ...['a', 'b'].map((leaseId): KeyEvent => ({ type: 'KEY.GRANT', leaseId, request: request(), replyTo })),
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
      serializeState: (s) => JSON.stringify([s.value, s.context.leasesOut, Math.floor(s.context.requests.level), s.context.strikes]),
    });
    const reached = new Set(paths.map((p) => JSON.stringify(p.state.value)));
    for (const value of ['ready', { saturated: 'untilRefill' }, { saturated: 'untilRelease' }, 'backoff', 'revoked']) {
      expect(reached).toContain(JSON.stringify(value));
    }
    expect(paths.every((p) => p.state.value !== 'deciding')).toBe(true);
  });
});

describe('keyMachine: limits', () => {
  it('starts ready and tells its parent so, with the rate it paces at', () => {
    const h = harness({ rpm: 10 });
    expect(h.state()).toBe('ready');
    expect(h.last()).toEqual({ type: 'KEY.STATE', keyId: 'k1', state: 'ready', room: 1 });
    expect(h.reports).toEqual([
      { type: 'key:rate', keyId: 'k1', rpm: 9.7, source: 'stated', at: 0 },
      { type: 'key:state', keyId: 'k1', state: 'ready', at: 0 },
    ]);
  });

  it('answers a grant that leaves room with one message, KEY.GRANTED saying ready, and one that fills it with KEY.GRANTED then KEY.STATE', () => {
    const h = harness({ concurrency: 2 });
    let before = h.replies.length;
    h.grant('a');
    expect(h.replies.slice(before).map((r) => r.reply)).toEqual([{ type: 'LEASE.GRANTED', requestId: 'r', leaseId: 'a', keyId: 'k1' }]);
    before = h.replies.length;
    h.grant('b');
    expect(h.replies.slice(before).map((r) => r.reply)).toEqual([
      { type: 'LEASE.GRANTED', requestId: 'r', leaseId: 'b', keyId: 'k1' },
      { type: 'KEY.STATE', keyId: 'k1', state: 'saturated' },
    ]);
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
      // a left room: its answer also says the key is still ready (no KEY.STATE after it).
      { type: 'LEASE.GRANTED', requestId: 'r', leaseId: 'a', keyId: 'k1' },
      { type: 'LEASE.GRANTED', requestId: 'r', leaseId: 'b', keyId: 'k1' },
      { type: 'KEY.REJECTED', keyId: 'k1', leaseId: 'c', request: request() },
    ]);
    // c came after the pool heard "saturated": refused, with nothing new to say.
    expect(h.last()).toEqual({ type: 'KEY.REJECTED', keyId: 'k1', leaseId: 'c', request: request() });
    expect(h.replies.filter((r) => r.reply.type === 'KEY.STATE').at(-1)?.reply).toEqual({ type: 'KEY.STATE', keyId: 'k1', state: 'saturated' });
    h.release('a', { kind: 'ok', usage: usage(1, 1) });
    expect(h.state()).toBe('ready');
  });

  it('paces requests evenly: a bucket of one second of the rate, not a minute at once', () => {
    const h = harness({ rpm: 60 }); // paced at 58.2/min: one request per 1031 ms
    h.grant('a');
    expect(h.state()).toBe('saturated');
    h.at(1_030);
    expect(h.state()).toBe('saturated');
    h.at(1_031);
    expect(h.state()).toBe('ready');
    h.grant('b');
    h.at(2_061);
    expect(h.state()).toBe('saturated');
    h.at(2_062);
    expect(h.state()).toBe('ready');
  });

  it('lets a stated burst through at once (less the jitter margin), then paces at the full rate', () => {
    let book = newBook({ rpm: 60, burst: { rpm: 3 } }, 0);
    for (const id of ['a', 'b']) {
      expect(canGrant(book)).toBe(true);
      book = grant(book, id, request());
    }
    // One request left in the bucket, but a grant leaves 50 ms of refill (0.05 request) in it.
    expect(canGrant(book)).toBe(false);
    expect(msUntilCapacity(book)).toBe(JITTER_MS);
    book = grant(advance(book, JITTER_MS), 'c', request());
    expect(msUntilCapacity(book)).toBe(1_000); // then one a second: the full 60 rpm
  });

  it('debits token estimates at grant, lets a request bigger than the bucket run into debt, and refills continuously', () => {
    const h = harness({ itpm: 6_000 }); // paced at 5820/min = 0.097 per ms; bucket of 97 tokens
    h.grant('a', request(12_000, 0)); // bigger than the bucket: needs it full, leaves it at 97 - 12000
    expect(h.state()).toBe('saturated');
    // The next request is likely as large, so the key is ready again when the bucket is full.
    const full = Math.ceil((12_000 * 60_000) / 5_820);
    h.at(full - 1);
    expect(h.state()).toBe('saturated');
    h.at(full);
    expect(h.state()).toBe('ready');
  });

  it('refuses a grant bigger than the bucket holds now and waits until it fits', () => {
    const h = harness({ itpm: 60_000 }); // a bucket of 1,000 (the server's), refilled at 970 a second
    h.grant('a', request(600, 0));
    expect(h.state()).toBe('saturated'); // 400 left: another 600 (the likely next size) does not fit
    h.at(206); // 599.82
    expect(h.state()).toBe('saturated');
    h.at(207); // 600.79: 600 fit again
    expect(h.state()).toBe('ready');
    h.grant('b', request(900, 0)); // does not fit in 600.79
    expect(h.answers().at(-1)).toMatchObject({ type: 'KEY.REJECTED', leaseId: 'b' });
    expect(h.state()).toBe('saturated');
    h.at(515); // 899.55
    expect(h.state()).toBe('saturated');
    h.at(516); // 900.52
    expect(h.state()).toBe('ready');
    h.grant('b', request(900, 0));
    expect(h.answers().at(-1)).toMatchObject({ type: 'LEASE.GRANTED', leaseId: 'b' });
  });

  it('settles tokens to actual usage at release, never above capacity', () => {
    let book = advance(newBook({ itpm: 60_000, otpm: 60_000 }, 0), 0); // buckets of 1,000
    book = grant(book, 'a', request(800, 400));
    expect([book.input.level, book.output.level]).toEqual([200, 600]);
    book = release(book, 'a', { kind: 'ok', usage: { inputTokens: 100, outputTokens: 50, cacheWriteTokens: 100, cacheReadTokens: 5_000 } });
    expect([book.input.level, book.output.level]).toEqual([800, 950]); // cache reads do not count
    book = grant(book, 'b', request(10, 10));
    book = release(book, 'b', { kind: 'unused' });
    expect([book.input.level, book.output.level]).toEqual([800, 950]);
    expect(grant(grant(book, 'x', request(1, 1)), 'x', request(1, 1)).leasesOut).toBe(1); // a repeated id counts once
    book = grant(book, 'c', request(0, 0));
    book = release(book, 'c', { kind: 'ok', usage: usage(2_000, 0) });
    expect(book.input.level).toBe(-1_200); // used more than estimated: debt
  });

  it('refunds a refused request no more than the server can have: other refunds since its grant count too', () => {
    // The server's bucket of 100 output tokens (ours too, refilled at 97%). A (300) was charged by both.
    let book = advance(newBook({ otpm: 6_000 }, 0), 0);
    book = grant(book, 'A', request(0, 300));
    book = advance(book, 20_000); // both full again
    book = grant(book, 'B', request(0, 300)); // the server will refuse B (429): it never charges it
    book = release(book, 'A', { kind: 'error' }); // the server gives A's 300 back too: both capped
    book = grant(book, 'C', request(0, 300)); // charged by both: the server is at -200
    // B's 429 arrives. Its 300 were debited here, but A's refund came in meanwhile and was lost to
    // our cap: giving B's 300 back would put us 300 above the server.
    book = release(book, 'B', { kind: 'rate_limited', retryAfterMs: 0 });
    expect(book.output.level).toBeCloseTo(100 - 300);
    expect(canGrant(book)).toBe(false);
  });

  it('is full no sooner than the server after learning a lower limit: a request larger than the bucket waits for the server\'s', () => {
    // The plan says 6,000 output tokens a minute; the server's headers say 3,000, and 40 left of
    // its bucket of 50 (one second). Our bucket is the server's (50), refilled at 97% of 3,000: a
    // request of 60 (more than either holds) waits for it to be full, 207 ms, not before the
    // server's is (200 ms). (A bucket of one second of the pace, 48.5, was full after 176 ms.)
    let book = newBook({ otpm: 6_000 }, 0);
    book = grant(book, 'a', request(0, 10));
    book = release(book, 'a', { kind: 'ok', usage: usage(0, 10), rateLimit: { outputTokensLimit: 3_000, outputTokensRemaining: 40 } });
    expect([capacityOf(book, 'output'), book.output.level]).toEqual([50, 40]);
    book = awaiting(book, request(0, 60));
    expect(msUntilCapacity(book)).toBe(207);
  });

  it('counts a call sent later than granted (it waited for a worker) from when it was sent', () => {
    let book = newBook({ rpm: 60, burst: { rpm: 2 } }, 0); // paced at the full 60/min (the bucket holds a margin)
    book = grant(book, 'a', request(1, 1));
    book = advance(book, 3_000); // refilled back to 2 as if a left at 0
    expect(book.requests.level).toBeCloseTo(2);
    book = release(book, 'a', { kind: 'ok', usage: usage(1, 1), sentAt: 2_500 });
    expect(book.requests.level).toBeCloseTo(1); // the server charged it at 2.5 s: one taken back
    book = grant(book, 'b', request(1, 1));
    book = release(book, 'b', { kind: 'ok', usage: usage(1, 1), sentAt: 3_010 }); // 10 ms late: 0.01 back
    expect(book.requests.level).toBeCloseTo(0 - (10 * 58.2) / 60_000);
    book = grant(advance(book, 10_000), 'c', request(1, 1));
    book = release(book, 'c', { kind: 'ok', usage: usage(1, 1), sentAt: -5 }); // earlier than granted: nothing
    expect(book.requests.level).toBeCloseTo(1);
  });

  it('refunds the request and the tokens of an unused lease', () => {
    const h = harness({ rpm: 1, otpm: 6_000 });
    h.grant('a', request(0, 97));
    expect(h.state()).toBe('saturated');
    h.release('a', { kind: 'unused' });
    expect(h.state()).toBe('ready');
    expect(h.ref.getSnapshot().context.requests.level).toBe(1);
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

  it('pauses, once the server said more remained, only for one request\'s share of the reset: reset / (most remaining + 1)', () => {
    const h = harness({});
    h.grant('a');
    h.release('a', { kind: 'ok', usage: usage(1, 1), rateLimit: { requestsRemaining: 4 } });
    h.grant('b');
    h.at(1_000);
    h.release('b', { kind: 'ok', usage: usage(1, 1), rateLimit: { requestsRemaining: 0, requestsResetMs: 3_000 } });
    expect(h.state()).toBe('saturated');
    h.at(1_599); // 3,000 / (4 + 1) = 600 ms
    expect(h.state()).toBe('saturated');
    h.at(1_600);
    expect(h.state()).toBe('ready');
  });

  it('lowers a token bucket to what the server says remains', () => {
    const h = harness({ otpm: 60_000 }); // 0.97 tokens per ms
    h.grant('a', request(0, 10));
    h.release('a', { kind: 'ok', usage: usage(0, 10), rateLimit: { outputTokensRemaining: 0 } });
    expect(h.state()).toBe('saturated'); // needs 10 (the last request's size)
    h.at(10);
    expect(h.state()).toBe('saturated');
    h.at(11);
    expect(h.state()).toBe('ready');
  });

  it('learns a limit from the headers and paces at it from what remains, never waiting for a full bucket', () => {
    const h = harness({});
    h.grant('a');
    h.release('a', { kind: 'ok', usage: usage(1, 1), rateLimit: { requestsLimit: 120, requestsRemaining: 0, requestsResetMs: 60_000 } });
    expect(rateOf(h.ref.getSnapshot().context, 'requests')).toBeCloseTo(120); // a bucket of 2 holds the margin: full rate
    expect(h.reports).toContainEqual(expect.objectContaining({ type: 'key:rate', rpm: 120, source: 'learned' }));
    expect(h.state()).toBe('saturated');
    const oneAndMargin = Math.ceil(((1 + (120 * JITTER_MS) / 60_000) * 60_000) / 120);
    h.at(oneAndMargin - 1);
    expect(h.state()).toBe('saturated');
    h.at(oneAndMargin); // one request's worth and the margin, not the 60 s reset
    expect(h.state()).toBe('ready');
  });

  it('takes the lower of a stated and a learned limit', () => {
    let book = newBook({ rpm: 100 }, 0);
    book = grant(book, 'a', request());
    book = release(book, 'a', { kind: 'ok', usage: usage(1, 1), rateLimit: { requestsLimit: 50 } });
    expect(rateOf(book, 'requests')).toBeCloseTo(50 * PACING_SHARE); // a bucket of 1: no room for a margin, paced below
    book = grant(book, 'b', request());
    book = release(book, 'b', { kind: 'ok', usage: usage(1, 1), rateLimit: { requestsLimit: 500 } });
    expect(rateOf(book, 'requests')).toBeCloseTo(100); // a bucket of 1.67 holds the margin
  });

  it('against a known rate, cuts on the second 429 in a row (once per round) and raises it slowly on successes, up to the limit', () => {
    let book = newBook({ rpm: 60, burst: { rpm: 3 } }, 0);
    book = grant(book, 'a', request());
    book = grant(book, 'b', request());
    book = advance(book, 1_000);
    book = grant(book, 'c', request());
    book = release(book, 'a', { kind: 'rate_limited', retryAfterMs: 1_000 });
    expect(book.adaptive).toBeUndefined(); // one 429 against a stated rate: jitter, the backoff answers it
    book = release(book, 'c', { kind: 'rate_limited', retryAfterMs: 1_000 });
    expect(book.adaptive).toBeCloseTo(60 * 0.7); // the second in a row: the rate is wrong
    book = release(book, 'b', { kind: 'rate_limited', retryAfterMs: 1_000 }); // sent before the cut: no second cut
    expect(book.adaptive).toBeCloseTo(60 * 0.7);
    let t = 2_000;
    let successes = 0;
    while (book.adaptive !== undefined && successes < 1_000) {
      t += 2_000;
      book = advance(book, t);
      book = grant(book, `s${successes}`, request());
      book = release(book, `s${successes++}`, { kind: 'ok', usage: usage(1, 1) });
    }
    expect(successes).toBe(18); // +1 rpm a success from 42 to 60
    expect(rateOf(book, 'requests')).toBeCloseTo(60);
  });

  it('above 60 rpm, cuts to 70% of the rate that met the 429s and raises it by 60/rate a success (literal rates)', () => {
    let book = newBook({ rpm: 200 }, 0); // a bucket of 3.33 holds the margin: paced at the full 200
    expect(rateOf(book, 'requests')).toBe(200);
    book = grant(grant(book, 'a', request()), 'b', request());
    book = release(book, 'a', { kind: 'rate_limited', retryAfterMs: 1_000 });
    expect(rateOf(book, 'requests')).toBe(200); // one 429 against a stated rate: no cut
    book = release(book, 'b', { kind: 'rate_limited', retryAfterMs: 1_000 });
    expect(rateOf(book, 'requests')).toBeCloseTo(140, 9); // 200 x 0.7
    // Each success raises the rate by 60 / rate (less than 1 above 60 rpm): 140 + 60/140, ...
    const raised: number[] = [];
    for (let i = 0; i < 3; i++) {
      book = grant(advance(book, 2_000 * (i + 1)), `s${i}`, request());
      book = release(book, `s${i}`, { kind: 'ok', usage: usage(1, 1) });
      raised.push(rateOf(book, 'requests')!);
    }
    expect(raised[0]).toBeCloseTo(140.42857142857142, 9);
    expect(raised[1]).toBeCloseTo(140.85583490771688, 9);
    expect(raised[2]).toBeCloseTo(141.28180235194316, 9);
    expect(rateSourceOf(book)).toBe('adaptive');
    // A cut rate is cut again by the next 429, from where it stands: 141.28 x 0.7.
    book = grant(advance(book, 10_000), 'c', request());
    book = release(book, 'c', { kind: 'rate_limited', retryAfterMs: 1_000 });
    expect(rateOf(book, 'requests')).toBeCloseTo(98.8972616463602, 9);
  });

  it('learns each lane from its own headers: a limit lowers the rate, remaining lowers the bucket (literal values)', () => {
    const start = () => grant(newBook({ rpm: 600, itpm: 60_000, otpm: 60_000 }, 0), 'a', request(10, 10));
    const ok = (rateLimit: RateLimitHint) => release(start(), 'a', { kind: 'ok', usage: usage(10, 10), rateLimit });
    expect(rateOf(ok({ requestsLimit: 120 }), 'requests')).toBe(120);
    expect(rateOf(ok({ inputTokensLimit: 30_000 }), 'input')).toBe(29_100); // 97% of it
    expect(rateOf(ok({ outputTokensLimit: 30_000 }), 'output')).toBe(29_100);
    expect(ok({}).requests.level).toBe(9);
    expect(ok({ requestsRemaining: 3 }).requests.level).toBe(3);
    expect(ok({ inputTokensRemaining: 200 }).input.level).toBe(200);
    expect(ok({ outputTokensRemaining: 300 }).output.level).toBe(300);
    expect(ok({ outputTokensRemaining: 5_000 }).output.level).toBe(990); // never raised
  });

  it('ignores a release of an unknown lease but still tells its parent where it is', () => {
    const h = harness({ concurrency: 1 });
    h.grant('a');
    h.release('a', { kind: 'ok', usage: usage(1, 1) });
    const before = h.replies.length;
    h.release('a', { kind: 'auth' });
    expect(h.state()).toBe('ready');
    expect(h.replies.slice(before).map((r) => r.reply)).toEqual([{ type: 'KEY.STATE', keyId: 'k1', state: 'ready', room: 1 }]);
  });
});

describe('keyMachine: probation', () => {
  it('takes one request at a time until the server accepts the key, then its full concurrency', () => {
    const h = harness({ concurrency: 4 }, true);
    h.grant('a');
    expect(h.state()).toBe('saturated');
    h.grant('b');
    expect(h.answers().map((a) => a.type)).toEqual(['LEASE.GRANTED', 'KEY.REJECTED']);
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
    expect(h.answers().map((a) => a.type).filter((t) => !t.startsWith('xstate.'))).toEqual(['LEASE.GRANTED', 'KEY.REJECTED']);
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

  it('takes a Retry-After of 0 as no wait (1 ms, a timer\'s least), not as a missing one (1 s)', () => {
    expect([rateLimitDelay(1, 0), rateLimitDelay(5, 0), rateLimitDelay(1, 1_500.2), rateLimitDelay(2, -5), rateLimitDelay(1, Number.NaN)]).toEqual([0, 0, 1_501, 2_000, 1_000]);
    const h = harness({});
    h.grant('a');
    h.release('a', { kind: 'rate_limited', retryAfterMs: 0 });
    expect(h.reports).toContainEqual({ type: 'key:backoff', keyId: 'k1', retryAfterMs: 0, at: 0 });
    h.at(1);
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
    // 200 s of nothing but 429s would set the key aside at the default maxRateLimitedMs.
    const h = harness({}, undefined, { maxRateLimitedMs: 3_600_000 });
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
    h.at(t + 100_000); // the cut rate lets the next request out
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
    const refilled = Math.ceil(60_000 / PACING_SHARE); // one request at 0.97 rpm
    h.at(refilled);
    expect(h.reports.filter((r) => r.type === 'key:state').map((r) => [(r as { state: string }).state, r.at])).toEqual([
      ['ready', 0],
      ['saturated', 0],
      ['ready', refilled],
    ]);
  });
});

describe('keyMachine: a key that meets nothing but 429s', () => {
  /** The pool's part while the key is wanted: a request whenever it is ready, answered by the server. */
  function wanted(h: ReturnType<typeof harness>) {
    let n = 0;
    return (outcome: LeaseOutcome = { kind: 'rate_limited', retryAfterMs: 1_500 }) => {
      expect(h.state()).toBe('ready');
      const id = `r${n++}`;
      h.grant(id);
      h.release(id, outcome);
    };
  }
  // A rate the cuts after each 429 (AIMD) leave far above one request per backoff: ready at each backoff's end.
  const FAST = 6_000;
  const setAsides = (h: ReturnType<typeof harness>) => h.reports.filter((r) => r.type === 'key:set-aside');

  it('is set aside at maxRateLimitedMs after its first 429, not before, says so (key, provider, how long), and refuses grants from then on', () => {
    const h = harness({ rpm: FAST, concurrency: 1 }, undefined, { maxRateLimitedMs: 10_000, provider: 'acme' });
    const ask = wanted(h);
    for (const t of [0, 1_500, 3_000, 4_500, 6_000, 7_500, 9_000]) {
      h.at(t);
      ask(); // 429, Retry-After 1.5 s: the last one backs off until 10,500
    }
    h.at(9_999);
    expect(h.state()).toBe('backoff');
    expect(setAsides(h)).toEqual([]);
    h.at(10_000);
    expect(h.state()).toBe('setAside');
    expect(setAsides(h)).toEqual([{ type: 'key:set-aside', keyId: 'k1', provider: 'acme', rateLimitedMs: 10_000, responses: 7, at: 10_000 }]);
    expect(h.reports.at(-2)).toEqual({ type: 'key:state', keyId: 'k1', state: 'setAside', at: 10_000 });
    expect(h.last()).toEqual({ type: 'KEY.STATE', keyId: 'k1', state: 'setAside' });
    // Its backoff's end does not bring it back, and a grant the pool sent before it heard is refused.
    h.at(60_000);
    expect(h.state()).toBe('setAside');
    h.grant('late');
    expect(h.answers().at(-1)).toEqual({ type: 'KEY.REJECTED', keyId: 'k1', leaseId: 'late', request: request() });
    expect(setAsides(h)).toHaveLength(1);
  });

  it('by default after 120,000 ms (2 minutes) of nothing but 429s', () => {
    const h = harness({ rpm: FAST });
    const ask = wanted(h);
    for (const t of [0, 50_000, 100_000]) {
      h.at(t);
      ask({ kind: 'rate_limited', retryAfterMs: 50_000 });
    }
    h.at(119_999);
    expect(h.state()).toBe('backoff');
    h.at(120_000);
    expect(h.state()).toBe('setAside');
    expect(setAsides(h)).toEqual([{ type: 'key:set-aside', keyId: 'k1', provider: 'k1', rateLimitedMs: 120_000, responses: 3, at: 120_000 }]);
  });

  for (const answer of [{ kind: 'ok', usage: usage(1, 1) }, { kind: 'error' }] as LeaseOutcome[]) {
    it(`counts again from the first 429 after any other answer (here: ${answer.kind})`, () => {
      const h = harness({ rpm: FAST, concurrency: 2 }, undefined, { maxRateLimitedMs: 10_000 });
      h.grant('slow'); // out while the others meet 429s
      const ask = wanted(h);
      for (const t of [0, 1_500, 3_000]) {
        h.at(t);
        ask();
      }
      h.at(4_000);
      h.release('slow', answer); // an answer that is not a 429, during the backoff
      for (const t of [4_500, 6_000, 7_500, 9_000, 10_500, 12_000, 13_500]) {
        h.at(t);
        ask();
      }
      h.at(14_499);
      expect(h.state()).toBe('backoff');
      expect(setAsides(h)).toEqual([]);
      h.at(14_500);
      expect(h.state()).toBe('setAside');
      expect(setAsides(h)).toEqual([expect.objectContaining({ rateLimitedMs: 10_000, responses: 7, at: 14_500 })]);
    });
  }

  it('is not set aside at its time while nobody waits on it (ready with nothing out): its next answer decides', () => {
    for (const next of ['429', 'ok'] as const) {
      const h = harness({ rpm: FAST }, undefined, { maxRateLimitedMs: 10_000 });
      const ask = wanted(h);
      ask(); // one 429 at 0; from 1,500 on the key stands ready and nobody asks it
      h.at(10_000);
      expect(h.state()).toBe('ready');
      expect(setAsides(h)).toEqual([]);
      h.at(20_000);
      if (next === '429') {
        ask(); // asked again, refused again: nothing but 429s for 20 s
        expect(h.state()).toBe('setAside');
        expect(setAsides(h)).toEqual([expect.objectContaining({ rateLimitedMs: 20_000, responses: 2, at: 20_000 })]);
      } else {
        ask({ kind: 'ok', usage: usage(1, 1) });
        for (let t = 21_000; t < 31_000; t += 1_500) {
          h.at(t);
          ask();
        }
        h.at(30_999); // counted again from the 429 at 21,000
        expect(h.state()).toBe('backoff');
        expect(setAsides(h)).toEqual([]);
        h.at(31_000);
        expect(h.state()).toBe('setAside');
      }
    }
  });

  it('settles the leases still out on it once set aside, and stays aside', () => {
    const h = harness({ concurrency: 4 }, undefined, { maxRateLimitedMs: 1_000 });
    h.grant('a');
    h.grant('b');
    h.release('a', { kind: 'rate_limited', retryAfterMs: 5_000 });
    h.at(1_000);
    expect(h.state()).toBe('setAside');
    h.release('b', { kind: 'ok', usage: usage(1, 1) });
    expect(h.state()).toBe('setAside');
    expect(h.ref.getSnapshot().context.leasesOut).toBe(0);
  });
});

describe('keyLimits: a key holding thousands of leases', () => {
  it('grants, finds and releases a lease without reading the others it holds', () => {
    let book = newBook({}, 0);
    for (let i = 0; i < 3_000; i++) book = grant(book, `k1#${i}`, request());
    // Every read of the leases collection itself is counted (a copy or a scan reads thousands).
    let reads = 0;
    const counted = new Proxy(book.leases, {
      get(target, prop, receiver) {
        reads++;
        return Reflect.get(target, prop, receiver);
      },
    });
    book = { ...book, leases: counted };
    const granted = grant(book, 'k1#3000', request());
    const again = grant(book, 'k1#7', request()); // already out: counted once
    const released = release(book, 'k1#5', { kind: 'ok', usage: usage(10, 10) });
    const unknown = release(book, 'k1#nope', { kind: 'ok', usage: usage(10, 10) });
    expect(reads).toBeLessThanOrEqual(20);
    expect([granted.leasesOut, again.leasesOut, released.leasesOut]).toEqual([3_001, 3_000, 2_999]);
    expect(again).toBe(book);
    expect(unknown).toBe(book);
  });
});
