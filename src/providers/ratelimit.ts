/**
 * Rate-limit facts from response headers, for the key actor: each limit (a per-minute rate), how
 * much of it is left and when it is full again, plus the server's Retry-After. Both wire dialects are read from one place.
 *
 * - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
 *   resets as RFC 3339 instants.
 * - OpenAI-compatible: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as Go-style
 *   durations (`6m0s`, `1s`, `20ms`, `1h2m3.5s`).
 *
 * Mapping choices: OpenAI has a single tokens-per-minute limit that counts the prompt and the
 * completion together; the prompt is what a request spends up front, so it is reported as the
 * input-token limit (`inputTokens*`). Anthropic's combined `tokens-*` headers are likewise read as
 * the input-token limit, but only when the specific `input-tokens-*` headers are absent.
 */
import type { RateLimitHint } from '../../machines/protocol.js';

/** Response headers as undici (a plain lower-case record) or fetch (`Headers`) give them. */
export type HeaderSource = Record<string, string | string[] | undefined> | { get(name: string): string | null };

/** Reads one header case-insensitively; a repeated header gives its first value. */
export function headerOf(headers: HeaderSource | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  const lower = name.toLowerCase();
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(lower) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[lower];
  if (value === undefined) {
    for (const key of Object.keys(record)) {
      if (key.toLowerCase() === lower) {
        value = record[key];
        break;
      }
    }
  }
  if (Array.isArray(value)) value = value[0];
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, 'µs': 0.001, ns: 0.000001 };

/**
 * A Go-style duration (`6m0s`, `1s`, `20ms`, `1h2m3.5s`) in ms, rounded up to a whole ms.
 * A bare number is read as seconds (some OpenAI-compatible servers send that).
 * Returns undefined for anything else.
 *
 * @example parseDuration('1h2m3.5s') // 3_723_500
 */
export function parseDuration(text: string): number | undefined {
  const s = text.trim();
  if (s === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(s)) return Math.ceil(Number(s) * 1000);
  const part = /(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/y;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    part.lastIndex = at;
    const match = part.exec(s);
    if (!match) return undefined;
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
    at = part.lastIndex;
  }
  return Math.max(0, Math.ceil(total - 1e-9));
}

/** An RFC 3339 instant as ms from `now` (never negative), or undefined if it does not parse. */
function msUntil(instant: string, now: number): number | undefined {
  // Date.parse takes RFC 3339 with 'T' and a zone; reject bare numbers, which it would also take.
  if (!/^\d{4}-\d{2}-\d{2}[T ]/.test(instant)) return undefined;
  const at = Date.parse(instant);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d+(\.\d+)?$/.test(text)) return undefined;
  return Number(text);
}

/**
 * The server's wait, in ms: `retry-after-ms` first (OpenAI sends it, more precise), then
 * `retry-after` as seconds or as an HTTP-date (relative to `now`). Undefined when absent or
 * unreadable.
 *
 * @example parseRetryAfter({ 'retry-after': '7' }) // 7000
 */
