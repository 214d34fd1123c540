/**
 * Per-key rate limits as the providers document them: a token bucket per limit that refills
 * continuously at limit/60 s, enforced over short intervals ("a rate of 60 RPM may be enforced as
 * 1 request per second": Anthropic's rate-limits page; OpenAI's says the same of its limits).
 *
 * Each limit has two buckets that refill at the same rate:
 * - the *minute* bucket (capacity = the per-minute limit) is what the rate-limit headers report;
 * - the *short* bucket (capacity = `burst`, by default one second of the rate, at least 1) is
 *   what refuses: a key that fires a minute's budget at once gets 429s for most of it.
 *
 * A request larger than the short bucket is admitted only when that bucket is full, and leaves it
 * in debt; one larger than the per-minute limit itself is never admitted. Output tokens are
 * charged as max_tokens when a request is admitted and the unused part is given back when it ends.
 * A limit of 0 is a key throttled to zero (or a gateway that refuses everything): every request
 * is refused, with a Retry-After of 1 s, as such servers answer.
 */
import type { BucketReport, RateLimitReport, SimKeyLimits } from './types.js';

const MINUTE_MS = 60_000;
/** The Retry-After of a limit of 0: a server that refuses everything still says when to ask again. */
const ZERO_LIMIT_RETRY_MS = 1_000;

/** One bucket. Time comes from the caller so tests can move it. */
export class TokenBucket {
  private level: number;
  private at: number;

  /** `perMinute`: the refill rate; `capacity`: the most it holds (default: a minute's worth). */
  constructor(
    readonly perMinute: number,
    now: number,
    readonly capacity: number = perMinute,
  ) {
    this.level = capacity;
    this.at = now;
  }

  /** Tokens available at `now` (negative: debt). */
  available(now: number): number {
    // A clock that steps back (a test resetting it) refills nothing rather than draining.
    const elapsed = Math.max(0, now - this.at);
    this.level = Math.min(this.capacity, this.level + (elapsed * this.perMinute) / MINUTE_MS);
    this.at = Math.max(this.at, now);
    return this.level;
  }

  /** ms until `need` tokens are available (0 if they are). */
  waitMs(need: number, now: number): number {
    const missing = need - this.available(now);
    return missing <= 0 ? 0 : (missing * MINUTE_MS) / this.perMinute;
  }

  take(amount: number, now: number): void {
    this.available(now);
    this.level -= amount;
  }

  give(amount: number, now: number): void {
    this.available(now);
    this.level = Math.min(this.capacity, this.level + amount);
  }

  report(now: number): BucketReport {
    // A bucket of 0 never fills: its reset is when the server says to ask again.
    if (this.perMinute === 0) return { limit: 0, remaining: 0, resetMs: ZERO_LIMIT_RETRY_MS };
    const level = this.available(now);
    return {
      limit: this.perMinute,
      remaining: Math.max(0, Math.floor(level)),
      resetMs: Math.max(0, ((this.capacity - level) * MINUTE_MS) / this.perMinute),
    };
  }
}

/** One limit: the minute bucket the headers report and the short bucket that enforces. */
class Limit {
  private readonly minute: TokenBucket;
  private readonly short: TokenBucket;

  constructor(perMinute: number, burst: number | undefined, now: number) {
    this.minute = new TokenBucket(perMinute, now);
    this.short = new TokenBucket(perMinute, now, Math.min(perMinute, burst ?? Math.max(1, perMinute / 60)));
  }

  get perMinute(): number {
    return this.minute.perMinute;
  }

  /** ms until a request of `amount` is admitted (0: now); Infinity if it never can be. */
  waitMs(amount: number, now: number): number {
    if (amount > this.minute.perMinute) return Infinity;
    return Math.max(this.minute.waitMs(amount, now), this.short.waitMs(Math.min(amount, this.short.capacity), now));
  }

  take(amount: number, now: number): void {
    this.minute.take(amount, now);
    this.short.take(amount, now);
  }

  give(amount: number, now: number): void {
    this.minute.give(amount, now);
    this.short.give(amount, now);
  }

  report(now: number): BucketReport {
    return this.minute.report(now);
  }
}

/** What one admitted request holds until it ends. */
export interface Ticket {
  inputTokens: number;
  /** Output tokens charged up front (max_tokens). */
  outputCharged: number;
  settled: boolean;
}

export type Admission =
  | { ok: true; ticket: Ticket }
  | { ok: false; retryAfterMs: number; limit: 'requests' | 'input_tokens' | 'output_tokens'; message: string };

/** The three limits of one key. A limit left out is not enforced and not reported. */
export class KeyLimiter {
  private readonly requests?: Limit;
  private readonly input?: Limit;
  private readonly output?: Limit;

  constructor(
    limits: SimKeyLimits,
    private readonly now: () => number,
  ) {
    const t = now();
    if (limits.rpm !== undefined) this.requests = new Limit(limits.rpm, limits.burst?.rpm, t);
    if (limits.itpm !== undefined) this.input = new Limit(limits.itpm, limits.burst?.itpm, t);
    if (limits.otpm !== undefined) this.output = new Limit(limits.otpm, limits.burst?.otpm, t);
  }

  /** Charges the request to every limit, or to none when one of them cannot take it now. */
  admit(inputTokens: number, maxTokens: number): Admission {
    const now = this.now();
    const checks = [
      { limit: this.requests, amount: 1, name: 'requests' as const, unit: 'requests' },
      { limit: this.input, amount: inputTokens, name: 'input_tokens' as const, unit: 'input tokens' },
      { limit: this.output, amount: maxTokens, name: 'output_tokens' as const, unit: 'output tokens' },
    ];
    for (const { limit, amount, name, unit } of checks) {
      if (!limit) continue;
      if (limit.perMinute === 0) {
        const message = `This key's rate limit is 0 ${unit} per minute: every request is refused.`;
        return { ok: false, retryAfterMs: ZERO_LIMIT_RETRY_MS, limit: name, message };
      }
      const wait = limit.waitMs(amount, now);
      if (wait === Infinity) {
        const message = `This request needs ${amount} ${unit}, more than this key's limit of ${limit.perMinute} ${unit} per minute.`;
        return { ok: false, retryAfterMs: MINUTE_MS, limit: name, message };
      }
      if (wait > 0) {
        const message = `This request would exceed this key's rate limit of ${limit.perMinute} ${unit} per minute (enforced over short intervals: send evenly).`;
        return { ok: false, retryAfterMs: Math.ceil(wait), limit: name, message };
      }
    }
    this.requests?.take(1, now);
    this.input?.take(inputTokens, now);
    this.output?.take(maxTokens, now);
    return { ok: true, ticket: { inputTokens, outputCharged: maxTokens, settled: false } };
  }

  /** Gives back what the request did not use. `keepInput` false: the prompt was never processed. */
  settle(ticket: Ticket, outputTokens: number, keepInput = true): void {
    if (ticket.settled) return;
    ticket.settled = true;
    const now = this.now();
    this.output?.give(Math.max(0, ticket.outputCharged - outputTokens), now);
    if (!keepInput) this.input?.give(ticket.inputTokens, now);
  }

  report(): RateLimitReport {
    const now = this.now();
    const out: RateLimitReport = {};
    if (this.requests) out.requests = this.requests.report(now);
    if (this.input) out.inputTokens = this.input.report(now);
    if (this.output) out.outputTokens = this.output.report(now);
    return out;
  }
}
