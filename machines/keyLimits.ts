/**
 * The bookkeeping of one API key's limits, as pure functions over an immutable `KeyBook`.
 *
 * `key.machine.ts` decides *when* (statechart); this file decides *how much*. Each limit (rpm,
 * itpm, otpm) is a token bucket: it refills continuously at its rate and holds at most its
 * `burst`. That is how Anthropic and OpenAI document their limiters ("a rate of 60 RPM may be
 * enforced as 1 request per second"), so a key that paces as a bucket sends evenly instead of
 * firing a minute's budget at once and collecting 429s for most of it.
 *
 * Where the rate comes from, per limit:
 * - *stated*: the plan's `limits`;
 * - *learned*: the server's `*-limit` headers (the lower of the two wins);
 * - *adaptive* (requests only): after 429s the rate is cut (multiplicative decrease) and then
 *   raised slowly on successes (additive increase) up to the stated or learned rate. With nothing
 *   stated or learned the first 429 cuts, from the rate the key was observed sending at; against a
 *   stated or learned rate, the second 429 in a row (one alone is likely jitter).
 *
 * Every function takes the time explicitly, so the machine stays replayable and the tests need no
 * clock. The book is immutable (each event returns a new one) so `@xstate/graph` can walk the key
 * machine from shared snapshots; its only array is the leases out, bounded by the key's own limits.
 */
import type { KeyLimits, LeaseOutcome, LeaseRequest, RateLimitHint, Usage } from './protocol.js';

/** Rates are per minute; buckets refill per ms. */
const MINUTE_MS = 60_000;
/** First backoff after a 429 without Retry-After; doubles on each consecutive 429. */
export const BACKOFF_BASE_MS = 1_000;
/** Cap of the doubling backoff. */
export const BACKOFF_MAX_MS = 60_000;
/**
 * Requests reach the server with a few ms of jitter after their grant: one that arrives a little
 * earlier than the one before finds the server's bucket a little lower than ours. Where the bucket
 * holds more than one request, each grant leaves this much refill in it (a margin of
 * rate x 50 ms: 0.25 request at 300 rpm), so the key paces at the full rate and the server always
 * has that margin in hand.
 */
export const JITTER_MS = 50;
/**
 * Where the bucket cannot hold a margin on top of one request (a burst of 1: 60 rpm enforced as one
 * a second), and for the token lanes (their amounts are estimates), the key paces at this share of
 * its rate instead: 3% of the spacing absorbs the jitter (30 ms at 60 rpm).
 */
export const PACING_SHARE = 0.97;
/** Multiplicative decrease on a 429: the new rate, as a share of the rate that met it. */
export const CUT_KNOWN = 0.7;
/** The same when no rate was known (cut from the observed sending rate): a harder cut. */
export const CUT_UNKNOWN = 0.5;
/** The lowest rate a cut goes to, per minute. */
export const MIN_ADAPTIVE_RPM = 1;
/** Time constant of the observed sending rate (an exponentially weighted rate). */
const SEND_RATE_TAU_MS = 5_000;
/** Slack for floating point in the buckets (a refill that lands at 0.9999999999). */
const EPSILON = 1e-9;

/** The three limits a key paces. */
export type Lane = 'requests' | 'input' | 'output';
const LANES: readonly Lane[] = ['requests', 'input', 'output'];
const STATED: Record<Lane, 'rpm' | 'itpm' | 'otpm'> = { requests: 'rpm', input: 'itpm', output: 'otpm' };

/** What the key remembers of one lease it granted and that is not released yet. */
export interface LeaseRecord {
  leaseId: string;
  grantedAt: number;
  inputTokens: number;
  outputTokens: number;
  /** Each lane's `added` at the grant: what was credited since bounds a late refund. */
  addedAt: Readonly<Record<Lane, number>>;
}

/** One limit's bucket. */
export interface LaneBook {
  /** Per-minute limit from the server's headers, when it sent one. */
  learned?: number;
  /** Level at `book.at`; may be negative (debt after a request larger than the bucket). */
  level: number;
  /**
   * What the next grant is likely to need (the last request seen): `ready` means a request of
   * this size fits now, so the key does not announce `ready` for a request it would refuse.
   */
  want: number;
  /** The most the server ever said remained: a floor of its limit when it sends no limit header. */
  peakRemaining: number;
  /** Everything ever credited (refill and refunds, before the cap): see `refund`. */
  added: number;
}

