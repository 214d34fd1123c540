import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/providers/errors.js';
import { createOpenAIProvider, openAIUsage } from '../../src/providers/openai.js';
import type { Provider } from '../../src/providers/types.js';
import { fixture, makeRequest, SECRET, SSE, startServer, type TestServer } from './server.js';

let server: TestServer;
let provider: Provider;
let plain: Provider;

beforeAll(async () => {
  server = await startServer();
  provider = createOpenAIProvider({ baseURL: `${server.url}/v1/`, organization: 'org-test' });
  plain = createOpenAIProvider({ baseURL: `${server.url}/v1`, stream: false, maxTokensField: 'max_tokens' });
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

describe('openai request', () => {
  it('sends the key as a Bearer token only, with the organization header', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/text.sse') });
    await provider.call(makeRequest());
    const req = lastRequest();
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/v1/chat/completions');
    expect(req.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(req.headers['openai-organization']).toBe('org-test');
    expect(req.headers['x-api-key']).toBeUndefined();
    expect(JSON.stringify(req.body)).not.toContain(SECRET);
  });

  it('maps system, tool_use to tool_calls, tool_result to tool messages, and tools to functions', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/text.sse') });
    await provider.call(makeRequest());
    const body = lastRequest().body;
    expect(body).toMatchObject({ model: 'model-x', max_completion_tokens: 1024, stream: true, stream_options: { include_usage: true } });
    expect(body.max_tokens).toBeUndefined();
    expect(body.messages).toEqual([
      { role: 'system', content: 'You are a careful worker.' },
      { role: 'user', content: 'The shared brief: summarize the repo.' },
      {
        role: 'assistant',
        content: 'Reading it.',
        tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"README.md"}' } }],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'Error: not found' },
      { role: 'user', content: 'Go on.' },
    ]);
    expect(body.tools).toEqual([
      {
        type: 'function',
        function: { name: 'read_file', description: 'Reads a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
      },
      { type: 'function', function: { name: 'list_files', parameters: { type: 'object', properties: {} } } },
    ]);
    expect(JSON.stringify(body)).not.toContain('cache_control');
  });

  it('sends an assistant turn that is only tool calls with null content, and max_tokens when asked', async () => {
    server.respond({ status: 200, body: fixture('openai/completion.json') });
    await plain.call(
      makeRequest({
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'hi' }] },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'list_files', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', toolUseId: 'c1', content: 'a.txt' }] },
        ],
      }),
    );
    const body = lastRequest().body;
    expect(body.max_tokens).toBe(1024);
    expect(body.max_completion_tokens).toBeUndefined();
    expect(body.stream).toBeUndefined();
    expect(body.messages).toEqual([
      { role: 'system', content: 'You are a careful worker.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'list_files', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
    ]);
  });
});

describe('openai streamed responses', () => {
  it('assembles streamed text and splits cached prompt tokens out of the input', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/text.sse'), chunkSize: 11 });
    const out = await provider.call(makeRequest());
    expect(out.content).toEqual([{ type: 'text', text: 'Hello, world! Ça va? 日本語' }]);
    expect(out.stopReason).toBe('end_turn');
    expect(out.usage).toEqual({ inputTokens: 176, outputTokens: 12, cacheWriteTokens: 0, cacheReadTokens: 1024 });
    expect(out.usage.inputTokens + out.usage.cacheReadTokens).toBe(1200);
  });

  it('merges interleaved tool_calls deltas by index', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/tool_calls.sse'), chunkSize: 3 });
    const out = await provider.call(makeRequest());
    expect(out.content).toEqual([
      { type: 'tool_use', id: 'call_DdmO9pD3xa9XTPNJ32zg2hcA', name: 'get_weather', input: { location: 'São Paulo, BR', unit: 'celsius' } },
      { type: 'tool_use', id: 'call_ABCDEF123', name: 'read_file', input: { path: 'README.md' } },
    ]);
    expect(out.stopReason).toBe('tool_use');
    expect(out.usage).toEqual({ inputTokens: 82, outputTokens: 40, cacheWriteTokens: 0, cacheReadTokens: 0 });
  });

  it('returns the x-ratelimit headers of a successful response', async () => {
    server.respond({
      status: 200,
      headers: { ...SSE, 'x-ratelimit-remaining-requests': '499', 'x-ratelimit-reset-requests': '120ms', 'x-ratelimit-remaining-tokens': '29000', 'x-ratelimit-reset-tokens': '6m0s' },
      body: fixture('openai/text.sse'),
    });
    const out = await provider.call(makeRequest());
    expect(out.rateLimit).toEqual({ requestsRemaining: 499, requestsResetMs: 120, inputTokensRemaining: 29_000, inputTokensResetMs: 360_000 });
  });

  it('turns an error chunk after HTTP 200 into a classified error', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/error_in_stream.sse') });
    const error = await failure();
    expect(error.code).toBe('server_error');
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/error event after HTTP 200/);
  });

  it('reads a stream without [DONE], finish_reason or usage as a truncated network error', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/truncated.sse') });
    const error = await failure();
    expect(error.code).toBe('network');
    expect(error.message).toMatch(/ended before data: \[DONE\]/);
  });

  it('accepts a stream that ends after finish_reason and usage without [DONE]', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('openai/text.sse').replace('data: [DONE]\n\n', '') });
    const out = await provider.call(makeRequest());
    expect(out.stopReason).toBe('end_turn');
  });

  it('estimates usage when a compatible server sends none', async () => {
    const body = fixture('openai/text.sse')
      .split('\n\n')
      .filter((event) => !event.includes('"usage":{'))
      .join('\n\n');
    server.respond({ status: 200, headers: SSE, body });
    const out = await provider.call(makeRequest());
    expect(out.usage.inputTokens).toBeGreaterThan(0);
    expect(out.usage.outputTokens).toBeGreaterThan(0);
  });
});

