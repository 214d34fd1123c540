import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderError } from '../../src/providers/errors.js';
import type { Provider } from '../../src/providers/types.js';
import { fixture, makeRequest, SECRET, SSE, startServer, type TestServer } from './server.js';

let server: TestServer;
let provider: Provider;
let plain: Provider;

beforeAll(async () => {
  server = await startServer();
  provider = createAnthropicProvider({ baseURL: server.url });
  plain = createAnthropicProvider({ baseURL: server.url, stream: false, cache: false, version: '2024-01-01' });
});

afterAll(async () => {
  await provider.close?.();
  await plain.close?.();
  await server.close();
});

async function failure(p: Provider = provider): Promise<ProviderError> {
  const error = await p.call(makeRequest()).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

const lastRequest = () => server.requests[server.requests.length - 1]!;

describe('anthropic request', () => {
  it('sends the key in x-api-key only, with anthropic-version and JSON content type', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse') });
    await provider.call(makeRequest());
    const req = lastRequest();
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/v1/messages');
    expect(req.headers['x-api-key']).toBe(SECRET);
    expect(req.headers['anthropic-version']).toBe('2023-06-01');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers.authorization).toBeUndefined();
    expect(JSON.stringify(req.body)).not.toContain(SECRET);
  });

  it('maps system, messages, tool_use, tool_result (first in its turn) and tools', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse') });
    await provider.call(makeRequest());
    const body = lastRequest().body;
    expect(body).toMatchObject({ model: 'model-x', max_tokens: 1024, stream: true });
    expect(body.system).toEqual([{ type: 'text', text: 'You are a careful worker.', cache_control: { type: 'ephemeral' } }]);
    expect(body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'The shared brief: summarize the repo.', cache_control: { type: 'ephemeral' } }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Reading it.' },
          { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'README.md' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'not found', is_error: true },
          { type: 'text', text: 'Go on.' },
        ],
      },
    ]);
    expect(body.tools).toEqual([
      { name: 'read_file', description: 'Reads a file', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
      { name: 'list_files', input_schema: { type: 'object', properties: {} }, cache_control: { type: 'ephemeral' } },
    ]);
  });

  it('places at most 4 cache_control breakpoints: last tool, system, first user message', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse') });
    await provider.call(makeRequest());
    const breakpoints = JSON.stringify(lastRequest().body).match(/cache_control/g) ?? [];
    expect(breakpoints.length).toBe(3);
  });

  it('sends no cache_control, a plain system string and no stream flag with cache and stream off', async () => {
    server.respond({ status: 200, body: fixture('anthropic/message.json') });
    await plain.call(makeRequest());
    const req = lastRequest();
    expect(JSON.stringify(req.body)).not.toContain('cache_control');
    expect(req.body.system).toBe('You are a careful worker.');
    expect(req.body.stream).toBeUndefined();
    expect(req.headers['anthropic-version']).toBe('2024-01-01');
  });

  it('omits system and tools when the request has none', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse') });
    const { system: _system, ...rest } = makeRequest({ tools: [] });
    await provider.call(rest);
    expect(lastRequest().body.system).toBeUndefined();
    expect(lastRequest().body.tools).toBeUndefined();
  });
});

describe('anthropic streamed responses', () => {
  it('assembles streamed text across pings and normalizes usage with cache reads', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse'), chunkSize: 7 });
    const out = await provider.call(makeRequest());
    expect(out.content).toEqual([{ type: 'text', text: 'Hello, world! Ça va? 日本語' }]);
    expect(out.stopReason).toBe('end_turn');
    expect(out.usage).toEqual({ inputTokens: 25, outputTokens: 15, cacheWriteTokens: 0, cacheReadTokens: 2048 });
  });

  it('parses tool input split across many input_json_delta events, at stop', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/tool_use.sse'), chunkSize: 5 });
    const out = await provider.call(makeRequest());
    expect(out.content).toEqual([
      { type: 'text', text: "Okay, let's check the weather." },
      {
        type: 'tool_use',
        id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6',
        name: 'get_weather',
        input: { location: 'São Paulo, BR', unit: 'celsius', days: [1, 2, 3], note: 'say "hi"' },
      },
      { type: 'tool_use', id: 'toolu_01NoArgs', name: 'list_files', input: {} },
    ]);
    expect(out.stopReason).toBe('tool_use');
    expect(out.usage).toEqual({ inputTokens: 472, outputTokens: 89, cacheWriteTokens: 1500, cacheReadTokens: 0 });
  });

  it('returns the rate-limit headers of a successful response', async () => {
    const reset = new Date(Date.now() + 30_000).toISOString();
    server.respond({
      status: 200,
      headers: { ...SSE, 'anthropic-ratelimit-requests-remaining': '41', 'anthropic-ratelimit-input-tokens-remaining': '9000', 'anthropic-ratelimit-input-tokens-reset': reset },
      body: fixture('anthropic/text.sse'),
    });
    const out = await provider.call(makeRequest());
    expect(out.rateLimit?.requestsRemaining).toBe(41);
    expect(out.rateLimit?.inputTokensRemaining).toBe(9000);
    expect(out.rateLimit?.inputTokensResetMs).toBeGreaterThan(25_000);
    expect(out.rateLimit?.inputTokensResetMs).toBeLessThanOrEqual(30_000);
  });

  it('turns an overloaded_error event after HTTP 200 into a retryable overloaded error', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/error_after_200.sse') });
    const error = await failure();
    expect(error.code).toBe('overloaded');
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/^main\/model-x, key main:ab12: error event after HTTP 200 \(as 529\) overloaded_error: Overloaded/);
  });

  it('reads a stream without message_stop as a truncated, retryable network error', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/truncated.sse') });
    const error = await failure();
    expect(error.code).toBe('network');
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/ended before message_stop/);
  });

  it('drops a tool call cut by max_tokens instead of failing on its partial JSON', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/max_tokens_in_tool.sse') });
    const out = await provider.call(makeRequest());
    expect(out.stopReason).toBe('max_tokens');
    expect(out.content).toEqual([{ type: 'text', text: 'Writing the file' }]);
  });

  it('reads a JSON reply to a streaming request (a proxy that does not stream)', async () => {
    server.respond({ status: 200, body: fixture('anthropic/message.json') });
    const out = await provider.call(makeRequest());
    expect(out.stopReason).toBe('tool_use');
  });
});