/** Everything a key knows about its own capacity, as of time `at`. */
export interface KeyBook {
  limits: KeyLimits;
  /** The time (ms, system clock) the book was last brought up to date. */
  at: number;
  requests: LaneBook;
  input: LaneBook;
  output: LaneBook;
  /** Requests per minute after a 429 (AIMD); undefined while no cut is in force. */
  adaptive?: number;
  /** When the rate was last cut: 429s on leases granted then or before do not cut again. */
  cutAt: number;
  /** Observed sending rate, requests per ms (exponentially weighted), and when it was updated. */
  sendRate: number;
  sendRateAt: number;
  /** No grant before this time (the server said nothing remains and gave no rate to pace at). */
  pausedUntil: number;
  /** No grant before this time (the server answered 429). */
  backoffUntil: number;
  /** Consecutive 429s, for the doubling backoff; a success resets it. */
  strikes: number;
  /** Leases out, in grant order: a short array (at most the leases out), cheap to copy. */
  leases: readonly LeaseRecord[];
  leasesOut: number;
  /**
   * Whether the server has accepted this key yet (a success or a 429 proves it authenticates).
   * Until then a key on probation takes one request at a time: a bad key answers one 401, not
   * one per concurrent request.
   */
  proven: boolean;
}

/** Where a key's request rate comes from, for events and the report. */
export type RateSource = 'stated' | 'learned' | 'adaptive' | 'none';

/** A fresh book: full buckets. `probation`: one request at a time until proven. */
export function newBook(limits: KeyLimits, now: number, probation = false): KeyBook {
  const book: KeyBook = {
    limits,
    at: now,
    requests: { level: 0, want: 1, peakRemaining: 0, added: 0 },
    input: { level: 0, want: 1, peakRemaining: 0, added: 0 },
    output: { level: 0, want: 1, peakRemaining: 0, added: 0 },
    cutAt: -Infinity,
    sendRate: 0,
    sendRateAt: now,
    pausedUntil: now,
    backoffUntil: now,
    strikes: 0,
    leases: [],
    leasesOut: 0,
    proven: !probation,
  };
  for (const lane of LANES) book[lane] = { ...book[lane], level: capacityOf(book, lane) };
  return book;
}

/** The per-minute limit in force for `lane` (stated and learned, the lower), undefined if none. */
export function limitOf(book: KeyBook, lane: Lane): number | undefined {
  const stated = book.limits[STATED[lane]];
  const learned = book[lane].learned;
  if (stated === undefined) return learned;
  return learned === undefined ? stated : Math.min(stated, learned);
}

/** The per-minute limit in force for `lane`, the adaptive cut included (requests), undefined if none. */
function ceilingOf(book: KeyBook, lane: Lane): number | undefined {
  const limit = limitOf(book, lane);
  if (lane === 'requests' && book.adaptive !== undefined) return limit === undefined ? book.adaptive : Math.min(limit, book.adaptive);
  return limit;
}

/** The jitter margin a grant leaves in `lane`'s bucket (0: the lane paces below its rate instead). */
function marginOf(book: KeyBook, lane: Lane): number {
  const ceiling = ceilingOf(book, lane);
  if (lane !== 'requests' || ceiling === undefined) return 0;
  const margin = (ceiling * JITTER_MS) / MINUTE_MS;
  const burst = book.limits.burst?.[STATED[lane]];
  return (burst ?? Math.max(1, ceiling / 60)) >= 1 + margin ? margin : 0;
}

/** The share of its limit a lane paces at: all of it where a margin fits in the bucket. */
function shareOf(book: KeyBook, lane: Lane): number {
  return marginOf(book, lane) > 0 ? 1 : PACING_SHARE;
}

/** The per-minute rate the key paces `lane` at now, or undefined: not paced. */
export function rateOf(book: KeyBook, lane: Lane): number | undefined {
  const ceiling = ceilingOf(book, lane);
  return ceiling === undefined ? undefined : ceiling * shareOf(book, lane);
}

/** Where the request rate in force comes from. */
export function rateSourceOf(book: KeyBook): RateSource {
  const limit = limitOf(book, 'requests');
  if (book.adaptive !== undefined && (limit === undefined || book.adaptive < limit)) return 'adaptive';
  if (limit === undefined) return 'none';
  const learned = book.requests.learned;
  return learned !== undefined && learned === limit ? 'learned' : 'stated';
}

