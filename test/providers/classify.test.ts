import { describe, expect, it } from 'vitest';
import {
  classifyHttpError,
  classifyStreamError,
  classifyTransportError,
  redactSecret,
  serverErrorOf,
} from '../../src/providers/classify.js';
import { ProviderError } from '../../src/providers/errors.js';

const FACTS = { provider: 'main', model: 'model-x', keyId: 'main:ab12' };
const NOW = Date.parse('2025-06-01T12:00:00Z');
const anthropicBody = (type: string, message: string) => JSON.stringify({ type: 'error', error: { type, message }, request_id: 'req_1' });
const openaiBody = (message: string, type: string, code: string | null) => JSON.stringify({ error: { message, type, param: null, code } });

function classify(status: number, body: string, headers: Record<string, string> = {}) {
  return classifyHttpError({ ...FACTS, status, body, headers, now: NOW });
}

describe('classifyHttpError', () => {
  it.each([
    [400, 'bad_request', false],
    [401, 'auth', true],
    [403, 'auth', true],
    [404, 'bad_request', false],
    [408, 'timeout', true],
    [413, 'bad_request', false],
    [422, 'bad_request', false],
    [429, 'rate_limited', true],
    [500, 'server_error', true],
    [502, 'server_error', true],
    [503, 'server_error', true],
    [504, 'server_error', true],
    [520, 'server_error', true],
    [529, 'overloaded', true],
    [402, 'spend_cap', false],
  ])('maps HTTP %i to %s (retryable %s)', (status, code, retryable) => {
    const error = classify(status, anthropicBody('some_error', 'something'));
    expect(error).toBeInstanceOf(ProviderError);
    expect(error.code).toBe(code);
    expect(error.retryable).toBe(retryable);
    expect(error.status).toBe(status);
  });

  it('reads 429 with Retry-After as rate_limited even when the message names billing', () => {
    const error = classify(429, openaiBody('add a payment method at https://platform.openai.com/account/billing', 'requests', null), { 'retry-after': '20' });
    expect(error.code).toBe('rate_limited');
    expect(error.retryAfterMs).toBe(20_000);
  });

  it.each([
    ['insufficient_quota', openaiBody('You exceeded your current quota, please check your plan and billing details.', 'insufficient_quota', 'insufficient_quota')],
    ['spend limit', anthropicBody('rate_limit_error', 'You have reached your monthly spend limit.')],
    ['credit balance', anthropicBody('rate_limit_error', 'Your credit balance is too low to access the API.')],
    ['billing', anthropicBody('rate_limit_error', 'Billing hard limit has been reached')],
    [
      'enforced_spend_limit_reached',
      JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'Limit reached.', details: { error_code: 'enforced_spend_limit_reached' } } }),
    ],
  ])('reads 429 without Retry-After naming %s as spend_cap, not retryable', (_name, body) => {
    const error = classify(429, body);
    expect(error.code).toBe('spend_cap');
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/raise the limit or add credits/);
  });

  it.each([
    ['insufficient_quota', openaiBody('You exceeded your current quota, please check your plan and billing details.', 'insufficient_quota', 'insufficient_quota'), { 'retry-after': '20' }],
    ['insufficient_quota (retry-after-ms)', openaiBody('You exceeded your current quota.', 'insufficient_quota', 'insufficient_quota'), { 'retry-after-ms': '1500', 'x-ratelimit-remaining-requests': '0' }],
    ['Anthropic monthly spend limit', anthropicBody('rate_limit_error', "This request would exceed your account's monthly spend limit. Please try again later."), { 'retry-after': '3600' }],
    [
      'enforced_spend_limit_reached',
      JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'Limit reached.', details: { error_code: 'enforced_spend_limit_reached' } } }),
      { 'retry-after': '86400' },
    ],
    ['credit balance', anthropicBody('rate_limit_error', 'Your credit balance is too low to access the Anthropic API.'), { 'retry-after': '5' }],
  ])('reads 429 WITH Retry-After naming %s as spend_cap: a spent quota does not come back by waiting', (_name, body, headers) => {
    const error = classify(429, body, headers);
    expect(error.code).toBe('spend_cap');
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/raise the limit or add credits; this is not retried\.$/);
  });

  it('keeps a 429 with Retry-After whose message only says "exceeded your current quota" (a per-minute quota, as Gemini words it) rate_limited', () => {
    const error = classify(429, JSON.stringify({ error: { code: 429, message: 'You exceeded your current quota, please check your plan and billing details.', status: 'RESOURCE_EXHAUSTED' } }), { 'retry-after': '41' });
    expect(error.code).toBe('rate_limited');
    expect(error.retryAfterMs).toBe(41_000);
  });

  it('reads a plain 429 without Retry-After as rate_limited, taking "try again in" from the message', () => {
    const error = classify(429, openaiBody('Rate limit reached for gpt-4o on tokens per min (TPM). Please try again in 1m2.5s.', 'tokens', 'rate_limit_exceeded'));
    expect(error.code).toBe('rate_limited');
    expect(error.retryAfterMs).toBe(62_500);
    expect(classify(429, anthropicBody('rate_limit_error', 'slow down')).retryAfterMs).toBeUndefined();
  });

  it('reads an Anthropic 400 workspace spend limit as spend_cap', () => {
    const error = classify(400, anthropicBody('invalid_request_error', 'You have reached your specified workspace API usage limits. You will regain access on 2026-06-01.'));
    expect(error.code).toBe('spend_cap');
  });

  it.each([
    [400, anthropicBody('invalid_request_error', 'prompt is too long: 215032 tokens > 200000 maximum')],
    [400, anthropicBody('invalid_request_error', 'input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000')],
    [400, openaiBody("This model's maximum context length is 8192 tokens.", 'invalid_request_error', 'context_length_exceeded')],
    [400, openaiBody('too long', 'invalid_request_error', 'context_length_exceeded')],
    [413, openaiBody("This model's maximum context length is 8192 tokens.", 'invalid_request_error', null)],
  ])('reads a context-window error (%i) as context_overflow', (status, body) => {
    const error = classify(status, body);
    expect(error.code).toBe('context_overflow');
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/context window of model-x/);
  });

  it('honours Retry-After on 503 and 529 and keeps the rate-limit headers of the error response', () => {
    const error = classify(529, anthropicBody('overloaded_error', 'Overloaded'), {
      'retry-after': '3',
      'anthropic-ratelimit-requests-remaining': '0',
      'anthropic-ratelimit-requests-reset': '2025-06-01T12:00:05Z',
    });
    expect(error.code).toBe('overloaded');
    expect(error.retryAfterMs).toBe(3000);
    expect(error.rateLimit).toEqual({ requestsRemaining: 0, requestsResetMs: 5000 });
    expect(classify(503, 'Service Unavailable', { 'retry-after': '1' }).retryAfterMs).toBe(1000);
  });

  it('writes messages with the provider, model, key id, status, server message, request id and what happens next', () => {
    const error = classify(401, anthropicBody('authentication_error', 'invalid x-api-key'));
    expect(error.message).toBe(
      'main/model-x, key main:ab12: HTTP 401 authentication_error: invalid x-api-key [request req_1]. ' +
        'The key main:ab12 was rejected (401): it will not be used again in this run.',
    );
    expect(error.toJSON()).toMatchObject({ code: 'auth', provider: 'main', model: 'model-x', keyId: 'main:ab12', status: 401 });
    expect(classify(404, anthropicBody('not_found_error', 'model: nope')).message).toMatch(/Check the model id "model-x"/);
  });

  it('takes the request id from the headers when the body has none, and copes with non-JSON bodies', () => {
    const error = classify(502, '<html><body>502 Bad Gateway</body></html>', { 'x-request-id': 'abc' });
    expect(error.code).toBe('server_error');
    expect(error.message).toContain('502 Bad Gateway');
    expect(error.message).toContain('[request abc]');
    expect(classify(500, '').message).toContain('(empty body)');
  });
});