export function parseRetryAfter(headers: HeaderSource | undefined, now: number = Date.now()): number | undefined {
  const ms = headerOf(headers, 'retry-after-ms');
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms)) return Math.ceil(Number(ms));
  const value = headerOf(headers, 'retry-after');
  if (value === undefined) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  // An HTTP-date starts with a day name (RFC 9110 §5.6.7). Anything else, such as "-5" (which
  // Date.parse reads as the year -5, "no wait"), is garbage and ignored like a missing header.
  if (!/^[A-Za-z]{3,9},? /.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * Every rate-limit fact the headers carry, in either dialect; fields absent from the headers are
 * absent from the result (so `{}` means "the server said nothing").
 *
 * @example
 * parseRateLimitHeaders({ 'x-ratelimit-remaining-requests': '59', 'x-ratelimit-reset-requests': '1s' })
 * // { requestsRemaining: 59, requestsResetMs: 1000 }
 */
export function parseRateLimitHeaders(headers: HeaderSource | undefined, now: number = Date.now()): RateLimitHint {
  const hint: RateLimitHint = {};
  const view = rateLimitView(headers);
  if (view === null) return hint;
  const set = (field: keyof RateLimitHint, value: number | undefined) => {
    if (value !== undefined && hint[field] === undefined) hint[field] = value;
  };
  const anthropic = (name: string) => headerOf(view, `anthropic-ratelimit-${name}`);
  const reset = (name: string) => {
    const v = anthropic(`${name}-reset`);
    return v === undefined ? undefined : msUntil(v, now);
  };

  // Anthropic. The specific input/output headers win over the combined tokens-* ones.
  set('requestsLimit', count(anthropic('requests-limit')));
  set('inputTokensLimit', count(anthropic('input-tokens-limit')));
  set('outputTokensLimit', count(anthropic('output-tokens-limit')));
  set('inputTokensLimit', count(anthropic('tokens-limit')));
  set('requestsRemaining', count(anthropic('requests-remaining')));
  set('requestsResetMs', reset('requests'));
  set('inputTokensRemaining', count(anthropic('input-tokens-remaining')));
  set('inputTokensResetMs', reset('input-tokens'));
  set('outputTokensRemaining', count(anthropic('output-tokens-remaining')));
  set('outputTokensResetMs', reset('output-tokens'));
  set('inputTokensRemaining', count(anthropic('tokens-remaining')));
  set('inputTokensResetMs', reset('tokens'));

  // OpenAI-compatible.
  const duration = (name: string) => {
    const v = headerOf(view, name);
    return v === undefined ? undefined : parseDuration(v);
  };
  set('requestsLimit', count(headerOf(view, 'x-ratelimit-limit-requests')));
  set('inputTokensLimit', count(headerOf(view, 'x-ratelimit-limit-tokens')));
  set('requestsRemaining', count(headerOf(view, 'x-ratelimit-remaining-requests')));
  set('requestsResetMs', duration('x-ratelimit-reset-requests'));
  set('inputTokensRemaining', count(headerOf(view, 'x-ratelimit-remaining-tokens')));
  set('inputTokensResetMs', duration('x-ratelimit-reset-tokens'));
  return hint;
}

const RATE_LIMIT_PREFIXES = ['anthropic-ratelimit-', 'x-ratelimit-'];

/**
 * The rate-limit headers of `headers` as a record of lower-case names (the first of a name that
 * differs only in case, as headerOf picks), or null when there are none: one pass over the names
 * instead of a case-insensitive scan of all of them for each of the 18 names read, most of which
 * a response does not carry.
 */
function rateLimitView(headers: HeaderSource | undefined): HeaderSource | null {
  if (!headers) return null;
  if (typeof (headers as { get?: unknown }).get === 'function') return headers;
  const record = headers as Record<string, string | string[] | undefined>;
  let view: Record<string, string | string[] | undefined> | null = null;
  for (const name of Object.keys(record)) {
    let lower = name;
    if (!name.startsWith('anthropic-ratelimit-') && !name.startsWith('x-ratelimit-')) {
      lower = name.toLowerCase();
      if (lower === name || !RATE_LIMIT_PREFIXES.some((prefix) => lower.startsWith(prefix))) continue;
    }
    view ??= {};
    // As headerOf: the exact lower-case name when it has a value, else the first spelling met.
    if ((lower === name && record[name] !== undefined) || !(lower in view)) view[lower] = record[name];
  }
  return view;
}

/** The hint, or undefined when the headers said nothing (so outputs carry no empty object). */
export function rateLimitOf(headers: HeaderSource | undefined, now: number = Date.now()): RateLimitHint | undefined {
  const hint = parseRateLimitHeaders(headers, now);
  return Object.keys(hint).length === 0 ? undefined : hint;
}
