/**
 * What the simulator decides, over raw HTTP: deterministic replies, directives, rate-limit
 * buckets (time driven by options.now, no sleeps), injected faults, latency and stats.
 */
import { createHash } from 'node:crypto';
import { countTokens } from '../../src/sim/tokenizer.js';
import { describe, expect, it, vi } from 'vitest';
import type { SimOptions } from '../../src/sim/index.js';
import { minimalValue } from '../../src/sim/model.js';
import { formatDuration } from '../../src/sim/openai.js';
import { chatBody, chatUrl, manualClock, messagesBody, messagesUrl, post, sseEvents, useSims } from './helpers.js';

const sim = useSims();
const messages = messagesUrl;
const chat = chatUrl;
const textOf = (json: { content: { text?: string }[] }) => json.content.map((b) => b.text ?? '').join('');

describe('determinism', () => {
  it('gives the same reply for the same request and seed, whatever the arrival order, and another for another seed', async () => {
    const [a, b, c] = await Promise.all([sim({ seed: 11 }), sim({ seed: 11 }), sim({ seed: 12 })]);
    const first = messagesBody('What is a swarm?');
    const second = messagesBody('What is a DAG?');
    const a1 = await post(messages(a), first);
    const a2 = await post(messages(a), second);
    const [b2, b1] = await Promise.all([post(messages(b), second), post(messages(b), first)]);
    expect(textOf(a1.json)).toBe(textOf(b1.json));
    expect(textOf(a2.json)).toBe(textOf(b2.json));
    expect(a1.json.id).toBe(b1.json.id);
    expect(textOf(a1.json)).not.toBe(textOf(a2.json));
    const c1 = await post(messages(c), first);
    expect(textOf(c1.json)).not.toBe(textOf(a1.json));
  });

  it('streams the same text as the non-streaming answer', async () => {
    const s = await sim({ seed: 2 });
    const plain = await post(chat(s), chatBody('same text?'));
    const streamed = await post(chat(s), chatBody('same text?', { stream: true }));
    const text = sseEvents(streamed.text)
      .filter((e) => typeof e.data === 'object')
      .map((e) => e.data.choices[0]?.delta.content ?? '')
      .join('');
    expect(text).toBe(plain.json.choices[0].message.content);
  });
});