describe('openai non-streamed responses', () => {
  it('reads a JSON completion with tool calls and cached tokens', async () => {
    server.respond({ status: 200, body: fixture('openai/completion.json') });
    const out = await plain.call(makeRequest());
    expect(out).toEqual({
      content: [{ type: 'tool_use', id: 'call_abc123', name: 'get_weather', input: { location: 'Boston, MA' } }],
      stopReason: 'tool_use',
      usage: { inputTokens: 86, outputTokens: 18, cacheWriteTokens: 0, cacheReadTokens: 1920 },
      response: { id: 'chatcmpl-abc123', model: 'gpt-4o-2024-08-06' },
    });
  });

  it('maps finish reasons', async () => {
    const completion = (finish: string, message: Record<string, unknown>) =>
      JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }], usage: { prompt_tokens: 1, completion_tokens: 1 } });
    const cases: [string, Record<string, unknown>, string][] = [
      ['stop', { content: 'ok' }, 'end_turn'],
      ['length', { content: 'partial' }, 'max_tokens'],
      ['content_filter', { content: '' }, 'refusal'],
      ['stop', { content: null, refusal: 'I cannot help with that.' }, 'refusal'],
      ['weird', { content: 'x' }, 'other'],
    ];
    for (const [finish, message, expected] of cases) {
      server.respond({ status: 200, body: completion(finish, message) });
      expect((await plain.call(makeRequest())).stopReason).toBe(expected);
    }
  });

  it('reads usage with cached tokens as disjoint input and cache-read counts', () => {
    expect(openAIUsage({ prompt_tokens: 100, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 60 } })).toEqual({
      inputTokens: 40,
      outputTokens: 5,
      cacheWriteTokens: 0,
      cacheReadTokens: 60,
    });
    expect(openAIUsage(null)).toBeUndefined();
  });
});

describe('openai error responses', () => {
  it.each([
    ['400_invalid_request_error', 400, 'bad_request', false],
    ['400_context_length_exceeded', 400, 'context_overflow', false],
    ['401_invalid_api_key', 401, 'auth', true],
    ['403_unsupported_region', 403, 'auth', true],
    ['404_model_not_found', 404, 'bad_request', false],
    ['429_rate_limit_exceeded', 429, 'rate_limited', true],
    ['429_insufficient_quota', 429, 'spend_cap', false],
    ['500_server_error', 500, 'server_error', true],
    ['503_overloaded', 503, 'server_error', true],
  ])('classifies %s', async (name, status, code, retryable) => {
    server.respond({ status, headers: { 'content-type': 'application/json', 'x-request-id': 'req_oa' }, body: fixture(`openai/errors/${name}.json`) });
    const error = await failure();
    expect(error.code).toBe(code);
    expect(error.retryable).toBe(retryable);
    expect(error.status).toBe(status);
    expect(error.message).toContain(`HTTP ${status}`);
    expect(error.message).toContain('key main:ab12');
    expect(error.message).toContain('[request req_oa]');
  });

  it('takes the wait from "try again in" on a 429 without Retry-After', async () => {
    server.respond({ status: 429, body: fixture('openai/errors/429_rate_limit_exceeded.json') });
    expect((await failure()).retryAfterMs).toBe(210);
    server.respond({ status: 429, headers: { 'retry-after-ms': '1500', 'x-ratelimit-remaining-tokens': '0' }, body: fixture('openai/errors/429_rate_limit_exceeded.json') });
    const error = await failure();
    expect(error.retryAfterMs).toBe(1500);
    expect(error.rateLimit).toEqual({ inputTokensRemaining: 0 });
  });

  it('never leaks the key when the server echoes it in a 401 body', async () => {
    server.respond({ status: 401, body: fixture('openai/errors/401_invalid_api_key.json') });
    const error = await failure();
    expect(error.code).toBe('auth');
    expect(error.message).toContain('Incorrect API key provided: [redacted]');
    expect(error.message).toContain('The key main:ab12 was rejected (401): it will not be used again in this run.');
    expect(JSON.stringify(error.toJSON())).not.toContain(SECRET);
    expect(String(error.stack)).not.toContain(SECRET);
  });

  it('never leaks the key echoed in an error event after HTTP 200', async () => {
    server.respond({ status: 200, headers: SSE, body: 'data: {"error":{"message":"bad key {{KEY}}","type":"invalid_request_error","code":"invalid_api_key"}}\n\n' });
    const error = await failure();
    expect(error.message).not.toContain(SECRET);
    expect(error.message).toContain('[redacted]');
  });
});
