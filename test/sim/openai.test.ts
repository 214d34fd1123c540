/**
 * The official OpenAI SDK against the simulator: chat completions, chunk streams with a usage
 * chunk, tool calls streamed by index, 429s, 401s, mid-stream cuts and automatic prompt caching.
 */
import OpenAI, { AuthenticationError, RateLimitError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { chatBody, manualClock, post, sseEvents } from './helpers.js';

const KEY = 'sk-proj-sim-test-key';
const LIMITED = 'sk-proj-sim-limited';
const clock = manualClock();
let sim: SimServer;
let client: OpenAI;

const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'count', parameters: { type: 'object', properties: { n: { type: 'integer', minimum: 2 }, tags: { type: 'array', items: { type: 'string' }, minItems: 1 } }, required: ['n', 'tags'] } } },
];

beforeAll(async () => {
  sim = await startSim({ seed: 5, keys: { [KEY]: {}, [LIMITED]: { rpm: 60, itpm: 100_000, burst: { rpm: 60 } } }, now: clock.now });
  client = new OpenAI({ apiKey: KEY, baseURL: `${sim.url}/v1`, maxRetries: 0 });
});
afterAll(() => sim.close());

describe('the OpenAI SDK against the simulator', () => {
  it('gets a valid chat.completion', async () => {
    const completion = await client.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }] });
    expect(completion.object).toBe('chat.completion');
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.choices).toHaveLength(1);
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('stop');
    expect(choice.message.role).toBe('assistant');
    expect(choice.message.content?.length).toBeGreaterThan(0);
    expect(completion.usage).toMatchObject({ prompt_tokens: expect.any(Number), prompt_tokens_details: { cached_tokens: 0 } });
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
  });

  it('streams chunks with a final usage chunk and [DONE], assembling the same text as the plain call', async () => {
    const request = { model: 'gpt-sim', messages: [{ role: 'user' as const, content: 'Stream it' }] };
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const usageChunk = chunks.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage?.completion_tokens).toBeGreaterThan(0);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    const plain = await client.chat.completions.create(request);
    expect(text).toBe(plain.choices[0]!.message.content);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('stop');

    const raw = await post(`${sim.url}/v1/chat/completions`, { ...request, stream: true }, { bearer: KEY });
    const events = sseEvents(raw.text);
    expect(events.at(-1)!.data).toBe('[DONE]');
    // Without include_usage there is no usage chunk.
    expect(events.some((e) => typeof e.data === 'object' && e.data.usage)).toBe(false);
  });

  it('streams tool_calls by index with arguments in pieces, and answers the tool messages with text', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Do both. [[sim:tools]]' }];
    const runner = client.chat.completions.stream({ model: 'gpt-sim', tools, messages, stream_options: { include_usage: true } });
    const final = await runner.finalChatCompletion();
    const choice = final.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const calls = choice.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => c.function.name)).toEqual(['read_file', 'count']);
    expect(JSON.parse(calls[0]!.function.arguments)).toEqual({ path: 'sim' });
    expect(JSON.parse(calls[1]!.function.arguments)).toEqual({ n: 2, tags: ['sim'] });
    expect(calls.every((c) => c.id.startsWith('call_'))).toBe(true);

    const raw = await post(`${sim.url}/v1/chat/completions`, { model: 'gpt-sim', tools, messages, stream: true }, { bearer: KEY });
    const deltas = sseEvents(raw.text).flatMap((e) => (typeof e.data === 'object' ? (e.data.choices[0]?.delta.tool_calls ?? []) : []));
    expect(deltas.filter((d: { index: number }) => d.index === 1).length).toBeGreaterThan(1);

    const answer = await client.chat.completions.create({
      model: 'gpt-sim',
      tools,
      messages: [
        ...messages,
        choice.message,
        { role: 'tool', tool_call_id: calls[0]!.id, content: 'file body' },
        { role: 'tool', tool_call_id: calls[1]!.id, content: '2' },
      ],
    });
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    expect(answer.choices[0]!.message.content).toMatch(/^Received 2 tool results from read_file, count\./);
    expect(answer.choices[0]!.message.tool_calls).toBeUndefined();
  });

  it('gives the SDK a RateLimitError with status 429 and a retry-after header', async () => {
    const limited = new OpenAI({ apiKey: LIMITED, baseURL: `${sim.url}/v1`, maxRetries: 0 });
    // 25,000 tokens each: the first empties the one-second input bucket (1,667 tokens) into debt,
    // the next is refused for tokens. Different first characters: a shared prefix would be a cache
    // read, which the limit does not count.
    const big = (c: string) => c + 'x'.repeat(200_000);
    await limited.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'user', content: big('a') }] });
    await limited.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'user', content: big('b') }] }).catch(() => undefined);
    const error = await limited.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'user', content: big('c') }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    const e = error as RateLimitError;
    expect(e.status).toBe(429);
    expect(Number(e.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(e.type).toBe('tokens');
    expect(e.code).toBe('rate_limit_exceeded');
    expect(e.headers?.get('x-ratelimit-limit-tokens')).toBe('100000');
    expect(e.headers?.get('x-ratelimit-reset-tokens')).toMatch(/^(\d+m)?\d+(\.\d+)?s$/);
  });

  it('gives the SDK an AuthenticationError (401) for an unknown key', async () => {
    const stranger = new OpenAI({ apiKey: 'sk-proj-unknown', baseURL: `${sim.url}/v1`, maxRetries: 0 });
    const error = await stranger.chat.completions.create(chatBody('hi') as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect((error as AuthenticationError).status).toBe(401);
    expect((error as AuthenticationError).code).toBe('invalid_api_key');
  });

  it('refuses garbage and broken tool sequences with a 400 invalid_request_error', async () => {
    const url = `${sim.url}/v1/chat/completions`;
    const bodies = [
      '[]',
      '{"model":',
      { messages: [{ role: 'user', content: 'x' }] },
      { model: 'gpt-sim', messages: [] },
      { model: 'gpt-sim', messages: [{ role: 'wizard', content: 'x' }] },
      { model: 'gpt-sim', messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'call_x', content: 'r' }] },
      { model: 'gpt-sim', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'call_y', type: 'function', function: { name: 'f', arguments: '{}' } }] }] },
    ];
    for (const body of bodies) {
      const res = await post(url, body, { bearer: KEY });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.type).toBe('invalid_request_error');
    }
  });
});

