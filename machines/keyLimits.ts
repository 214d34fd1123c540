/**
 * The bookkeeping of one API key's limits, as pure functions over an immutable `KeyBook`.
 *
 * `key.machine.ts` decides *when* (statechart); this file decides *how much*: the sliding request
 * window, the token buckets, the server's rate-limit hints and the 429 backoff. Every function takes
 * the time explicitly, so the machine stays replayable and the tests need no clock.
 *
 * The book is immutable (each event returns a new one) so `@xstate/graph` can walk the key
 * machine from shared snapshots. Its arrays are bounded by the key's own limits (the window by
 * `rpm`, the leases by the leases out), not by the size of the run.
 */
import type { KeyLimits, LeaseOutcome, LeaseRequest, RateLimitHint, Usage } from './protocol.js';

/** The request window: at most `rpm` grants whose time is within the last WINDOW_MS. */
export const WINDOW_MS = 60_000;
/** First backoff after a 429 without Retry-After; doubles on each consecutive 429. */
export const BACKOFF_BASE_MS = 1_000;
/** Cap of the doubling backoff. */
export const BACKOFF_MAX_MS = 60_000;
/** Slack for floating point in the token buckets (a refill that lands at 0.9999999999). */
const EPSILON = 1e-9;

/** What the key remembers of one lease it granted and that is not released yet. */
export interface LeaseRecord {
  leaseId: string;
  grantedAt: number;
  inputTokens: number;
  outputTokens: number;
}

