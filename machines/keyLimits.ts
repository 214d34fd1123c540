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
 * - *adaptive* (requests only): against a stated or learned rate, the second 429 in a row (one
 *   alone is likely jitter) cuts it (multiplicative decrease) and successes raise it slowly
 *   (additive increase) back to that rate. With nothing stated or learned, the rate is measured
 *   between 429s and probed upwards (keyLearn.ts).
 *
 * Settling a lease (what the server charged, 429s, learned limits) is in keyRelease.ts.
 *
 * Every function takes the time explicitly, so the machine stays replayable and the tests need no
 * clock. The book is immutable (each event returns a new one) so `@xstate/graph` can walk the key
 * machine from shared snapshots; the leases out are a LeaseTable, which a grant or a release
 * changes at a cost that does not grow with the leases out.
 */
import { LeaseTable } from './leaseTable.js';
import type { KeyLimits, LeaseRequest } from './protocol.js';

/** Rates are per minute; buckets refill per ms. */
export const MINUTE_MS = 60_000;
/** First backoff after a 429 without Retry-After; doubles on each consecutive 429. */
export const BACKOFF_BASE_MS = 1_000;
/** Cap of the doubling backoff. */
export const BACKOFF_MAX_MS = 60_000;
/** How long a key may meet nothing but 429s before it is set aside (a provider's `maxRateLimitedMs`). */
export const DEFAULT_MAX_RATE_LIMITED_MS = 120_000;
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
  /** What the key learns of its rate from 429s when nothing states it (keyLearn.ts); from its first grant. */
  learning?: Learning;
  /** No grant before this time (the server said nothing remains and gave no rate to pace at). */
  pausedUntil: number;
  /** No grant before this time (the server answered 429). */
  backoffUntil: number;
  /** Consecutive 429s (a success resets it): the second against a known rate cuts it. */
  strikes: number;
  /**
   * The 429s met since the last other answer (a success or an error), and when the first of them
   * came; undefined while the last answer was not a 429. What sets a key aside; `due`: its time
   * is up, and the next 429 does. `last`: when the last one came. `waves`: the backoff doubles
   * per wave, the 429s on leases granted after the last one came: requests already out when the
   * first came back were sent before anyone knew, and do not double it again.
   */
  limited?: { since: number; responses: number; due?: boolean; last: number; waves: number };
  /** Leases out, by lease id (`leasesOut` of them). */
  leases: LeaseTable<LeaseRecord>;
  leasesOut: number;
  /**
   * Whether the server has accepted this key yet (a success or a 429 proves it authenticates).
   * Until then a key on probation takes one request at a time: a bad key answers one 401, not
   * one per concurrent request.
   */
  proven: boolean;
}

/**
 * A key's learning of its request rate from 429s (keyLearn.ts), one field of the book: a context
 * of more than 19 fields is a slow dictionary-mode object (test/run/contextSize.test.ts).
 */
export interface Learning {
  /**
   * Where the window that measures the server's rate began: the grant time of the key's first
   * request (`drained` false: the server's bucket was full) or of the last 429 that measured
   * (empty then).
   */
  mark: { at: number; drained: boolean };
  /** The requests granted since the mark that the server admitted (answered with anything but a 429). */
  admitted: number;
  /** A 429 ended the window (on a request granted at `sentAt`): it is measured once every request granted before it is answered. */
  closing?: { sentAt: number };
  /** The server's request rate (rpm) measured between two 429s. */
  measured?: number;
  /** What the server admitted from the first grant to the first 429 (its burst and its rate). */
  firstWindow?: { admitted: number; spanMs: number };
  /** The server's burst (requests), learned from the first window once the rate is measured. */
  learnedBurst?: number;
  /** The end of the backoff the server asked for (Retry-After): a measured window never ends it sooner. */
  retryAfterUntil: number;
  /** The measured rate last told the pool (`KEY.LEARNED`). */
  told?: number;
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
    pausedUntil: now,
    backoffUntil: now,
    strikes: 0,
    leases: LeaseTable.empty(),
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
  return capacityOf(book, lane) >= 1 + margin ? margin : 0;
}

