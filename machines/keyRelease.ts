/**
 * Settling a lease on a key's book (keyLimits.ts): what the server charged, given back to the
 * buckets; a 429's backoff and rate cut (AIMD); the limits the server's headers state. Pure
 * functions over the immutable `KeyBook`, like the rest of the key's arithmetic; apart from
 * keyLimits.ts (the buckets and grants) so each file reads on its own.
 */
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  capacityOf,
  CUT_KNOWN,
  limitOf,
  MIN_ADAPTIVE_RPM,
  MINUTE_MS,
  rateOf,
  shareOf,
  type KeyBook,
  type Lane,
  type LaneBook,
  type Learning,
  type LeaseRecord,
} from './keyLimits.js';
import { learnFrom429, probeUp } from './keyLearn.js';
import type { LeaseOutcome, RateLimitHint, Usage } from './protocol.js';

/**
 * Settles a lease at `book.at` with what happened on it. For `rate_limited` this also moves
 * `backoffUntil` (never earlier than it was) and cuts the request rate. Unknown lease ids leave
 * the book as it is.
 */
export function release(book: KeyBook, leaseId: string, outcome: LeaseOutcome): KeyBook {
  const lease = book.leases.get(leaseId);
  if (lease === undefined) return book;
  let next: KeyBook = { ...book, leases: book.leases.without(leaseId), leasesOut: book.leasesOut - 1 };
  // The server took it: one more for the window that measures its rate, if it was sent in it.
  // Only where nothing states the rate: a key paced by a stated or learned one never reads the count.
  if ((outcome.kind === 'ok' || outcome.kind === 'error') && book.learning !== undefined && limitOf(book, 'requests') === undefined && inWindow(book.learning, lease.grantedAt)) {
    next.learning = { ...book.learning, admitted: book.learning.admitted + 1 };
  }
  // Any answer but a 429 ends a run of nothing but 429s.
  if ((outcome.kind === 'ok' || outcome.kind === 'error') && next.limited !== undefined) next = { ...next, limited: undefined };
  switch (outcome.kind) {
    case 'ok':
      next = settle(next, lease, charged(outcome.usage), outcome.usage.outputTokens);
      next = learn(next, outcome.rateLimit);
      if (next.strikes !== 0 || !next.proven) next = { ...next, strikes: 0, proven: true };
      if (outcome.sentAt !== undefined && outcome.sentAt > lease.grantedAt) next = sentLate(next, lease.grantedAt, outcome.sentAt);
      if (lease.grantedAt > next.cutAt) next = limitOf(next, 'requests') === undefined ? probeUp(next) : raise(next);
      break;
    case 'error':
      // Without usage we cannot know the input was not processed: keep it; no output was counted.
      next = outcome.usage
        ? settle(next, lease, charged(outcome.usage), outcome.usage.outputTokens)
        : settle(next, lease, lease.inputTokens, 0);
      next = learn(next, outcome.rateLimit);
      break;
    case 'rate_limited': {
      // A 429 is refused before processing: the server charged nothing; the request slot stays spent.
      next = learn(settle(next, lease, 0, 0, false), outcome.rateLimit);
      const strikes = next.strikes + 1;
      const sameWave = next.limited !== undefined && lease.grantedAt < next.limited.last;
      const waves = (next.limited?.waves ?? 0) + (sameWave ? 0 : 1);
      const until = next.at + rateLimitDelay(waves, outcome.retryAfterMs);
      const limited = { ...next.limited, since: next.limited?.since ?? next.at, responses: (next.limited?.responses ?? 0) + 1, last: next.at, waves };
      next = { ...next, strikes, backoffUntil: Math.max(next.backoffUntil, until), proven: true, limited };
      if (outcome.retryAfterMs !== undefined && next.learning !== undefined) next.learning = { ...next.learning, retryAfterUntil: Math.max(next.learning.retryAfterUntil, until) };
      // Against a stated or learned rate one 429 is more likely jitter (a request that reached
      // the server a few ms early) than a wrong rate, and its backoff already answers it: the
      // rate is cut on the second 429 in a row. With no rate known, on the first.
      if (lease.grantedAt <= next.cutAt) break; // sent at the rate before the last cut: no second cut
      if (limitOf(next, 'requests') === undefined) {
        // The first 429 of a wave closes the window, once the requests sent before it are answered.
        if (next.learning !== undefined && next.learning.closing === undefined) next = { ...next, learning: { ...next.learning, closing: { sentAt: lease.grantedAt } } };
      }
      else if (next.adaptive !== undefined || strikes >= 2) next = cut(next);
      break;
    }
    case 'unused':
      // Never sent: the server saw nothing of it.
      next = { ...settle(next, lease, 0, 0, false), requests: refund(next, 'requests', lease, 1) };
      break;
    case 'auth':
      break;
  }
  return next.learning?.closing === undefined ? next : closeWindow(next);
}

