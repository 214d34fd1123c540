/**
 * The AI SDK adapter against the AI SDK's own mock model (MockLanguageModelV3 from `ai/test`):
 * what it sends (prompt, tools, limits, structured output), what it reads back (text, tool
 * calls, finish reasons, usage with cache tokens) and how each error class maps to ours.
 */
import { APICallError } from '@ai-sdk/provider';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { createAiSdkProvider } from '../../src/providers/aisdk.js';
import { ProviderError } from '../../src/providers/errors.js';
import { makeRequest, SECRET } from './server.js';

type Generate = ConstructorParameters<typeof MockLanguageModelV3>[0] extends infer O ? (O extends { doGenerate?: infer G } ? Exclude<G, unknown[]> : never) : never;

const usage = (input: number, output: number, cacheRead?: number, cacheWrite?: number) => ({
  inputTokens: { total: input, noCache: input - (cacheRead ?? 0) - (cacheWrite ?? 0), cacheRead, cacheWrite },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

function model(doGenerate: Generate) {
  return new MockLanguageModelV3({ provider: 'mock', modelId: 'mock-1', doGenerate });
}

async function failure(doGenerate: Generate, request = makeRequest()): Promise<ProviderError> {
  const error = await createAiSdkProvider(model(doGenerate), { now: () => 1_000_000 }).call(request).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

const apiError = (statusCode: number | undefined, body: string, headers: Record<string, string> = {}, cause?: unknown) =>
  new APICallError({
    message: `call failed (${statusCode ?? 'no status'})`,
    url: 'https://api.example.test/v1/chat',
    requestBodyValues: {},
    ...(statusCode !== undefined ? { statusCode } : {}),
    responseHeaders: headers,
    responseBody: body,
    ...(cause ? { cause } : {}),
  });

describe('AI SDK adapter: requests', () => {
  it('sends system, the conversation with tool results as a tool message, tools, maxTokens and the structured output schema', async () => {
    const m = model({ content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(10, 2), warnings: [] });
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
    await createAiSdkProvider(m).call(makeRequest({ output: { name: 'answer', schema } }));
    const sent = m.doGenerateCalls[0]!;
    expect(sent.maxOutputTokens).toBe(makeRequest().maxTokens);
    expect(sent.prompt[0]).toEqual({ role: 'system', content: 'You are a careful worker.', providerOptions: { anthropic: { cacheControl: { type: 'ephemeral' } } } });
    expect(sent.prompt.map((p) => p.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(sent.prompt[2]!.content).toEqual([
      { type: 'text', text: 'Reading it.' },
      { type: 'tool-call', toolCallId: 'toolu_1', toolName: 'read_file', input: { path: 'README.md' } },
    ]);
    expect(sent.prompt[3]!.content).toEqual([
      { type: 'tool-result', toolCallId: 'toolu_1', toolName: 'read_file', output: { type: 'error-text', value: 'not found' } },
    ]);
    expect(sent.prompt[4]!.content).toEqual([{ type: 'text', text: 'Go on.' }]);
    expect(sent.tools?.map((t) => t.name)).toEqual(makeRequest().tools.map((t) => t.name));
    expect(sent.tools?.[0]).toMatchObject({ type: 'function', inputSchema: makeRequest().tools[0]!.inputSchema });
    expect(sent.responseFormat).toEqual({ type: 'json', schema, name: 'answer' });
    expect(sent.abortSignal).toBeInstanceOf(AbortSignal);
    expect(sent.headers?.['x-swarmstate-call']).toBeDefined();
  });

  it('takes the model from an AI SDK provider by the plan model id, once per model and key', async () => {
    const asked: string[] = [];
    const source = {
      languageModel: (id: string) => {
        asked.push(id);
        return model({ content: [{ type: 'text', text: id }], finishReason: { unified: 'stop', raw: undefined }, usage: usage(1, 1), warnings: [] });
      },
    };
    const p = createAiSdkProvider(source);
    const a = await p.call(makeRequest({ model: 'gemini-x' }));
    await p.call(makeRequest({ model: 'gemini-x' }));
    const b = await p.call(makeRequest({ model: 'gemini-y' }));
    expect(a.content).toEqual([{ type: 'text', text: 'gemini-x' }]);
    expect(b.content).toEqual([{ type: 'text', text: 'gemini-y' }]);
    expect(asked).toEqual(['gemini-x', 'gemini-y']);
  });
});

describe('AI SDK adapter: responses', () => {
  it('reads text and tool calls (input as JSON text) and stops for tool use', async () => {
    const out = await createAiSdkProvider(
      model({
        content: [
          { type: 'reasoning', text: 'thinking' },
          { type: 'text', text: 'Let me look.' },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'read_file', input: '{"path":"a.md"}' },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'search', input: '' },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_use' },
        usage: usage(100, 20),
        warnings: [],
      }),
    ).call(makeRequest());
    expect(out.stopReason).toBe('tool_use');
    expect(out.content).toEqual([
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'c1', name: 'read_file', input: { path: 'a.md' } },
      { type: 'tool_use', id: 'c2', name: 'search', input: {} },
    ]);
  });

  it('maps finish reasons: length -> max_tokens, content-filter -> refusal', async () => {
    const finish = async (unified: 'length' | 'content-filter' | 'other') =>
      (await createAiSdkProvider(model({ content: [{ type: 'text', text: 'x' }], finishReason: { unified, raw: undefined }, usage: usage(1, 1), warnings: [] })).call(makeRequest())).stopReason;
    expect(await finish('length')).toBe('max_tokens');
    expect(await finish('content-filter')).toBe('refusal');
    expect(await finish('other')).toBe('other');
  });

  it('reports usage as a disjoint split with cache reads and writes', async () => {
    const out = await createAiSdkProvider(
      model({ content: [{ type: 'text', text: 'x' }], finishReason: { unified: 'stop', raw: undefined }, usage: usage(1000, 50, 600, 300), warnings: [] }),
    ).call(makeRequest());
    expect(out.usage).toEqual({ inputTokens: 100, outputTokens: 50, cacheReadTokens: 600, cacheWriteTokens: 300 });
  });

  it('reads rate-limit headers of the response for the key', async () => {
    const out = await createAiSdkProvider(
      model({
        content: [{ type: 'text', text: 'x' }],
        finishReason: { unified: 'stop', raw: undefined },
        usage: usage(1, 1),
        warnings: [],
        response: { headers: { 'anthropic-ratelimit-requests-limit': '50', 'anthropic-ratelimit-requests-remaining': '49' } },
      }),
    ).call(makeRequest());
    expect(out.rateLimit).toMatchObject({ requestsLimit: 50, requestsRemaining: 49 });
  });

  it('calls onResponseStart once the model answered, and not when it failed', async () => {
    let started = 0;
    await createAiSdkProvider(model({ content: [], finishReason: { unified: 'stop', raw: undefined }, usage: usage(1, 1), warnings: [] })).call(
      makeRequest({ onResponseStart: () => started++ }),
    );
    await failure(async () => {
      throw apiError(500, '{}');
    }, makeRequest({ onResponseStart: () => started++ }));
    expect(started).toBe(1);
  });
});

describe('AI SDK adapter: errors', () => {
  it('429 with Retry-After -> rate_limited with retryAfterMs', async () => {
    const e = await failure(async () => {
      throw apiError(429, '{"error":{"type":"rate_limit_error","message":"slow down"}}', { 'retry-after': '7' });
    });
    expect(e).toMatchObject({ code: 'rate_limited', retryable: true, retryAfterMs: 7000, status: 429, provider: 'main', model: 'model-x' });
  });

  it('529 -> overloaded; 503 and 500 -> server_error (as our own adapters)', async () => {
    expect((await failure(async () => { throw apiError(529, '{"error":{"type":"overloaded_error","message":"busy"}}'); })).code).toBe('overloaded');
    expect((await failure(async () => { throw apiError(503, 'unavailable'); })).code).toBe('server_error');
    expect((await failure(async () => { throw apiError(500, '{}'); })).code).toBe('server_error');
  });

  it('401 / 403 -> auth', async () => {
    expect((await failure(async () => { throw apiError(401, '{"error":{"message":"invalid x-api-key"}}'); })).code).toBe('auth');
    expect((await failure(async () => { throw apiError(403, 'forbidden'); })).code).toBe('auth');
  });

  it('a context-length 400 -> context_overflow, not retried; other 400s bad_request', async () => {
    const e = await failure(async () => {
      throw apiError(400, '{"error":{"code":"context_length_exceeded","message":"This model\'s maximum context length is 8192 tokens"}}');
    });
    expect(e).toMatchObject({ code: 'context_overflow', retryable: false });
    expect((await failure(async () => { throw apiError(400, '{"error":{"message":"bad field"}}'); })).code).toBe('bad_request');
  });

  it('a failed connection (no status, ECONNREFUSED in the cause) -> network', async () => {
    const cause = Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }) });
    const e = await failure(async () => {
      throw apiError(undefined, '', {}, cause);
    });
    expect(e).toMatchObject({ code: 'network', retryable: true });
  });

  it('the call aborted -> cancelled', async () => {
    const controller = new AbortController();
    controller.abort();
    const e = await failure(async () => {
      throw Object.assign(new Error('This operation was aborted'), { name: 'AbortError' });
    }, makeRequest({ signal: controller.signal }));
    expect(e.code).toBe('cancelled');
  });

  it('never lets the key secret through an error message', async () => {
    const e = await failure(async () => {
      throw apiError(401, `{"error":{"message":"bad key ${SECRET}"}}`);
    });
    expect(e.message).not.toContain(SECRET);
    expect(JSON.stringify(e)).not.toContain(SECRET);
  });

  it('a tool call whose input is not JSON is a malformed response (retried)', async () => {
    const e = await failure(async () => ({
      content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'read_file', input: '{"path":' }],
      finishReason: { unified: 'tool-calls', raw: undefined },
      usage: usage(1, 1),
      warnings: [],
    }));
    expect(e).toMatchObject({ code: 'server_error', retryable: true });
  });
});