/** The share of its limit a lane paces at: all of it where a margin fits in the bucket. */
export function shareOf(book: KeyBook, lane: Lane): number {
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
 * The bucket's capacity: the plan's burst, else the burst learned from the server's first window
 * (requests, keyLearn.ts), else one second of the limit in force, at least 1: the server's own bucket. A lane paced below its limit refills slower than the server's, so it never
 * stands above it; and one that held less (a second of its pace) would find itself full, for a
 * request larger than the bucket, before the server's bucket is (after a learned limit lowers it).
 */
export function capacityOf(book: KeyBook, lane: Lane): number {
  const ceiling = ceilingOf(book, lane);
  if (ceiling === undefined) return 0;
  const burst = book.limits.burst?.[STATED[lane]] ?? (lane === 'requests' ? book.learning?.learnedBurst : undefined);
  return burst ?? Math.max(1, ceiling / 60);
}

/** Brings the book to time `now`: refills the buckets. */
export function advance(book: KeyBook, now: number): KeyBook {
  // No time passed (every event of a burst in one tick): the same book, nothing allocated.
  if (now <= book.at) return book;
  const elapsed = now - book.at;
  const next: KeyBook = { ...book, at: now };
  for (const lane of LANES) {
    const rate = rateOf(book, lane);
    if (rate === undefined || rate <= 0) continue;
    const refill = (elapsed * rate) / MINUTE_MS;
    const level = Math.min(capacityOf(book, lane), book[lane].level + refill);
    next[lane] = { ...book[lane], level, added: book[lane].added + refill };
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
  return grantable(book, book.requests.want, book.input.want, book.output.want);
}

/** True when the key paces nothing (no rate stated or learned, no concurrency cap): time changes nothing. */
export function unpaced(book: KeyBook): boolean {
  return book.limits.concurrency === undefined && LANES.every((lane) => rateOf(book, lane) === undefined);
}

/** True when this request fits now (the grant's own check; `canGrant` checks the likely size). */
export function fits(book: KeyBook, request: LeaseRequest): boolean {
  return grantable(book, 1, request.inputTokens, request.outputTokens);
}

/** A guard's check, on every grant: it allocates nothing. */
function grantable(book: KeyBook, requests: number, input: number, output: number): boolean {
  const { concurrency } = book.limits;
  return (
    (book.proven || book.leasesOut === 0) &&
    (concurrency === undefined || book.leasesOut < concurrency) &&
    laneFits(book, 'requests', requests) &&
    laneFits(book, 'input', input) &&
    laneFits(book, 'output', output) &&
    book.pausedUntil <= book.at
  );
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
  return {
    ...book,
    requests: debit(book, 'requests', 1, 1),
    input: debit(book, 'input', record.inputTokens, record.inputTokens),
    output: debit(book, 'output', record.outputTokens, record.outputTokens),
    // The first grant opens the window that measures the server's rate (keyLearn.ts).
    learning: book.learning ?? { mark: { at: book.at, drained: false }, admitted: 0, retryAfterUntil: -Infinity },
    leases: book.leases.with(record),
    leasesOut: book.leasesOut + 1,
  };
}

/**
 * `canGrant(grant(book, leaseId, request))` without building the granted book: what `grantable`
 * reads (the buckets, the leases out) as the grant leaves them, and not the lease list, whose copy
 * costs O(leases out) on every grant.
 */
export function grantLeavesRoom(book: KeyBook, leaseId: string, request: LeaseRequest): boolean {
  if (holds(book, leaseId)) return canGrant(book);
  // Nothing paced: only probation and a pause bound the key, and a grant proves nothing.
  if (unpaced(book)) return book.proven && book.pausedUntil <= book.at;
  const after: KeyBook = {
    ...book,
    requests: debit(book, 'requests', 1, 1),
    input: debit(book, 'input', request.inputTokens, request.inputTokens),
    output: debit(book, 'output', request.outputTokens, request.outputTokens),
    leasesOut: book.leasesOut + 1,
  };
  return canGrant(after);
}

function debit(book: KeyBook, lane: Lane, amount: number, want: number): LaneBook {
  const state = book[lane];
  if (rateOf(book, lane) !== undefined) return { ...state, level: state.level - amount, want };
  return state.want === want ? state : { ...state, want }; // an unpaced lane of the same size: no copy
}
/** Whether `leaseId` is out on this key. */
export function holds(book: KeyBook, leaseId: string): boolean {
  return book.leases.has(leaseId);
}

/**
 * How many requests of the likely size (`want`) the key can grant one after another at
 * `book.at`: what the pool may send before it hears from the key again. 0 unless `canGrant`,
 * at least 1 when it can (rounding never makes a ready key look full); Infinity when nothing
 * bounds it.
 */
export function roomOf(book: KeyBook): number {
  if (!canGrant(book)) return 0;
  if (!book.proven) return 1;
  const { concurrency } = book.limits;
  let room = concurrency === undefined ? Infinity : concurrency - book.leasesOut;
  for (const lane of LANES) {
    if (rateOf(book, lane) === undefined) continue;
    const amount = Math.max(book[lane].want, lane === 'requests' ? 1 : 0);
    if (amount <= 0) continue;
    // The k-th grant (from 0) fits while level - k * amount still holds what one needs.
    room = Math.min(room, Math.floor((book[lane].level - needOf(book, lane, book[lane].want)) / amount) + 1);
  }
  return Math.max(1, room);
}