/** Whether a request granted at `grantedAt` counts in the window now open (keyLearn.ts). */
function inWindow(learning: Learning, grantedAt: number): boolean {
  return grantedAt >= learning.mark.at && (learning.closing === undefined || grantedAt <= learning.closing.sentAt);
}

/**
 * Measures the window a 429 ended once every request granted before it has been answered (a 429
 * comes back sooner than the answers the server admitted before it). A window that measured the
 * rate leaves the key paced under it with an empty bucket: the pace spaces the next request, and
 * a backoff on top would only idle it (while the server's bucket, full, lost refill). The
 * server's own Retry-After still counts.
 */
function closeWindow(book: KeyBook): KeyBook {
  const learning = book.learning!;
  const closing = learning.closing!;
  // A rate stated or learned from headers since: nothing to learn from 429s any more.
  if (limitOf(book, 'requests') !== undefined) return { ...book, learning: { ...learning, closing: undefined } };
  for (const lease of book.leases) if (lease.grantedAt <= closing.sentAt) return book;
  let next = learnFrom429({ ...book, learning: { ...learning, closing: undefined } }, closing.sentAt);
  // Ended a moment ago (not at `at`: a Retry-After of 0 still waits for its timer), unless the
  // server asked for longer: then the key leaves its backoff at once.
  if (next.cutAt !== book.cutAt && next.backoffUntil >= next.at && learning.retryAfterUntil < next.at) next = { ...next, backoffUntil: next.at - 1 };
  return next;
}

/**
 * Multiplicative decrease against a stated or learned rate: the request rate drops to 70% of the
 * rate that met the 429s. One cut per round: 429s on leases granted before this cut were sent at
 * the old rate and do not cut again.
 */
function cut(book: KeyBook): KeyBook {
  const paced = rateOf(book, 'requests')!;
  const adaptive = Math.max(MIN_ADAPTIVE_RPM, (paced / shareOf(book, 'requests')) * CUT_KNOWN);
  return learned(book, { ...book, adaptive, cutAt: book.at });
}

/**
 * The request bucket after the rate moved from `before` to `after`: a bucket that was not paced
 * starts full (the backoff already waits out this 429); one that was keeps its level, within the
 * new capacity.
 */
function learned(before: KeyBook, after: KeyBook): KeyBook {
  if (after === before) return after;
  const capacity = capacityOf(after, 'requests');
  const level = rateOf(before, 'requests') === undefined && after.cutAt !== before.cutAt ? capacity : Math.min(after.requests.level, capacity);
  return level === after.requests.level ? after : { ...after, requests: { ...after.requests, level } };
}

/**
 * Additive increase: each success after a cut raises the rate by one request per minute, or by
 * less above 60 rpm, so the rate grows by at most about 1 rpm per second of successes. Back at
 * the stated or learned limit, the cut is over.
 */
function raise(book: KeyBook): KeyBook {
  if (book.adaptive === undefined) return book;
  const adaptive = book.adaptive + Math.min(1, 60 / book.adaptive);
  const limit = limitOf(book, 'requests');
  return { ...book, adaptive: limit !== undefined && adaptive >= limit ? undefined : adaptive };
}

/**
 * A request that left later than its grant (a distributed call queued for a worker): the server
 * charged it at `sentAt`. While our bucket held it from the grant, the server's, without it, may
 * have been full and lost refill to its cap, at most the refill over the delay and at most the
 * request itself: that much is taken back, so the key never runs ahead of the server.
 */
function sentLate(book: KeyBook, grantedAt: number, sentAt: number): KeyBook {
  const rate = rateOf(book, 'requests');
  if (rate === undefined) return book;
  const lost = Math.min(1, ((sentAt - grantedAt) * rate) / MINUTE_MS);
  return { ...book, requests: { ...book.requests, level: book.requests.level - lost } };
}