describe('directives', () => {
  it('[[sim:length N]] gives N output tokens, and max_tokens caps it with stop_reason max_tokens / finish_reason length', async () => {
    const s = await sim();
    const exact = await post(messages(s), messagesBody('[[sim:length 40]]', { max_tokens: 100 }));
    expect(exact.json.usage.output_tokens).toBe(40);
    expect(countTokens(textOf(exact.json))).toBe(40);
    expect(exact.json.stop_reason).toBe('end_turn');
    const capped = await post(messages(s), messagesBody('[[sim:length 400]]', { max_tokens: 25 }));
    expect(capped.json.stop_reason).toBe('max_tokens');
    expect(capped.json.usage.output_tokens).toBe(25);
    const openai = await post(chat(s), chatBody('[[sim:length 400]]', { max_completion_tokens: 30 }));
    expect(openai.json.choices[0].finish_reason).toBe('length');
    expect(openai.json.usage.completion_tokens).toBe(30);
  });

  it('[[sim:reply TEXT]] answers with exactly TEXT', async () => {
    const s = await sim();
    const res = await post(messages(s), messagesBody('please [[sim:reply The answer is 42.]]'));
    expect(textOf(res.json)).toBe('The answer is 42.');
  });

  it('[[sim:error CODE]] answers with that error in each protocol', async () => {
    const s = await sim();
    const cases: [string, number, string, number][] = [
      ['400', 400, 'invalid_request_error', 400],
      ['401', 401, 'authentication_error', 401],
      ['429', 429, 'rate_limit_error', 429],
      ['500', 500, 'api_error', 500],
      ['529', 529, 'overloaded_error', 503],
      ['context', 400, 'invalid_request_error', 400],
    ];
    for (const [code, status, type, openaiStatus] of cases) {
      const a = await post(messages(s), messagesBody(`[[sim:error ${code}]]`));
      expect(a.status, code).toBe(status);
      expect(a.json.error.type, code).toBe(type);
      const o = await post(chat(s), chatBody(`[[sim:error ${code}]]`));
      expect(o.status, code).toBe(openaiStatus);
    }
    const context = await post(chat(s), chatBody('[[sim:error context]]'));
    expect(context.json.error.code).toBe('context_length_exceeded');
    const anthropicContext = await post(messages(s), messagesBody('[[sim:error context]]'));
    expect(anthropicContext.json.error.message).toMatch(/^prompt is too long: \d+ tokens > 200000 maximum$/);
  });

  it('[[sim:error CODE TIMES]] fails only the first TIMES sightings of the same request, so a retry succeeds', async () => {
    const s = await sim();
    const body = messagesBody('flaky [[sim:error 529 2]]');
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await post(messages(s), body)).status);
    expect(statuses).toEqual([529, 529, 200]);
  });

  it('refuses unknown directives, tools that are not offered and malformed arguments with a 400', async () => {
    const s = await sim();
    const tools = [{ name: 'a', input_schema: { type: 'object' } }];
    for (const prompt of ['[[sim:dance]]', '[[sim:tool b]]', '[[sim:tool a {nope}]]', '[[sim:length many]]', '[[sim:error 418]]']) {
      const res = await post(messages(s), messagesBody(prompt, { tools }));
      expect(res.status, prompt).toBe(400);
      expect(res.json.error.message, prompt).toMatch(/^sim: /);
    }
  });

  it('honours tool_choice: any/required calls the first tool, none never calls one', async () => {
    const s = await sim();
    const tools = [{ name: 'first', input_schema: { type: 'object', properties: { q: { type: 'string', enum: ['x', 'y'] } }, required: ['q'] } }];
    const forced = await post(messages(s), messagesBody('hello', { tools, tool_choice: { type: 'any' } }));
    expect(forced.json.content).toEqual([expect.objectContaining({ type: 'tool_use', name: 'first', input: { q: 'x' } })]);
    const none = await post(messages(s), messagesBody('[[sim:tools]]', { tools, tool_choice: { type: 'none' } }));
    expect(none.json.stop_reason).toBe('end_turn');
  });

  it('makes minimal arguments from a schema', () => {
    expect(
      minimalValue(
        {
          type: 'object',
          required: ['s', 'n', 'b', 'arr', 'o', 'u', 'nullable'],
          properties: {
            s: { type: 'string', minLength: 5 },
            n: { type: 'number', exclusiveMinimum: 3 },
            b: { type: 'boolean' },
            arr: { type: 'array', items: { type: 'integer' }, minItems: 2 },
            o: { type: 'object', properties: { inner: { const: 7 } }, required: ['inner'] },
            u: { anyOf: [{ type: 'integer', default: 9 }, { type: 'string' }] },
            nullable: { type: ['null', 'string'] },
            optional: { type: 'string' },
          },
        },
        0,
      ),
    ).toEqual({ s: 'simxx', n: 4, b: false, arr: [0, 0], o: { inner: 7 }, u: 9, nullable: 'sim' });
  });
});

