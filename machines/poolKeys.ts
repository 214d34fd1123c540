/**
 * What the pool believes of its keys, and the denials that follow from it: pure helpers of
 * pool.machine.ts, apart so the machine file stays readable.
 */
import type { ErrorInfo, KeyState } from './protocol.js';

/** What the pool believes of one key. */
export interface KeySlot {
  state: KeyState | 'starting';
  /** Revoked or set aside, or an auth failure is on its way to it: never send it anything again. */
  closed: boolean;
  /** In backoff: when it ends (the server's Retry-After). */
  until?: number;
  /** Grants it may still be sent before it speaks again (while ready; Infinity: no bound). */
  room: number;
}

/**
 * Why a request is denied when no key is left: none at all or every one revoked (`no_keys`), or
 * some set aside for meeting nothing but 429s (`rate_limited`: a fallback may take over).
 */
export function denial(provider: string, keys: { count: number; revoked: number; maxRateLimitedMs: number }): ErrorInfo {
  if (keys.count === 0) return { code: 'no_keys', retryable: false, provider, message: `provider ${provider} has no API keys: add one to the provider's keys` };
  if (keys.revoked === keys.count) {
    return { code: 'no_keys', retryable: false, provider, message: `every key of provider ${provider} is revoked (401/403): check or replace the provider's API keys` };
  }
  const limited = `nothing but 429s (rate limited) for ${keys.maxRateLimitedMs} ms (maxRateLimitedMs)`;
  const what =
    keys.revoked === 0
      ? `every key of provider ${provider} is set aside: each met ${limited}`
      : `no key of provider ${provider} is left: ${keys.revoked} revoked (401/403), ${keys.count - keys.revoked} set aside after ${limited}`;
  const message = `${what}. Add keys, wait for the limit to lift, or check the provider's limits for these keys`;
  return { code: 'rate_limited', retryable: false, provider, message };
}

/**
 * When every live key is backing off after a 429: the earliest end of those backoffs. A request
 * whose deadline comes first cannot be served in time, so it is denied now rather than left to
 * wait for its deadline (a Retry-After of days is not a reason to hold a slot for days).
 */
export function backoffEnd(keys: Iterable<KeySlot>): number | undefined {
  let end: number | undefined;
  for (const slot of keys) {
    if (slot.closed) continue;
    if (slot.state !== 'backoff' || slot.until === undefined) return undefined;
    end = end === undefined ? slot.until : Math.min(end, slot.until);
  }
  return end;
}

/** Why a request is denied when every key backs off past its deadline. */
export function pastDeadline(provider: string): ErrorInfo {
  return {
    code: 'rate_limited',
    retryable: false,
    provider,
    message: `every key of provider ${provider} is rate limited (429) until after this attempt's deadline: it cannot be served in time. Give the task a longer timeoutMs, add keys, or lower the load on these keys`,
  };
}