describe('AI SDK adapter: a result that is not a result', () => {
  const malformed: { name: string; result: unknown; says: RegExp }[] = [
    { name: 'content a string', result: { content: 'hello', finishReason: { unified: 'stop', raw: undefined }, usage: usage(1, 1), warnings: [] }, says: /the model's result has no content array \(content is "hello"\)/ },
    { name: 'an empty object', result: {}, says: /the model's result has no content array \(content is undefined\)/ },
    { name: 'a number', result: 42, says: /the model's result is 42, not an object/ },
    { name: 'a content part that is not an object', result: { content: [7], finishReason: 'stop', usage: usage(1, 1) }, says: /content\[0\] is 7, not a part/ },
    { name: 'a text part without text', result: { content: [{ type: 'text' }], finishReason: 'stop', usage: usage(1, 1) }, says: /content\[0\]\.text is undefined, not a string/ },
  ];
  for (const c of malformed) {
    it(`${c.name}: a malformed response (server_error, retried), not an empty answer`, async () => {
      const e = await failure(async () => c.result as never);
      expect(e).toMatchObject({ code: 'server_error', retryable: true, provider: 'main', model: 'model-x' });
      expect(e.message).toMatch(/^main\/model-x, key main:[0-9a-f]+: malformed response: /);
      expect(e.message).toMatch(c.says);
    });
  }

  const counts: { name: string; usage: unknown; says: RegExp }[] = [
    { name: 'a negative input total (V3)', usage: { inputTokens: { total: -50 }, outputTokens: { total: 5 } }, says: /usage\.inputTokens\.total is -50, below 0/ },
    { name: 'a negative output total (V3)', usage: { inputTokens: { total: 5 }, outputTokens: { total: -1 } }, says: /usage\.outputTokens\.total is -1, below 0/ },
    { name: 'a negative cache read (V3)', usage: { inputTokens: { total: 10, cacheRead: -3 }, outputTokens: { total: 1 } }, says: /usage\.inputTokens\.cacheRead is -3, below 0/ },
    { name: 'NaN output (V2)', usage: { inputTokens: 3, outputTokens: Number.NaN }, says: /usage\.outputTokens is NaN, not a token count/ },
    { name: 'a string count (V2)', usage: { inputTokens: '3', outputTokens: 1 }, says: /usage\.inputTokens is "3", not a token count/ },
    { name: '1e300 input (V3)', usage: { inputTokens: { total: 1e300 }, outputTokens: { total: 1 } }, says: /usage\.inputTokens\.total is 1e\+300, above 10000000/ },
    { name: 'cache counts above the total (V3)', usage: { inputTokens: { total: 10, cacheRead: 8, cacheWrite: 8 }, outputTokens: { total: 1 } }, says: /usage\.inputTokens: cache reads \(8\) and writes \(8\) pass the total \(10\)/ },
  ];
  for (const c of counts) {
    it(`${c.name}: a malformed response, the count not kept`, async () => {
      const e = await failure(async () => ({ content: [{ type: 'text', text: 'x' }], finishReason: { unified: 'stop', raw: undefined }, usage: c.usage, warnings: [] }) as never);
      expect(e).toMatchObject({ code: 'server_error', retryable: true });
      expect(e.message).toMatch(c.says);
    });
  }

  it('counts the spec leaves undefined are 0 (a provider that reports none)', async () => {
    const out = await createAiSdkProvider(
      model({ content: [{ type: 'text', text: 'x' }], finishReason: { unified: 'stop', raw: undefined }, usage: { inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: undefined, text: undefined, reasoning: undefined } }, warnings: [] }),
    ).call(makeRequest());
    expect(out.usage).toEqual({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
  });

  it('a model that throws a plain object: its contents in the message (bounded), not [object Object]', async () => {
    const e = await failure(async () => {
      throw { reason: 'gateway closed', code: 17, padding: 'y'.repeat(2000) };
    });
    expect(e.code).toBe('internal');
    expect(e.message).toContain('{"reason":"gateway closed","code":17');
    expect(e.message).not.toContain('[object Object]');
    expect(e.message.length).toBeLessThan(700);
  });
});