describe('serverErrorOf', () => {
  it('reads both dialects and common variants', () => {
    expect(serverErrorOf(anthropicBody('api_error', 'boom'))).toEqual({ type: 'api_error', message: 'boom', requestId: 'req_1' });
    expect(serverErrorOf(openaiBody('bad', 'invalid_request_error', 'invalid_value'))).toEqual({ type: 'invalid_request_error', code: 'invalid_value', message: 'bad' });
    expect(serverErrorOf('{"error":"plain string"}').message).toBe('plain string');
    expect(serverErrorOf('{"detail":"fastapi style"}').message).toBe('fastapi style');
    expect(serverErrorOf('x'.repeat(2000)).message.length).toBeLessThan(600);
  });
});

describe('classifyStreamError', () => {
  it('classifies an error event after HTTP 200 by its type, without a status', () => {
    const overloaded = classifyStreamError({ ...FACTS, data: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}' });
    expect(overloaded.code).toBe('overloaded');
    expect(overloaded.retryable).toBe(true);
    expect(overloaded.status).toBeUndefined();
    expect(overloaded.message).toMatch(/error event after HTTP 200/);
    expect(classifyStreamError({ ...FACTS, data: '{"type":"error","error":{"type":"api_error","message":"x"}}' }).code).toBe('server_error');
    expect(classifyStreamError({ ...FACTS, data: '{"type":"error","error":{"type":"brand_new_error","message":"x"}}' }).code).toBe('server_error');
    expect(classifyStreamError({ ...FACTS, data: '{"error":{"message":"x","type":"server_error","code":null}}' }).code).toBe('server_error');
  });
});

describe('classifyTransportError', () => {
  const undiciError = (code: string, message = code) => Object.assign(new Error(message), { code });

  it.each([
    ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
    ['UND_ERR_BODY_TIMEOUT', 'timeout'],
    ['UND_ERR_CONNECT_TIMEOUT', 'timeout'],
    ['ECONNRESET', 'network'],
    ['UND_ERR_SOCKET', 'network'],
    ['ECONNREFUSED', 'network'],
    ['HPE_INVALID_CHUNK_SIZE', 'network'],
  ])('maps %s to %s, retryable', (code, expected) => {
    const error = classifyTransportError(undiciError(code), { ...FACTS, headersTimeoutMs: 100, bodyTimeoutMs: 200 });
    expect(error.code).toBe(expected);
    expect(error.retryable).toBe(true);
    expect(error.keyId).toBe('main:ab12');
  });

  it('finds a code in the cause chain', () => {
    const wrapped = new Error('fetch failed', { cause: undiciError('ECONNRESET') });
    expect(classifyTransportError(wrapped, FACTS).code).toBe('network');
  });

  it('reports the call as cancelled when its signal fired, whatever was thrown', () => {
    const controller = new AbortController();
    controller.abort();
    const error = classifyTransportError(undiciError('UND_ERR_SOCKET'), { ...FACTS, signal: controller.signal });
    expect(error.code).toBe('cancelled');
    expect(error.retryable).toBe(false);
  });

  it('reads unknown errors as internal, not retryable', () => {
    const error = classifyTransportError(new TypeError('x is not a function'), FACTS);
    expect(error.code).toBe('internal');
    expect(error.retryable).toBe(false);
  });
});

describe('redactSecret', () => {
  it('removes the secret, raw and JSON-escaped', () => {
    expect(redactSecret('key sk-a"b and sk-a\\"b', 'sk-a"b')).toBe('key [redacted] and [redacted]');
    expect(redactSecret('nothing here', 'sk-123456')).toBe('nothing here');
  });
});