describe('OpenAI mid-stream errors', () => {
  it('cuts the connection after HTTP 200 and some chunks; the SDK stream throws', async () => {
    const faulty = await startSim({ faults: { streamError: 1 } });
    try {
      const sdk = new OpenAI({ apiKey: 'any', baseURL: `${faulty.url}/v1`, maxRetries: 0 });
      const stream = await sdk.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'user', content: 'long [[sim:length 300]]' }], stream: true });
      const seen: string[] = [];
      const error = await (async () => {
        for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? '');
      })().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(seen.join('').length).toBeGreaterThan(0);
      expect(seen.join('').length).toBeLessThan(1200);
      expect(faulty.stats().log).toMatchObject([{ status: 200, fault: 'streamError', stream: true }]);
    } finally {
      await faulty.close();
    }
  });
});

describe('OpenAI automatic prompt caching', () => {
  it('caches prompts of 1024+ tokens in 128-token steps; short prompts never', async () => {
    const cached = await startSim({ now: clock.now });
    try {
      const sdk = new OpenAI({ apiKey: 'any', baseURL: `${cached.url}/v1`, maxRetries: 0 });
      const system = 'Rules. '.repeat(1000); // ~1750 tokens
      const ask = (q: string) => sdk.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'system', content: system }, { role: 'user', content: q }] });
      const first = await ask('first question');
      expect(first.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
      const second = await ask('a different question');
      const cachedTokens = second.usage!.prompt_tokens_details!.cached_tokens!;
      expect(cachedTokens).toBeGreaterThanOrEqual(1024);
      expect(cachedTokens % 128).toBe(0);
      expect(cachedTokens).toBeLessThanOrEqual(second.usage!.prompt_tokens);

      const short = () => sdk.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'user', content: 'tiny' }] });
      await short();
      expect((await short()).usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    } finally {
      await cached.close();
    }
  });
});