describe('anthropic non-streamed responses', () => {
  it('reads a JSON message with text and tool_use', async () => {
    server.respond({ status: 200, body: fixture('anthropic/message.json') });
    const out = await plain.call(makeRequest());
    expect(out).toEqual({
      content: [
        { type: 'text', text: "I'll look that up." },
        { type: 'tool_use', id: 'toolu_01A09q90qw90lq917835lq9', name: 'get_weather', input: { location: 'San Francisco, CA', unit: 'celsius' } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 2095, outputTokens: 503, cacheWriteTokens: 0, cacheReadTokens: 1800 },
      response: { id: 'msg_01Aq9w938a90dw8q', model: 'claude-sonnet-4-5' },
    });
  });

  it('reads a body that is not JSON as a retryable server error', async () => {
    server.respond({ status: 200, body: '<html>oops' });
    const error = await failure(plain);
    expect(error.code).toBe('server_error');
    expect(error.message).toMatch(/malformed response/);
  });
});

describe('anthropic error responses', () => {
  it.each([
    ['400_invalid_request_error', 400, 'bad_request', false],
    ['400_prompt_too_long', 400, 'context_overflow', false],
    ['400_spend_limit', 400, 'spend_cap', false],
    ['401_authentication_error', 401, 'auth', true],
    ['403_permission_error', 403, 'auth', true],
    ['404_not_found_error', 404, 'bad_request', false],
    ['413_request_too_large', 413, 'bad_request', false],
    ['429_rate_limit_error', 429, 'rate_limited', true],
    ['429_spend_limit', 429, 'spend_cap', false],
    ['500_api_error', 500, 'server_error', true],
    ['529_overloaded_error', 529, 'overloaded', true],
  ])('classifies %s', async (name, status, code, retryable) => {
    server.respond({ status, headers: { 'content-type': 'application/json', 'request-id': 'req_hdr' }, body: fixture(`anthropic/errors/${name}.json`) });
    const error = await failure();
    expect(error.code).toBe(code);
    expect(error.retryable).toBe(retryable);
    expect(error.status).toBe(status);
    expect(error.keyId).toBe('main:ab12');
    expect(error.message).toContain(`HTTP ${status}`);
    expect(error.message).toContain('main:ab12');
    expect(error.message).toMatch(/\[request req_/);
  });

  it('passes Retry-After and the error response rate-limit headers on a 429', async () => {
    server.respond({
      status: 429,
      headers: { 'content-type': 'application/json', 'retry-after': '12', 'anthropic-ratelimit-requests-remaining': '0' },
      body: fixture('anthropic/errors/429_rate_limit_error.json'),
    });
    const error = await failure();
    expect(error.code).toBe('rate_limited');
    expect(error.retryAfterMs).toBe(12_000);
    expect(error.rateLimit).toEqual({ requestsRemaining: 0 });
  });

  it('never leaks the key, even when the server echoes it in its error body', async () => {
    server.respond({
      status: 401,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key: {{KEY}}' } }),
    });
    const error = await failure();
    expect(error.code).toBe('auth');
    expect(error.message).toContain('[redacted]');
    expect(JSON.stringify(error)).not.toContain(SECRET);
    expect(JSON.stringify(error.toJSON())).not.toContain(SECRET);
    expect(String(error.stack)).not.toContain(SECRET);
  });
});