describe('rate limits', () => {
  it('rpm 3 is enforced over short intervals: a second request at once gets a 429, the headers report the minute', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-three': { rpm: 3 } }, now: clock.now });
    const send = () => post(messages(s), messagesBody('hi'), { key: 'sk-three' });
    const first = await send();
    expect(first.status).toBe(200);
    expect(first.headers.get('anthropic-ratelimit-requests-limit')).toBe('3');
    expect(first.headers.get('anthropic-ratelimit-requests-remaining')).toBe('2'); // the minute's bucket
    expect(first.headers.get('anthropic-ratelimit-requests-reset')).toBe(new Date(clock.now() + 20_000).toISOString().replace('.000Z', 'Z'));

    const limited = await send();
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('20'); // one request refills in 60 s / 3
    expect(limited.json).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    clock.advance(19_999);
    expect((await send()).status).toBe(429);
    clock.advance(1);
    expect((await send()).status).toBe(200);
    expect(s.stats().log.filter((l) => l.status === 429).map((l) => l.retryAfterMs)).toEqual([20_000, 1]);
  });

  it('rpm 0 (a key throttled to zero) refuses every request, on both protocols, with Retry-After 1 s, at any time', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-zero': { rpm: 0 } }, now: clock.now });
    for (let i = 0; i < 3; i++) {
      const anthropic = await post(messages(s), messagesBody('hi'), { key: 'sk-zero' });
      expect(anthropic.status).toBe(429);
      expect(anthropic.headers.get('retry-after')).toBe('1');
      expect(anthropic.json.error.message).toBe("This key's rate limit is 0 requests per minute: every request is refused.");
      expect(anthropic.headers.get('anthropic-ratelimit-requests-limit')).toBe('0');
      expect(anthropic.headers.get('anthropic-ratelimit-requests-remaining')).toBe('0');
      expect(anthropic.headers.get('anthropic-ratelimit-requests-reset')).toBe(new Date(clock.now() + 1_000).toISOString().replace('.000Z', 'Z'));
      const openai = await post(chat(s), chatBody('hi'), { bearer: 'sk-zero' });
      expect(openai.status).toBe(429);
      expect(openai.headers.get('x-ratelimit-reset-requests')).toBe('1s');
      clock.advance(60 * 60_000);
    }
    expect(s.stats().byStatus).toEqual({ '429': 6 });
  });

  it('a stated burst lets that many through at once; the next waits for the rate', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-burst': { rpm: 60, burst: { rpm: 3 } } }, now: clock.now });
    const send = () => post(messages(s), messagesBody('hi'), { key: 'sk-burst' });
    expect([(await send()).status, (await send()).status, (await send()).status]).toEqual([200, 200, 200]);
    const fourth = await send();
    expect(fourth.status).toBe(429);
    expect(fourth.headers.get('retry-after')).toBe('1');
    clock.advance(1_000);
    expect((await send()).status).toBe(200);
  });

  it('60 rpm sent all at once: 1 passes, the rest are refused; sent evenly at 1/s: all pass', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-60': { rpm: 60 } }, now: clock.now });
    const send = () => post(messages(s), messagesBody('hi'), { key: 'sk-60' });
    const burst = await Promise.all(Array.from({ length: 10 }, () => send()));
    expect(burst.filter((r) => r.status === 200)).toHaveLength(1);
    const even: number[] = [];
    for (let i = 0; i < 10; i++) {
      clock.advance(1_000);
      even.push((await send()).status);
    }
    expect(even.every((status) => status === 200)).toBe(true);
  });

  it('shares one key’s buckets across both protocols and reports OpenAI resets as durations', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-both': { rpm: 2, burst: { rpm: 2 } } }, now: clock.now });
    expect((await post(messages(s), messagesBody('a'), { key: 'sk-both' })).status).toBe(200);
    const second = await post(chat(s), chatBody('b'), { bearer: 'sk-both' });
    expect(second.headers.get('x-ratelimit-limit-requests')).toBe('2');
    expect(second.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(second.headers.get('x-ratelimit-reset-requests')).toBe('1m0s');
    const third = await post(chat(s), chatBody('c'), { bearer: 'sk-both' });
    expect(third.status).toBe(429);
    expect(third.json.error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    expect(third.headers.get('retry-after')).toBe('30');
  });

  it('charges max_tokens against otpm up front and gives back what the reply did not use', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-out': { otpm: 1000, burst: { otpm: 1000 } } }, now: clock.now });
    const send = (maxTokens: number, extra: Record<string, unknown> = {}) =>
      post(messages(s), messagesBody('[[sim:length 10]]', { max_tokens: maxTokens, ...extra }), { key: 'sk-out' });
    // A stream's headers leave before it ends: they show max_tokens held.
    const streamed = await send(600, { stream: true });
    expect(streamed.headers.get('anthropic-ratelimit-output-tokens-remaining')).toBe('400');
    // Settled at 10 used: 990 left. A plain answer's headers come after settling.
    const plain = await send(10);
    expect(plain.headers.get('anthropic-ratelimit-output-tokens-remaining')).toBe('980');
    const over = await send(1000);
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toBe('2'); // 20 tokens at 1000/min: 1.2 s, rounded up
    expect((await send(980)).status).toBe(200);
  });

  it('a request larger than the short-interval bucket needs it full and leaves it in debt', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-debt': { otpm: 6_000 } }, now: clock.now }); // bucket of 100 a second
    const send = (maxTokens: number) => post(messages(s), messagesBody('[[sim:length 1]]', { max_tokens: maxTokens }), { key: 'sk-debt' });
    expect((await send(500)).status).toBe(200); // full bucket: admitted, leaves 100 - 500 + 499 back = 99
    expect((await send(100)).status).toBe(429); // 99 < 100
    clock.advance(10);
    expect((await send(100)).status).toBe(200);
    expect((await send(6_001)).json.error.message).toMatch(/needs 6001 output tokens, more than this key's limit of 6000/);
  });

  it('counts input tokens (by its own tokenizer) less cache reads against itpm', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-in': { itpm: 4000, burst: { itpm: 4000 } } }, now: clock.now });
    const brief = 'The catalogue brief names every product line and its tone of voice. '.repeat(120);
    const briefTokens = countTokens(brief);
    expect(briefTokens).toBeGreaterThan(1024); // cacheable
    const system = [{ type: 'text', text: brief, cache_control: { type: 'ephemeral' } }];
    const send = () => post(messages(s), messagesBody('q', { system }), { key: 'sk-in' });
    expect((await send()).status).toBe(200); // written + a few uncached
    const read = await send(); // a cache read: only the few uncached tokens count
    expect(read.status).toBe(200);
    expect(read.json.usage.cache_read_input_tokens).toBe(briefTokens);
    const big = 'zebra quartz '.repeat(2_000);
    const tooBig = await post(messages(s), messagesBody(big), { key: 'sk-in' });
    expect(tooBig.status).toBe(429);
    expect(tooBig.json.error.message).toMatch(new RegExp(`needs ${countTokens(big) + 4} input tokens, more than this key's limit of 4000`));
  });

  it('headers: false says nothing about the limits (no rate-limit headers, no retry-after) and enforces them the same', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { 'sk-quiet': { rpm: 120, burst: { rpm: 2 } } }, now: clock.now, headers: false });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const anthropic = await post(messages(s), messagesBody('hi'), { key: 'sk-quiet' });
      statuses.push(anthropic.status);
      expect([...anthropic.headers.keys()].filter((h) => h.includes('ratelimit') || h === 'retry-after')).toEqual([]);
    }
    expect(statuses).toEqual([200, 200, 429]); // the burst of 2, then the bucket is empty
    const openai = await post(chat(s), chatBody('hi'), { bearer: 'sk-quiet' });
    expect(openai.status).toBe(429);
    expect([...openai.headers.keys()].filter((h) => h.includes('ratelimit') || h === 'retry-after')).toEqual([]);
    clock.advance(500); // one request refills at 120 rpm
    expect((await post(messages(s), messagesBody('hi'), { key: 'sk-quiet' })).status).toBe(200);
    expect(s.stats().log.filter((l) => l.status === 429).map((l) => l.retryAfterMs)).toEqual([undefined, undefined]);
    await expect(sim({ headers: 'no' as unknown as boolean })).rejects.toThrow('startSim: headers must be true or false, got no');
  });

  it('sends no rate-limit headers for keys without limits', async () => {
    const s = await sim();
    const res = await post(messages(s), messagesBody('hi'), { key: 'whatever' });
    expect([...res.headers.keys()].some((h) => h.includes('ratelimit'))).toBe(false);
  });
});