/**
 * The bucket's capacity: the plan's burst, else one second of the rate it paces at, at least 1
 * (a lane paced below its limit holds no more than that pace refills in a second, so it never
 * stands above the server's bucket).
 */
export function capacityOf(book: KeyBook, lane: Lane): number {
  const rate = rateOf(book, lane);
  if (rate === undefined) return 0;
  const burst = book.limits.burst?.[STATED[lane]];
  return burst ?? Math.max(1, rate / 60);
}

/** Brings the book to time `now`: refills the buckets. */
export function advance(book: KeyBook, now: number): KeyBook {
  const elapsed = Math.max(0, now - book.at);
  const next: KeyBook = { ...book, at: Math.max(now, book.at) };
  if (elapsed === 0) return next;
  for (const lane of LANES) {
    const rate = rateOf(book, lane);
    if (rate === undefined) continue;
    const refill = (elapsed * rate) / MINUTE_MS;
    const level = Math.min(capacityOf(book, lane), book[lane].level + refill);
    if (refill > 0) next[lane] = { ...book[lane], level, added: book[lane].added + refill };
  }
  return next;
}

/** How much of `lane` a request of `amount` needs in the bucket now: all of it, or a full bucket. */
function needOf(book: KeyBook, lane: Lane, amount: number): number {
  return Math.min(Math.max(amount, 1) + marginOf(book, lane), capacityOf(book, lane));
}

function laneFits(book: KeyBook, lane: Lane, amount: number): boolean {
  const rate = rateOf(book, lane);
  return rate === undefined || (rate > 0 && book[lane].level >= needOf(book, lane, amount) - EPSILON);
}

/** True when a request of the likely size (`want`) can be granted at `book.at` (backoff aside: the machine owns it). */
export function canGrant(book: KeyBook): boolean {
  const { concurrency } = book.limits;
  return (
    (book.proven || book.leasesOut === 0) &&
    (concurrency === undefined || book.leasesOut < concurrency) &&
    LANES.every((lane) => laneFits(book, lane, book[lane].want)) &&
    book.pausedUntil <= book.at
  );
}

/** True when this request fits now (the grant's own check; `canGrant` checks the likely size). */
export function fits(book: KeyBook, request: LeaseRequest): boolean {
  return canGrant({
    ...book,
    requests: { ...book.requests, want: 1 },
    input: { ...book.input, want: request.inputTokens },
    output: { ...book.output, want: request.outputTokens },
  });
}

/** Remembers a refused request's size, so the key waits until one that large fits. */
export function awaiting(book: KeyBook, request: LeaseRequest): KeyBook {
  return { ...book, input: { ...book.input, want: request.inputTokens }, output: { ...book.output, want: request.outputTokens } };
}

/**
 * True when waiting cannot make the key grantable: every lease slot is out (a release frees one),
 * or a rate is zero. Then the key sets no timer.
 */
export function waitsForRelease(book: KeyBook): boolean {
  const { concurrency } = book.limits;
  if (!book.proven && book.leasesOut > 0) return true;
  if (concurrency !== undefined && book.leasesOut >= concurrency) return true;
  return LANES.some((lane) => rateOf(book, lane) === 0);
}

/**
 * How long (ms, >= 1) until the clock alone makes the key grantable again: the latest of each
 * bucket refilling to what the likely request needs, and the pause ending.
 * Only meaningful when `!canGrant(book) && !waitsForRelease(book)`.
 */
export function msUntilCapacity(book: KeyBook): number {
  let wait = book.pausedUntil - book.at;
  for (const lane of LANES) {
    const rate = rateOf(book, lane);
    if (rate === undefined || rate <= 0) continue;
    const missing = needOf(book, lane, book[lane].want) - book[lane].level;
    if (missing > 0) wait = Math.max(wait, (missing * MINUTE_MS) / rate);
  }
  return Math.max(1, Math.ceil(wait - EPSILON));
}

/**
 * Records a grant at `book.at`: one request, the request's token estimates as a debit.
 * A lease id already out is not counted twice.
 */