/**
 * The wait after the `strikes`-th consecutive 429: the server's Retry-After when it sent one,
 * else 1 s doubling, capped at 60 s.
 */
export function rateLimitDelay(strikes: number, retryAfterMs: number | undefined): number {
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) return Math.ceil(retryAfterMs);
  return Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(Math.max(strikes - 1, 0), 30));
}

/** Input tokens that count against itpm: cache reads do not (Anthropic), cache writes do. */
function charged(usage: Usage): number {
  return usage.inputTokens + usage.cacheWriteTokens;
}

/**
 * Gives back to a bucket what the key charged and the server did not (or takes what it charged
 * too little, as debt), capped at the capacity.
 *
 * A late refund must not credit more than the server has: while our bucket held the charge, the
 * server's, without it, may have been full and lost to its cap what came in meanwhile: refill,
 * and other refunds. It cannot have lost more than everything credited since the grant (`added`
 * counts it before the cap), so an over-charge is refunded less that (exact for a refund at the
 * grant's instant). `symmetric`: the server charged the same and refunds the same (max_tokens
 * held for output), so the refund is whole.
 */
function refund(book: KeyBook, lane: Lane, lease: LeaseRecord, amount: number, symmetric = false): LaneBook {
  if (rateOf(book, lane) === undefined) return book[lane];
  const state = book[lane];
  const credit = amount <= 0 || symmetric ? amount : Math.max(0, amount - (state.added - lease.addedAt[lane]));
  return { ...state, level: Math.min(capacityOf(book, lane), state.level + credit), added: state.added + Math.max(0, credit) };
}

/** Settles the token estimates of a lease to what the server charged (output: it held max_tokens too). */
function settle(book: KeyBook, lease: LeaseRecord, actualInput: number, actualOutput: number, outputSymmetric = true): KeyBook {
  const input = refund(book, 'input', lease, lease.inputTokens - actualInput);
  const output = refund(book, 'output', lease, lease.outputTokens - actualOutput, outputSymmetric);
  // Unpaced token lanes refund nothing: the same book, not one more copy per release.
  return input === book.input && output === book.output ? book : { ...book, input, output };
}

/**
 * Believes the server. A `*-limit` header is the lane's rate (the lower of it and the plan's);
 * `remaining` is the bucket's level now, so ours is lowered to it (never raised: the server's
 * count is older than our grants since). With nothing remaining and no rate to pace at, grants
 * pause for the time one unit takes to come back, estimated from the reset and the most the
 * server ever said remained; never until the bucket is full.
 */
function learn(book: KeyBook, hint: RateLimitHint | undefined): KeyBook {
  if (hint === undefined) return book;
  let next = book;
  const lanes: [Lane, number | undefined, number | undefined, number | undefined][] = [
    ['requests', hint.requestsLimit, hint.requestsRemaining, hint.requestsResetMs],
    ['input', hint.inputTokensLimit, hint.inputTokensRemaining, hint.inputTokensResetMs],
    ['output', hint.outputTokensLimit, hint.outputTokensRemaining, hint.outputTokensResetMs],
  ];
  for (const [lane, limit, remaining, resetMs] of lanes) {
    let state = next[lane];
    if (limit !== undefined && limit > 0 && state.learned !== limit) {
      const hadRate = rateOf(next, lane) !== undefined;
      next = { ...next, [lane]: { ...state, learned: limit } };
      // A lane that was not paced starts at what the server says remains, within one burst.
      const level = hadRate ? next[lane].level : Math.min(capacityOf(next, lane), remaining ?? capacityOf(next, lane));
      next = { ...next, [lane]: { ...next[lane], level: Math.min(level, capacityOf(next, lane)) } };
      state = next[lane];
    }
    if (remaining === undefined) continue;
    if (remaining > state.peakRemaining) next = { ...next, [lane]: { ...state, peakRemaining: remaining } };
    if (rateOf(next, lane) !== undefined) {
      if (remaining < next[lane].level) next = { ...next, [lane]: { ...next[lane], level: remaining } };
    } else if (remaining < 1 && resetMs !== undefined && resetMs > 0) {
      const oneUnitMs = Math.ceil(resetMs / Math.max(1, next[lane].peakRemaining + 1));
      next = { ...next, pausedUntil: Math.max(next.pausedUntil, next.at + oneUnitMs) };
    }
  }
  return next;
}
