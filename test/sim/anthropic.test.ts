/**
 * The official Anthropic SDK against the simulator: messages, streams, tool calls, 429s, 401s,
 * mid-stream errors and prompt caching, over real HTTP on loopback.
 */
import Anthropic, { APIError, AuthenticationError, RateLimitError } from '@anthropic-ai/sdk';
import { countTokens } from '../../src/sim/tokenizer.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { manualClock, messagesBody, post, sseEvents } from './helpers.js';

const KEY = 'sk-ant-sim-test-key';
const LIMITED = 'sk-ant-sim-limited';
const clock = manualClock();
let sim: SimServer;
let client: Anthropic;

const tools: Anthropic.Tool[] = [
  {
    name: 'lookup',
    description: 'Look a word up',
    input_schema: { type: 'object', properties: { word: { type: 'string' }, limit: { type: 'integer', minimum: 1 } }, required: ['word', 'limit'] },
  },
];

beforeAll(async () => {
  sim = await startSim({ seed: 3, keys: { [KEY]: {}, [LIMITED]: { rpm: 1 } }, now: clock.now });
  client = new Anthropic({ apiKey: KEY, baseURL: sim.url, maxRetries: 0 });
});
afterAll(() => sim.close());

describe('the Anthropic SDK against the simulator', () => {
  it('gets a valid non-streaming message', async () => {
    const message = await client.messages.create({ model: 'claude-sim', max_tokens: 200, messages: [{ role: 'user', content: 'Say something.' }] });
    expect(message.type).toBe('message');
    expect(message.role).toBe('assistant');
    expect(message.id).toMatch(/^msg_/);
    expect(message.model).toBe('claude-sim');
    expect(message.stop_reason).toBe('end_turn');
    expect(message.content).toHaveLength(1);
    const block = message.content[0]!;
    expect(block.type === 'text' && block.text.length > 0).toBe(true);
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    expect(message.usage.output_tokens).toBe(countTokens((block as Anthropic.TextBlock).text));
  });

  it('streams message_start, content blocks, ping, message_delta and message_stop, and the SDK assembles the same text', async () => {
    const request = { model: 'claude-sim', max_tokens: 200, messages: [{ role: 'user' as const, content: 'Stream please.' }] };
    const types: string[] = [];
    const stream = await client.messages.create({ ...request, stream: true });
    for await (const event of stream) types.push(event.type);
    expect(types[0]).toBe('message_start');
    expect(types.slice(1, 2)).toEqual(['content_block_start']);
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(types.filter((t) => t === 'content_block_delta').length).toBeGreaterThan(0);

    const final = await client.messages.stream(request).finalMessage();
    const plain = await client.messages.create(request);
    expect(final.content).toEqual(plain.content);
    expect(final.usage.output_tokens).toBe(plain.usage.output_tokens);
    expect(final.stop_reason).toBe('end_turn');

    const raw = await post(`${sim.url}/v1/messages`, { ...request, stream: true }, { key: KEY });
    expect(raw.headers.get('content-type')).toMatch(/text\/event-stream/);
    expect(sseEvents(raw.text).some((e) => e.event === 'ping')).toBe(true);
  });

  it('runs a tool call round trip: tool_use on a directive, then text after the tool_result', async () => {
    const first = await client.messages.create({
      model: 'claude-sim',
      max_tokens: 300,
      tools,
      messages: [{ role: 'user', content: 'Find it. [[sim:tool lookup {"word":"swarm","limit":3}]]' }],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use.name).toBe('lookup');
    expect(use.input).toEqual({ word: 'swarm', limit: 3 });
    expect(use.id).toMatch(/^toolu_/);

    const second = await client.messages.create({
      model: 'claude-sim',
      max_tokens: 300,
      tools,
      messages: [
        { role: 'user', content: 'Find it. [[sim:tool lookup {"word":"swarm","limit":3}]]' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'swarm: a large group' }] },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    expect(second.content[0]).toMatchObject({ type: 'text' });
    expect((second.content[0] as Anthropic.TextBlock).text).toMatch(/^Received 1 tool result from lookup\./);
  });

  it('streams a tool call as input_json_delta pieces that assemble into the input', async () => {
    const final = await client.messages
      .stream({ model: 'claude-sim', max_tokens: 300, tools, messages: [{ role: 'user', content: 'Use it. [[sim:tools]]' }] })
      .finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    // Minimal arguments from the schema: required properties, minimum respected.
    expect(final.content).toEqual([expect.objectContaining({ type: 'tool_use', name: 'lookup', input: { word: 'sim', limit: 1 } })]);
  });

  it('gives the SDK a RateLimitError with status 429 and a retry-after header', async () => {
    const limited = new Anthropic({ apiKey: LIMITED, baseURL: sim.url, maxRetries: 0 });
    await limited.messages.create({ model: 'claude-sim', max_tokens: 50, messages: [{ role: 'user', content: 'one' }] });
    const error = await limited.messages.create({ model: 'claude-sim', max_tokens: 50, messages: [{ role: 'user', content: 'two' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    const e = error as RateLimitError;
    expect(e.status).toBe(429);
    expect(e.headers?.get('retry-after')).toBe('60');
    expect(e.headers?.get('anthropic-ratelimit-requests-remaining')).toBe('0');
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
  });

  it('gives the SDK an AuthenticationError (401) for an unknown key, without echoing the key', async () => {
    const stranger = new Anthropic({ apiKey: 'sk-ant-not-a-known-key', baseURL: sim.url, maxRetries: 0 });
    const error = await stranger.messages.create({ model: 'claude-sim', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect((error as AuthenticationError).status).toBe(401);
    expect((error as AuthenticationError).error).toMatchObject({ error: { type: 'authentication_error' } });
    expect(JSON.stringify((error as AuthenticationError).error)).not.toContain('sk-ant-not-a-known-key');
  });

  it('refuses garbage with a 400 invalid_request_error', async () => {
    const url = `${sim.url}/v1/messages`;
    for (const body of ['{not json', { max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, { model: 'm', max_tokens: 10, messages: [] }, { model: 'm', messages: [{ role: 'user', content: 'x' }] }]) {
      const res = await post(url, body, { key: KEY });
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    }
  });
});

describe('Anthropic mid-stream errors', () => {
  it('sends HTTP 200, some content, then an error event with overloaded_error, which the SDK throws', async () => {
    const faulty = await startSim({ faults: { streamError: 1 } });
    try {
      const raw = await post(`${faulty.url}/v1/messages`, messagesBody('a long answer [[sim:length 200]]', { stream: true }));
      expect(raw.status).toBe(200);
      const events = sseEvents(raw.text);
      expect(events.some((e) => e.event === 'content_block_delta')).toBe(true);
      expect(events.at(-1)).toEqual({ event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } });
      expect(events.some((e) => e.event === 'message_stop')).toBe(false);

      const sdk = new Anthropic({ apiKey: 'any', baseURL: faulty.url, maxRetries: 0 });
      const error = await sdk.messages.stream(messagesBody('again [[sim:length 200]]') as never).finalMessage().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).error).toMatchObject({ error: { type: 'overloaded_error' } });
      expect(faulty.stats().log.map((l) => l.fault)).toEqual(['streamError', 'streamError']);
    } finally {
      await faulty.close();
    }
  });
});

describe('Anthropic prompt caching', () => {
  const system = (text: string) => [{ type: 'text' as const, text, cache_control: { type: 'ephemeral' as const } }];
  const body = (text: string, prompt = 'Go.') => ({ model: 'claude-sim', max_tokens: 50, system: system(text), messages: [{ role: 'user' as const, content: prompt }] });
  const longText = (tag: string) => `${tag} `.repeat(1200); // over the 1024-token minimum

  it('reads the cache on a second identical request and reports creation then read tokens', async () => {
    const cached = await startSim({ now: clock.now });
    try {
      const sdk = new Anthropic({ apiKey: 'any', baseURL: cached.url, maxRetries: 0 });
      const first = await sdk.messages.create(body(longText('alpha')));
      const second = await sdk.messages.create(body(longText('alpha')));
      const prefix = countTokens(longText('alpha'));
      expect(first.usage).toMatchObject({ cache_creation_input_tokens: prefix, cache_read_input_tokens: 0 });
      expect(second.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: prefix });
      // The uncached rest (the user message) is billed as input either way.
      expect(second.usage.input_tokens).toBe(first.usage.input_tokens);
      expect(cached.stats().cache).toEqual({ readRequests: 1, writeRequests: 1, readTokens: prefix, writeTokens: prefix });
    } finally {
      await cached.close();
    }
  });

  it('does not let a concurrent request read an entry whose writer has not started answering', async () => {
    const cached = await startSim({ latency: { ttftMs: 150 }, now: clock.now });
    try {
      const sdk = new Anthropic({ apiKey: 'any', baseURL: cached.url, maxRetries: 0 });
      const [a, b] = await Promise.all([sdk.messages.create(body(longText('beta'))), sdk.messages.create(body(longText('beta')))]);
      expect(a.usage.cache_read_input_tokens).toBe(0);
      expect(b.usage.cache_read_input_tokens).toBe(0);
      expect(a.usage.cache_creation_input_tokens).toBeGreaterThan(0);
      expect(b.usage.cache_creation_input_tokens).toBeGreaterThan(0);
      const c = await sdk.messages.create(body(longText('beta')));
      expect(c.usage.cache_read_input_tokens).toBe(a.usage.cache_creation_input_tokens);
    } finally {
      await cached.close();
    }
  });

  it('expires entries after cacheTtlMs, and a read refreshes the TTL', async () => {
    const time = manualClock();
    const cached = await startSim({ now: time.now, cacheTtlMs: 1000 });
    try {
      const url = `${cached.url}/v1/messages`;
      const read = async () => (await post(url, body(longText('gamma')))).json.usage.cache_read_input_tokens as number;
      expect(await read()).toBe(0);
      time.advance(900);
      expect(await read()).toBeGreaterThan(0); // refreshed: now lives until 1900
      time.advance(900);
      expect(await read()).toBeGreaterThan(0);
      time.advance(1001);
      expect(await read()).toBe(0);
    } finally {
      await cached.close();
    }
  });

  it('finds the previous turn’s prefix by lookback when the breakpoint moves to the end of a longer conversation', async () => {
    const cached = await startSim({ now: clock.now });
    try {
      const url = `${cached.url}/v1/messages`;
      const turn = (text: string) => ({ type: 'text', text, cache_control: { type: 'ephemeral' } });
      const history = [{ role: 'user', content: [turn(longText('delta'))] }];
      const first = (await post(url, { model: 'claude-sim', max_tokens: 50, messages: history })).json;
      const longer = [
        { role: 'user', content: [{ type: 'text', text: longText('delta') }] },
        { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
        { role: 'user', content: [turn('and then?')] },
      ];
      const second = (await post(url, { model: 'claude-sim', max_tokens: 50, messages: longer })).json;
      expect(second.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
      expect(second.usage.cache_creation_input_tokens).toBeGreaterThan(0);
      expect(second.usage.input_tokens).toBe(0);
    } finally {
      await cached.close();
    }
  });

  it('refuses more than 4 cache_control breakpoints', async () => {
    const res = await post(`${sim.url}/v1/messages`, { model: 'claude-sim', max_tokens: 50, system: [1, 2, 3, 4, 5].map((i) => system(`s${i}`)[0]), messages: [{ role: 'user', content: 'x' }] }, { key: KEY });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(/maximum of 4 blocks with cache_control/);
  });
});

describe('Anthropic minimum cacheable length', () => {
  it('does not cache a prefix shorter than minCacheTokens, and says so with zero cache usage', async () => {
    const sim = await startSim({ minCacheTokens: 1024 });
    try {
      const sdk = new Anthropic({ apiKey: 'any', baseURL: sim.url, maxRetries: 0 });
      const short = {
        model: 'claude-sim',
        max_tokens: 20,
        system: [{ type: 'text' as const, text: 'short system prompt', cache_control: { type: 'ephemeral' as const } }],
        messages: [{ role: 'user' as const, content: 'Go.' }],
      };
      for (let i = 0; i < 2; i++) {
        const m = await sdk.messages.create(short);
        expect(m.usage.cache_creation_input_tokens ?? 0).toBe(0);
        expect(m.usage.cache_read_input_tokens ?? 0).toBe(0);
        expect(m.usage.input_tokens).toBeGreaterThan(0);
      }
    } finally {
      await sim.close();
    }
  });
});