describe('faults', () => {
  it('http500 and http529 at rate 1 answer with each protocol’s error', async () => {
    const s500 = await sim({ faults: { http500: 1 } });
    const a = await post(messages(s500), messagesBody('x'));
    expect([a.status, a.json.error.type]).toEqual([500, 'api_error']);
    const o = await post(chat(s500), chatBody('x'));
    expect([o.status, o.json.error.type]).toEqual([500, 'server_error']);
    const s529 = await sim({ faults: { http529: 1 } });
    const b = await post(messages(s529), messagesBody('x'));
    expect([b.status, b.json.error.type]).toEqual([529, 'overloaded_error']);
    expect((await post(chat(s529), chatBody('x'))).status).toBe(503);
    expect(s529.stats().log.map((l) => l.fault)).toEqual(['http529', 'http529']);
  });

  it('reset at rate 1 destroys the connection before any answer', async () => {
    const s = await sim({ faults: { reset: 1 } });
    await expect(post(messages(s), messagesBody('x'))).rejects.toThrow();
    expect(s.stats().log).toMatchObject([{ status: 0, fault: 'reset' }]);
    expect(s.stats().byStatus).toEqual({ 0: 1 });
  });

  it('stall at rate 1 never answers: the client’s timeout fires, and close() does not wait for stallMs', async () => {
    const s = await sim({ faults: { stall: 1 }, stallMs: 60_000 });
    const started = Date.now();
    await expect(post(messages(s), messagesBody('x'), { signal: AbortSignal.timeout(100) })).rejects.toThrow();
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(s.stats().log).toMatchObject([{ status: 0, fault: 'stall' }]);
    await s.close();
  });

  it('a stall ends by cutting the connection after stallMs', async () => {
    const s = await sim({ faults: { stall: 1 }, stallMs: 50 });
    await expect(post(messages(s), messagesBody('x'))).rejects.toThrow();
  });

  it('streamError does not touch non-streaming requests', async () => {
    const s = await sim({ faults: { streamError: 1 } });
    expect((await post(messages(s), messagesBody('x'))).status).toBe(200);
  });

  it('decides faults from the request content and how often it was seen, not from arrival order or concurrency', async () => {
    const options: SimOptions = { seed: 9, faults: { http500: 0.3, http529: 0.2 } };
    const [a, b] = await Promise.all([sim(options), sim(options)]);
    const bodies = Array.from({ length: 12 }, (_, i) => messagesBody(`request ${i}`));
    const sequential = [];
    for (const body of bodies) sequential.push((await post(messages(a), body)).status);
    const concurrent = (await Promise.all([...bodies].reverse().map((body) => post(messages(b), body)))).map((r) => r.status).reverse();
    expect(concurrent).toEqual(sequential);
    expect(new Set(sequential).size).toBeGreaterThan(1);

    // Retrying the same request draws again: with 50% faults, some retry succeeds.
    const retries = [];
    for (let i = 0; i < 10; i++) retries.push((await post(messages(a), messagesBody('retry me'))).status);
    expect(retries).toContain(200);
    expect(retries.some((st) => st !== 200)).toBe(true);
  });
});