export function grant(book: KeyBook, leaseId: string, request: LeaseRequest): KeyBook {
  if (holds(book, leaseId)) return book;
  const addedAt = { requests: book.requests.added, input: book.input.added, output: book.output.added };
  const record: LeaseRecord = { leaseId, grantedAt: book.at, inputTokens: request.inputTokens, outputTokens: request.outputTokens, addedAt };
  const elapsed = Math.max(0, book.at - book.sendRateAt);
  return {
    ...book,
    requests: debit(book, 'requests', 1, 1),
    input: debit(book, 'input', record.inputTokens, record.inputTokens),
    output: debit(book, 'output', record.outputTokens, record.outputTokens),
    sendRate: book.sendRate * Math.exp(-elapsed / SEND_RATE_TAU_MS) + 1 / SEND_RATE_TAU_MS,
    sendRateAt: book.at,
    leases: [...book.leases, record],
    leasesOut: book.leasesOut + 1,
  };
}

function debit(book: KeyBook, lane: Lane, amount: number, want: number): LaneBook {
  const state = book[lane];
  return rateOf(book, lane) === undefined ? { ...state, want } : { ...state, level: state.level - amount, want };
}

/**
 * Settles a lease at `book.at` with what happened on it. For `rate_limited` this also moves
 * `backoffUntil` (never earlier than it was) and cuts the request rate. Unknown lease ids leave
 * the book as it is.
 */
export function release(book: KeyBook, leaseId: string, outcome: LeaseOutcome): KeyBook {
  const index = book.leases.findIndex((l) => l.leaseId === leaseId);
  if (index < 0) return book;
  const lease = book.leases[index]!;
  const leases = book.leases.slice();
  leases.splice(index, 1);
  let next: KeyBook = { ...book, leases, leasesOut: book.leasesOut - 1 };
  switch (outcome.kind) {
    case 'ok':
      next = settle(next, lease, charged(outcome.usage), outcome.usage.outputTokens);
      next = { ...learn(next, outcome.rateLimit), strikes: 0, proven: true };
      if (outcome.sentAt !== undefined && outcome.sentAt > lease.grantedAt) next = sentLate(next, lease.grantedAt, outcome.sentAt);
      if (lease.grantedAt > next.cutAt) next = raise(next);
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
      const until = next.at + rateLimitDelay(strikes, outcome.retryAfterMs);
      next = { ...next, strikes, backoffUntil: Math.max(next.backoffUntil, until), proven: true };
      // Against a stated or learned rate one 429 is more likely jitter (a request that reached
      // the server a few ms early) than a wrong rate, and its backoff already answers it: the
      // rate is cut on the second 429 in a row. With no rate known, on the first.
      const known = rateOf(next, 'requests') !== undefined && next.adaptive === undefined;
      if (lease.grantedAt > next.cutAt && (!known || strikes >= 2)) next = cut(next);
      break;
    }
    case 'unused':
      // Never sent: the server saw nothing of it.
      next = { ...settle(next, lease, 0, 0, false), requests: refund(next, 'requests', lease, 1) };
      break;
    case 'auth':
      break;
  }
  return next;
}

/**
 * Multiplicative decrease: the request rate drops to a share of the rate that met the 429 (the
 * paced rate, or the observed one when none was known). One cut per round: 429s on leases
 * granted before this cut were sent at the old rate and do not cut again.
 */
function cut(book: KeyBook): KeyBook {
  const paced = rateOf(book, 'requests');
  const observed = book.sendRate * Math.exp(-Math.max(0, book.at - book.sendRateAt) / SEND_RATE_TAU_MS) * MINUTE_MS;
  const from = paced !== undefined ? paced / shareOf(book, 'requests') : observed;
  const share = paced !== undefined ? CUT_KNOWN : CUT_UNKNOWN;
  const adaptive = Math.max(MIN_ADAPTIVE_RPM, from * share);
  const next: KeyBook = { ...book, adaptive, cutAt: book.at };
  // A bucket that was not paced before starts full: the backoff already waits out this 429.
  const level = paced === undefined ? capacityOf(next, 'requests') : Math.min(next.requests.level, capacityOf(next, 'requests'));
  return { ...next, requests: { ...next.requests, level } };
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

/** Whether `leaseId` is out on this key. */
export function holds(book: KeyBook, leaseId: string): boolean {
  return book.leases.some((l) => l.leaseId === leaseId);
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
  return {
    ...book,
    input: refund(book, 'input', lease, lease.inputTokens - actualInput),
    output: refund(book, 'output', lease, lease.outputTokens - actualOutput, outputSymmetric),
  };
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
