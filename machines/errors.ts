/**
 * Pure decisions about errors: what an ErrorInfo means for the key, the breaker and the agent.
 * `src/providers/errors.ts` classifies wire errors into ErrorInfo; the machines only read codes.
 */
import type { BreakerVerdict, ErrorCode, ErrorInfo, LeaseOutcome, Usage } from './protocol.js';

const CODES: ReadonlySet<string> = new Set<ErrorCode>([
  'rate_limited', 'overloaded', 'server_error', 'timeout', 'network', 'auth', 'bad_request',
  'context_overflow', 'budget_exceeded', 'spend_cap', 'no_keys', 'max_turns', 'task_timeout',
  'tool_error', 'cancelled', 'skipped', 'dispatch_denied', 'invalid_plan', 'invalid_output', 'rejected_output', 'internal',
  'fn_error', 'rejected',
]);

/** Server-side failures: the only ones a route's breaker counts. */
const SERVER_SIDE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['overloaded', 'server_error', 'timeout', 'network']);

/**
 * Reads whatever an actor rejected with as an ErrorInfo. Errors thrown by `src/` carry `code`
 * and `retryable`; anything else is an internal error (not retried: it is a bug, not bad luck).
 */
export function toErrorInfo(error: unknown): ErrorInfo {
  if (error && typeof error === 'object') {
    const e = error as Partial<ErrorInfo> & { message?: unknown };
    if (typeof e.code === 'string' && CODES.has(e.code)) {
      const info: ErrorInfo = {
        code: e.code,
        message: typeof e.message === 'string' ? e.message : e.code,
        retryable: Boolean(e.retryable),
      };
      if (typeof e.retryAfterMs === 'number') info.retryAfterMs = e.retryAfterMs;
      if (typeof e.status === 'number') info.status = e.status;
      if (typeof e.provider === 'string') info.provider = e.provider;
      if (typeof e.model === 'string') info.model = e.model;
      if (typeof e.keyId === 'string') info.keyId = e.keyId;
      if (e.rateLimit && typeof e.rateLimit === 'object') info.rateLimit = e.rateLimit;
      if (e.unsent === true) info.unsent = true;
      return info;
    }
    if (typeof e.message === 'string') return { code: 'internal', message: e.message, retryable: false };
  }
  return { code: 'internal', message: String(error), retryable: false };
}

/**
 * What a provider's message says of a retryable error (src/providers/classify.ts writes it): it
 * is written when the error is classified, before anyone knows whether a retry is left.
 */
export const RETRIED_WITH_BACKOFF = 'the call is retried with backoff';

/**
 * A retryable error an attempt ends with because no retry is left: its message made true (a
 * "retried with backoff" becomes "not retried", and any other says the retries are spent).
 *
 * @example
 * retriesSpent({ code: 'network', message: 'p/m: reset: the call is retried with backoff.', retryable: true }).message
 * // "p/m: reset: the call is not retried: the task's retries are spent."
 */
export function retriesSpent(error: ErrorInfo): ErrorInfo {
  const message = error.message.includes(RETRIED_WITH_BACKOFF)
    ? error.message.replace(RETRIED_WITH_BACKOFF, "the call is not retried: the task's retries are spent")
    : `${error.message.replace(/\.$/, '')}; the task's retries are spent, so it is not retried.`;
  return { ...error, message };
}

/**
 * Whether a failed call may have reached the server, and so may have been billed: a timeout, a
 * reset or a cut stream (`network`), or an `overloaded` / `server_error` without an HTTP status
 * (an error event inside a 200 stream, a malformed 200 body), unless the error says the request
 * was never sent (`unsent`: the connection failed before it). A status means the server answered
 * the request by refusing it: not billed.
 */
export function mayHaveReachedServer(error: ErrorInfo): boolean {
  if (error.unsent === true) return false;
  if (error.code === 'timeout' || error.code === 'network') return true;
  return (error.code === 'overloaded' || error.code === 'server_error') && error.status === undefined;
}

export function breakerVerdictOf(error: ErrorInfo): BreakerVerdict {
  return SERVER_SIDE.has(error.code) ? 'failure' : 'neutral';
}

export function leaseOutcomeOf(error: ErrorInfo, usage?: Usage): LeaseOutcome {
  const hint = error.rateLimit ? { rateLimit: error.rateLimit } : {};
  switch (error.code) {
    case 'rate_limited':
      return error.retryAfterMs === undefined ? { kind: 'rate_limited', ...hint } : { kind: 'rate_limited', retryAfterMs: error.retryAfterMs, ...hint };
    case 'auth':
      return { kind: 'auth' };
    default:
      return usage ? { kind: 'error', usage, ...hint } : { kind: 'error', ...hint };
  }
}

/**
 * Whether the agent's own wait must honour the server's Retry-After. A 429 or a 401/403 is about one
 * key: that key enforces the wait (or is revoked) and the pool routes the retry to another key,
 * so the agent need not sit out the key's Retry-After itself. Anything else (a 503 or 529 with
 * Retry-After) is about the route, and the agent never retries sooner.
 */
export function isKeyScoped(error: ErrorInfo): boolean {
  return error.code === 'rate_limited' || error.code === 'auth';
}

export function errorInfo(code: ErrorCode, message: string, retryable = false): ErrorInfo {
  return { code, message, retryable };
}