describe('latency', () => {
  it('waits ttft then paces output at tokensPerSecond, streamed or not', async () => {
    const s = await sim({ latency: { ttftMs: 60, tokensPerSecond: 1000 } });
    let started = Date.now();
    await post(messages(s), messagesBody('[[sim:length 100]]')); // 60 ms + 100 ms
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);

    started = Date.now();
    const answered = s.stats().requests; // counted once an answer is complete
    const res = await fetch(messages(s), { method: 'POST', body: JSON.stringify(messagesBody('[[sim:length 100]]', { stream: true })) });
    expect(res.status).toBe(200);
    const headersAt = Date.now() - started;
    const stillSending = s.stats().requests === answered;
    const text = await res.text();
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    // The response (headers, message_start) begins at the time to first token, while the output
    // is still being paced (seen in the server's count, not on the clock: a loaded machine is late).
    expect(headersAt).toBeGreaterThanOrEqual(55);
    expect(stillSending).toBe(true);
    expect(sseEvents(text).at(-1)!.event).toBe('message_stop');
  });
});

describe('fast streams', () => {
  it('hold deltas due less than a timer tick apart instead of a timer per delta, and send them all', async () => {
    const s = await sim({ latency: { ttftMs: 0, tokensPerSecond: 1_000_000 } });
    const timers = vi.spyOn(globalThis, 'setTimeout');
    try {
      const res = await post(messages(s), messagesBody('[[sim:length 200]]', { stream: true }));
      // 200 tokens at a million a second are due within 0.2 ms: no pacing timer at all (one per
      // ~5-token delta before, each waiting a whole millisecond).
      expect(timers.mock.calls.filter(([, ms]) => typeof ms === 'number' && ms < 1)).toEqual([]);
      const events = sseEvents(res.text);
      expect(events.filter((e) => e.event === 'content_block_delta').length).toBeGreaterThan(10);
      expect(events.at(-1)!.event).toBe('message_stop');
      expect(events.find((e) => e.event === 'message_delta')!.data.usage.output_tokens).toBe(200);
    } finally {
      timers.mockRestore();
    }
  });
});

