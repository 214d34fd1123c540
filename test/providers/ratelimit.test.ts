import { describe, expect, it } from 'vitest';
import { headerOf, parseDuration, parseRateLimitHeaders, parseRetryAfter, rateLimitOf } from '../../src/providers/ratelimit.js';

const NOW = Date.parse('2025-06-01T12:00:00Z');

describe('parseDuration', () => {
  it.each([
    ['6m0s', 360_000],
    ['1s', 1000],
    ['20ms', 20],
    ['1h2m3.5s', 3_723_500],
    ['0s', 0],
    ['2.5s', 2500],
    ['59.56s', 59_560],
    ['1m30.25s', 90_250],
    ['500us', 1],
    ['12', 12_000],
  ])('reads %s as %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 'soon', '6 m', '1x', 'm5', '1s junk'])('refuses %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds, fractional seconds and an HTTP-date relative to now', () => {
    expect(parseRetryAfter({ 'retry-after': '7' }, NOW)).toBe(7000);
    expect(parseRetryAfter({ 'retry-after': '0.5' }, NOW)).toBe(500);
    expect(parseRetryAfter({ 'retry-after': 'Sun, 01 Jun 2025 12:00:30 GMT' }, NOW)).toBe(30_000);
    expect(parseRetryAfter({ 'retry-after': 'Sun, 01 Jun 2025 11:00:00 GMT' }, NOW)).toBe(0);
  });

  it('prefers retry-after-ms, and returns undefined when absent or unreadable', () => {
    expect(parseRetryAfter({ 'retry-after-ms': '1234', 'retry-after': '2' }, NOW)).toBe(1234);
    expect(parseRetryAfter({}, NOW)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after': 'later' }, NOW)).toBeUndefined();
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
  });

  it('ignores a negative or garbage Retry-After like a missing one (Date.parse reads "-5" as a year)', () => {
    expect(parseRetryAfter({ 'retry-after': '-5' }, NOW)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after': 'soon' }, NOW)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after': '2025' }, NOW)).toBe(2_025_000); // seconds, not a year
    expect(parseRetryAfter({ 'retry-after': 'Sun, 01 Jun 2025 12:00:05 GMT' }, NOW)).toBe(5_000);
  });

  it('reads Headers objects and mixed-case record keys too', () => {
    expect(parseRetryAfter(new Headers({ 'Retry-After': '3' }), NOW)).toBe(3000);
    expect(parseRetryAfter({ 'Retry-After': '4' }, NOW)).toBe(4000);
    expect(headerOf({ 'x-a': ['1', '2'] }, 'X-A')).toBe('1');
  });
});

describe('parseRateLimitHeaders', () => {
  it('reads Anthropic headers, with RFC 3339 resets as ms from now', () => {
    const hint = parseRateLimitHeaders(
      {
        'anthropic-ratelimit-requests-limit': '50',
        'anthropic-ratelimit-requests-remaining': '49',
        'anthropic-ratelimit-requests-reset': '2025-06-01T12:00:01Z',
        'anthropic-ratelimit-tokens-remaining': '10000',
        'anthropic-ratelimit-tokens-reset': '2025-06-01T12:00:09Z',
        'anthropic-ratelimit-input-tokens-remaining': '39000',
        'anthropic-ratelimit-input-tokens-reset': '2025-06-01T12:00:02.500Z',
        'anthropic-ratelimit-output-tokens-remaining': '7900',
        'anthropic-ratelimit-output-tokens-reset': '2025-06-01T14:00:00+02:00',
      },
      NOW,
    );
    expect(hint).toEqual({
      requestsLimit: 50,
      requestsRemaining: 49,
      requestsResetMs: 1000,
      inputTokensRemaining: 39_000,
      inputTokensResetMs: 2500,
      outputTokensRemaining: 7900,
      outputTokensResetMs: 0,
    });
  });

  it('uses Anthropic tokens-* for input tokens only when input-tokens-* are absent', () => {
    expect(
      parseRateLimitHeaders({ 'anthropic-ratelimit-tokens-remaining': '500', 'anthropic-ratelimit-tokens-reset': '2025-06-01T12:01:00Z' }, NOW),
    ).toEqual({ inputTokensRemaining: 500, inputTokensResetMs: 60_000 });
  });

  it('reads OpenAI headers, mapping the tokens limit to input tokens', () => {
    const hint = parseRateLimitHeaders(
      {
        'x-ratelimit-limit-requests': '10000',
        'x-ratelimit-remaining-requests': '9999',
        'x-ratelimit-reset-requests': '6m0s',
        'x-ratelimit-limit-tokens': '200000',
        'x-ratelimit-remaining-tokens': '199000',
        'x-ratelimit-reset-tokens': '1h2m3.5s',
      },
      NOW,
    );
    expect(hint).toEqual({
      requestsLimit: 10_000,
      requestsRemaining: 9999,
      requestsResetMs: 360_000,
      inputTokensLimit: 200_000,
      inputTokensRemaining: 199_000,
      inputTokensResetMs: 3_723_500,
    });
  });

  it('skips unreadable values and returns {} when the server said nothing', () => {
    expect(parseRateLimitHeaders({ 'x-ratelimit-remaining-requests': 'many', 'anthropic-ratelimit-requests-reset': 'soon' }, NOW)).toEqual({});
    expect(parseRateLimitHeaders({ 'content-type': 'application/json' }, NOW)).toEqual({});
    expect(rateLimitOf({}, NOW)).toBeUndefined();
    expect(rateLimitOf({ 'x-ratelimit-reset-tokens': '20ms' }, NOW)).toEqual({ inputTokensResetMs: 20 });
  });

  it('reads mixed-case and repeated names as headerOf does: the exact lower-case name first, else the first spelling', () => {
    const headers = {
      'Anthropic-RateLimit-Requests-Limit': '50',
      'anthropic-ratelimit-requests-limit': '60',
      'X-RateLimit-Remaining-Requests': ['7', '8'],
      'x-RATELIMIT-remaining-requests': '9',
      'X-Ratelimit-Reset-Tokens': ' 20ms ',
      'Content-Type': 'text/event-stream',
    };
    expect(parseRateLimitHeaders(headers, NOW)).toEqual({ requestsLimit: 60, requestsRemaining: 7, inputTokensResetMs: 20 });
  });

  it("walks the names of a response's headers once, not once for each rate-limit header it lacks", () => {
    let walks = 0;
    const record = { 'content-type': 'text/event-stream', 'request-id': 'req_1', 'x-ratelimit-limit-requests': '60' };
    const counted = new Proxy(record, {
      ownKeys(target) {
        walks++;
        return Reflect.ownKeys(target);
      },
    });
    expect(parseRateLimitHeaders(counted, NOW)).toEqual({ requestsLimit: 60 });
    expect(walks).toBe(1);
  });
});