/** Everything a key knows about its own capacity, as of time `at`. */
export interface KeyBook {
  limits: KeyLimits;
  /** The time (ms, system clock) the book was last brought up to date. */
  at: number;
  /** Times of the grants inside the request window, oldest first (empty when no rpm). */
  window: readonly number[];
  /** Level of the input-token bucket at `at`; may be negative (debt). Unused without itpm. */
  inputTokens: number;
  /** Level of the output-token bucket at `at`; may be negative (debt). Unused without otpm. */
  outputTokens: number;
  /** No grant before this time (the server said requests-remaining 0 until its reset). */
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

/** A fresh book: full buckets, empty window. `probation`: one request at a time until proven. */
export function newBook(limits: KeyLimits, now: number, probation = false): KeyBook {
  return {
    limits,
    at: now,
    window: [],
    inputTokens: limits.itpm ?? 0,
    outputTokens: limits.otpm ?? 0,
    pausedUntil: now,
    backoffUntil: now,
    strikes: 0,
    leases: [],
    leasesOut: 0,
    proven: !probation,
  };
}

/** Brings the book to time `now`: refills the buckets, drops grants older than the window. */
export function advance(book: KeyBook, now: number): KeyBook {
  const elapsed = Math.max(0, now - book.at);
  const { itpm, otpm } = book.limits;
  let window = book.window;
  let drop = 0;
  while (drop < window.length && window[drop] <= now - WINDOW_MS) drop++;
  if (drop > 0) window = window.slice(drop);
  return {
    ...book,
    at: Math.max(now, book.at),
    window,
    inputTokens: itpm === undefined ? 0 : refill(book.inputTokens, itpm, elapsed),
    outputTokens: otpm === undefined ? 0 : refill(book.outputTokens, otpm, elapsed),
  };
}

function refill(level: number, perMinute: number, elapsedMs: number): number {
  return Math.min(perMinute, level + (elapsedMs * perMinute) / WINDOW_MS);
}

/** True when a minimal request can be granted at `book.at` (backoff aside: the machine owns it). */
export function canGrant(book: KeyBook): boolean {
  const { rpm, itpm, otpm, concurrency } = book.limits;
  return (
    (book.proven || book.leasesOut === 0) &&
    (concurrency === undefined || book.leasesOut < concurrency) &&
    (rpm === undefined || book.window.length < rpm) &&
    (itpm === undefined || book.inputTokens >= 1 - EPSILON) &&
    (otpm === undefined || book.outputTokens >= 1 - EPSILON) &&
    book.pausedUntil <= book.at
  );
}

/**
 * True when waiting cannot make the key grantable: every lease slot is out (a release frees one),
 * or a limit is zero. Then the key sets no timer.
 */
export function waitsForRelease(book: KeyBook): boolean {
  const { rpm, itpm, otpm, concurrency } = book.limits;
  if (!book.proven && book.leasesOut > 0) return true;
  if (concurrency !== undefined && book.leasesOut >= concurrency) return true;
  return rpm === 0 || itpm === 0 || otpm === 0;
}

/**
 * How long (ms, >= 1) until the clock alone makes the key grantable again: the latest of the
 * oldest needed grant leaving the window, each bucket refilling to 1, and the pause ending.
 * Only meaningful when `!canGrant(book) && !waitsForRelease(book)`.
 */
export function msUntilCapacity(book: KeyBook): number {
  const { rpm, itpm, otpm } = book.limits;
  let wait = book.pausedUntil - book.at;
  if (rpm !== undefined && book.window.length >= rpm) {
    wait = Math.max(wait, book.window[book.window.length - rpm] + WINDOW_MS - book.at);
  }
  if (itpm !== undefined) wait = Math.max(wait, ((1 - book.inputTokens) * WINDOW_MS) / itpm);
  if (otpm !== undefined) wait = Math.max(wait, ((1 - book.outputTokens) * WINDOW_MS) / otpm);
  return Math.max(1, Math.ceil(wait));
}

/**
 * Records a grant at `book.at`: one window slot, the request's token estimates as a debit.
 * A lease id already out is not counted twice.
 */
export function grant(book: KeyBook, leaseId: string, request: LeaseRequest): KeyBook {
  if (holds(book, leaseId)) return book;
  const record: LeaseRecord = {
    leaseId,
    grantedAt: book.at,
    inputTokens: request.inputTokens,
    outputTokens: request.outputTokens,
  };
  return {
    ...book,
    window: book.limits.rpm === undefined ? book.window : [...book.window, book.at],
    inputTokens: book.inputTokens - record.inputTokens,
    outputTokens: book.outputTokens - record.outputTokens,
    leases: [...book.leases, record],
    leasesOut: book.leasesOut + 1,
  };
}

/**
 * Settles a lease at `book.at` with what happened on it. For `rate_limited` this also moves
 * `backoffUntil` (never earlier than it was). Unknown lease ids leave the book as it is.
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
      next = { ...applyHint(next, outcome.rateLimit), strikes: 0, proven: true };
      // Sent later than granted (it waited for a worker): the window counts it from when it left.
      if (outcome.sentAt !== undefined && outcome.sentAt > lease.grantedAt) next = moveSlot(next, lease.grantedAt, outcome.sentAt);
      break;
    case 'error':
      // Without usage we cannot know the input was not processed: keep it; no output was counted.
      next = outcome.usage
        ? settle(next, lease, charged(outcome.usage), outcome.usage.outputTokens)
        : settle(next, lease, lease.inputTokens, 0);
      next = applyHint(next, outcome.rateLimit);
      break;
    case 'rate_limited': {
      // A 429 is refused before processing: the tokens come back, the request slot does not.
      next = applyHint(settle(next, lease, 0, 0), outcome.rateLimit);
      const strikes = next.strikes + 1;
      const until = next.at + rateLimitDelay(strikes, outcome.retryAfterMs);
      next = { ...next, strikes, backoffUntil: Math.max(next.backoffUntil, until), proven: true };
      break;
    }
    case 'unused':
      next = settle(refundSlot(next, lease.grantedAt), lease, 0, 0);
      break;
    case 'auth':
      break;
  }
  return next;
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
  if (retryAfterMs !== undefined && retryAfterMs >= 0) return Math.ceil(retryAfterMs);
  return Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(Math.max(strikes - 1, 0), 30));
}

/** Input tokens that count against itpm: cache reads do not (Anthropic), cache writes do. */
function charged(usage: Usage): number {
  return usage.inputTokens + usage.cacheWriteTokens;
}

/** Gives back estimate minus actual to each bucket (negative when the call used more), capped. */
function settle(book: KeyBook, lease: LeaseRecord, actualInput: number, actualOutput: number): KeyBook {
  const { itpm, otpm } = book.limits;
  return {
    ...book,
    inputTokens: itpm === undefined ? 0 : Math.min(itpm, book.inputTokens + lease.inputTokens - actualInput),
    outputTokens: otpm === undefined ? 0 : Math.min(otpm, book.outputTokens + lease.outputTokens - actualOutput),
  };
}

/** Moves one grant of the window from `from` to the later time `to`, keeping it oldest first. */
function moveSlot(book: KeyBook, from: number, to: number): KeyBook {
  const i = book.window.lastIndexOf(from);
  if (i < 0) return book;
  const window = [...book.window.slice(0, i), ...book.window.slice(i + 1)];
  let j = window.length;
  while (j > 0 && window[j - 1]! > to) j--;
  window.splice(j, 0, to);
  return { ...book, window };
}

/** Takes one grant at `grantedAt` out of the window (if it is still inside it). */
function refundSlot(book: KeyBook, grantedAt: number): KeyBook {
  const i = book.window.lastIndexOf(grantedAt);
  if (i < 0) return book;
  return { ...book, window: [...book.window.slice(0, i), ...book.window.slice(i + 1)] };
}

/**
 * Believes the server: requests-remaining 0 pauses grants until its reset; tokens-remaining lowers
 * the bucket to at most that (or, when the limit is unknown, pauses until its reset at 0).
 */
function applyHint(book: KeyBook, hint: RateLimitHint | undefined): KeyBook {
  if (hint === undefined) return book;
  const { itpm, otpm } = book.limits;
  let { pausedUntil, inputTokens, outputTokens } = book;
  const pauseFor = (remaining: number | undefined, resetMs: number | undefined) => {
    if (remaining !== undefined && remaining < 1 && resetMs !== undefined && resetMs > 0) {
      pausedUntil = Math.max(pausedUntil, book.at + Math.ceil(resetMs));
    }
  };
  pauseFor(hint.requestsRemaining, hint.requestsResetMs);
  if (hint.inputTokensRemaining !== undefined) {
    if (itpm !== undefined) inputTokens = Math.min(inputTokens, hint.inputTokensRemaining);
    else pauseFor(hint.inputTokensRemaining, hint.inputTokensResetMs);
  }
  if (hint.outputTokensRemaining !== undefined) {
    if (otpm !== undefined) outputTokens = Math.min(outputTokens, hint.outputTokensRemaining);
    else pauseFor(hint.outputTokensRemaining, hint.outputTokensResetMs);
  }
  return { ...book, pausedUntil, inputTokens, outputTokens };
}
