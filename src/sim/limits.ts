/**
 * Per-key rate limits as continuously refilling token buckets (capacity = the per-minute limit,
 * refilled at limit/60 s), the way Anthropic describes its limiter. Output tokens are charged as
 * max_tokens when a request is admitted and the unused part is given back when it ends.
 */
import type { BucketReport, RateLimitReport, SimKeyLimits } from './types.js';

const MINUTE_MS = 60_000;

/** One bucket. Time comes from the caller so tests can move it. */
export class TokenBucket {
  private level: number;
  private at: number;

  constructor(
    readonly capacity: number,
    now: number,
  ) {
    this.level = capacity;
    this.at = now;
  }

  /** Tokens available at `now`. */
  available(now: number): number {
    // A clock that steps back (a test resetting it) refills nothing rather than draining.
    const elapsed = Math.max(0, now - this.at);
    this.level = Math.min(this.capacity, this.level + (elapsed * this.capacity) / MINUTE_MS);
    this.at = Math.max(this.at, now);
    return this.level;
  }

  /** ms until `amount` tokens are available (0 if they are); a full minute if they never fit. */
  waitMs(amount: number, now: number): number {
    const missing = amount - this.available(now);
    if (missing <= 0) return 0;
    if (amount > this.capacity) return MINUTE_MS;
    return (missing * MINUTE_MS) / this.capacity;
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
    const level = this.available(now);
    return {
      limit: this.capacity,
      remaining: Math.max(0, Math.floor(level)),
      resetMs: Math.max(0, ((this.capacity - level) * MINUTE_MS) / this.capacity),
    };
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

/** The three buckets of one key. A limit left out is not enforced and not reported. */
export class KeyLimiter {
  private readonly requests?: TokenBucket;
  private readonly input?: TokenBucket;
  private readonly output?: TokenBucket;

  constructor(
    limits: SimKeyLimits,
    private readonly now: () => number,
  ) {
    const t = now();
    if (limits.rpm !== undefined) this.requests = new TokenBucket(limits.rpm, t);
    if (limits.itpm !== undefined) this.input = new TokenBucket(limits.itpm, t);
    if (limits.otpm !== undefined) this.output = new TokenBucket(limits.otpm, t);
  }

  /** Charges the request to every bucket, or to none when one of them cannot take it. */
  admit(inputTokens: number, maxTokens: number): Admission {
    const now = this.now();
    const checks = [
      { bucket: this.requests, amount: 1, limit: 'requests' as const, unit: 'requests' },
      { bucket: this.input, amount: inputTokens, limit: 'input_tokens' as const, unit: 'input tokens' },
      { bucket: this.output, amount: maxTokens, limit: 'output_tokens' as const, unit: 'output tokens' },
    ];
    for (const { bucket, amount, limit, unit } of checks) {
      if (!bucket) continue;
      const wait = bucket.waitMs(amount, now);
      if (wait > 0) {
        const message =
          amount > bucket.capacity
            ? `This request needs ${amount} ${unit}, more than this key's limit of ${bucket.capacity} ${unit} per minute.`
            : `This request would exceed this key's rate limit of ${bucket.capacity} ${unit} per minute.`;
        return { ok: false, retryAfterMs: Math.ceil(wait), limit, message };
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