describe('stats', () => {
  it('counts by status, key fingerprint and model, logs each request, and never shows a key', async () => {
    const clock = manualClock();
    const secret = 'sk-secret-value-123';
    const s = await sim({ keys: { [secret]: { rpm: 1 } }, now: clock.now });
    await post(messages(s), messagesBody('one', { model: 'm-a' }), { key: secret });
    await post(messages(s), messagesBody('two', { model: 'm-a' }), { key: secret });
    await post(chat(s), chatBody('three', { model: 'm-b', stream: true }), { bearer: 'sk-wrong' });
    const fp = createHash('sha256').update(secret).digest('hex').slice(0, 8);
    const stats = s.stats();
    expect(stats.requests).toBe(3);
    expect(stats.byStatus).toEqual({ 200: 1, 401: 1, 429: 1 });
    expect(stats.byKey[fp]).toEqual({ requests: 2, ok: 1, rateLimited: 1, unauthorized: 0, faults: 0 });
    expect(Object.values(stats.byKey).map((k) => k.unauthorized)).toContain(1);
    expect(stats.byModel['m-a']).toMatchObject({ requests: 2, ok: 1 });
    expect(stats.byModel['m-a']!.outputTokens).toBeGreaterThan(0);
    expect(stats.log).toEqual([
      { at: clock.now(), endedAt: clock.now(), key: fp, protocol: 'anthropic', model: 'm-a', status: 200, stream: false },
      { at: clock.now(), endedAt: clock.now(), key: fp, protocol: 'anthropic', model: 'm-a', status: 429, stream: false, retryAfterMs: 60_000 },
      expect.objectContaining({ protocol: 'openai', model: 'm-b', status: 401, stream: true }),
    ]);
    const served = await (await fetch(`${s.url}/stats`)).json();
    expect(served).toEqual(stats);
    const everything = JSON.stringify(served);
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain('sk-wrong');

    s.resetStats();
    expect(s.stats()).toMatchObject({ requests: 0, log: [] });
  });

  it('answers an unknown route with a 404', async () => {
    const s = await sim();
    expect((await post(`${s.url}/v1/complete`, {})).status).toBe(404);
  });
});

describe('formatDuration', () => {
  it('spells durations the way OpenAI does', () => {
    expect([formatDuration(20), formatDuration(1500), formatDuration(360_000), formatDuration(61_250), formatDuration(3_723_000)]).toEqual(['20ms', '1.5s', '6m0s', '1m1.25s', '1h2m3s']);
  });
});
