/** The plain data every protocol shares: token usage, the error a call or task ends with (its journaled `ErrorInfo` code vocabulary), rate-limit hints and key limits. */
/** Token usage of one model call, normalized across providers. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheWriteTokens: number;
  cacheReadTokens: number;
}

export const ZERO_USAGE: Usage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheWriteTokens: 0,
  cacheReadTokens: 0,
});

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
  };
}

/**
 * Error classes (see docs/architecture.md). Each model-call outcome moves exactly one machine:
 * `rate_limited` the key, `auth` the key (revoked), server-side classes the route's breaker.
 */
export type ErrorCode =
  | 'rate_limited'
  | 'overloaded'
  | 'server_error'
  | 'timeout'
  | 'network'
  | 'auth'
  | 'bad_request'
  | 'context_overflow'
  | 'budget_exceeded'
  | 'spend_cap'
  | 'no_keys'
  | 'max_turns'
  | 'task_timeout'
  | 'tool_error'
  | 'cancelled'
  | 'skipped'
  | 'dispatch_denied'
  | 'invalid_plan'
  /** The answer is not JSON its task's output.schema accepts (retried with the problems). */
  | 'invalid_output'
  /** The answer failed a quality gate of its task's `accept` (retried with the reason). */
  | 'rejected_output'
  /** A plan function (`kind: "fn"`) threw, or returned a value that is not JSON. */
  | 'fn_error'
  /** A person rejected an approval (or its timeoutMs passed with no decision). */
  | 'rejected'
  | 'internal';

/** A serializable description of an error: what went wrong and the facts, never a secret. */
export interface ErrorInfo {
  code: ErrorCode;
  message: string;
  /** True when trying again (after a wait, or on another key) may succeed. */
  retryable: boolean;
  /** The server's Retry-After, in ms, when it sent one. */
  retryAfterMs?: number;
  status?: number;
  provider?: string;
  model?: string;
  keyId?: string;
  /** Rate-limit headers that came with the error response, for the key. */
  rateLimit?: RateLimitHint;
  /** `invalid_output` / `rejected_output`: what was wrong with the answer (the next attempt's prompt says it). */
  problems?: string[];
  /**
   * The request never reached the server: the connection failed before anything was sent
   * (refused, no such host, unreachable, a connect timeout). Such a call was not billed; any
   * other failed call may have been (docs/architecture.md, Budgets).
   */
  unsent?: boolean;
}

/** Rate-limit facts read from response headers; each field optional. Durations are in ms. */
export interface RateLimitHint {
  /** The per-minute limits the server states (`*-limit` headers). */
  requestsLimit?: number;
  inputTokensLimit?: number;
  outputTokensLimit?: number;
  requestsRemaining?: number;
  requestsResetMs?: number;
  inputTokensRemaining?: number;
  inputTokensResetMs?: number;
  outputTokensRemaining?: number;
  outputTokensResetMs?: number;
}

/**
 * Per-key limits. Absent fields mean "no limit known". Each per-minute limit is a token bucket
 * that refills continuously at that rate and holds at most its `burst`.
 */
export interface KeyLimits {
  /** Requests per minute. */
  rpm?: number;
  /** Input tokens per minute. */
  itpm?: number;
  /** Output tokens per minute. */
  otpm?: number;
  /** Bucket capacities; each defaults to one second of its rate (at least 1), so calls go out evenly. */
  burst?: { rpm?: number; itpm?: number; otpm?: number };
  /** Leases out at once. */
  concurrency?: number;
}
