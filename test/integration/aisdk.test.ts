/**
 * `type: "ai-sdk"` and `type: "custom"` end to end: real AI SDK providers
 * (@ai-sdk/openai-compatible, @ai-sdk/anthropic) pointed at the simulator over HTTP run a small
 * plan through createSwarm: a tool round trip, a dependency, a 429 with Retry-After honoured on
 * the key, prompt-cache usage; and a plain object with `call(request)` as a custom provider.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, PlanValidationError, startSim, type RunEvent, type SimServer } from '../../src/index.js';
import type { ProviderKey } from '../../src/providers/types.js';

const KEY = 'sk-sim-aisdk-0123456789';
let sim: SimServer;

beforeAll(async () => {
  sim = await startSim({ seed: 5, keys: { [KEY]: {} } });
});
afterAll(async () => {
  await sim.close();
});

const lookup = {
  name: 'lookup',
  description: 'Price of a SKU',
  inputSchema: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
  handler: async ({ sku }: { sku: string }) => `SKU ${sku}: 12 EUR`,
};

describe('ai-sdk providers over HTTP to the simulator', () => {
  it('runs a plan with tools, a dependency and a 429 honoured (OpenAI-compatible provider, a model per key)', async () => {
    const made: string[] = [];
    const gateway = (modelId: string, key: ProviderKey) => {
      made.push(`${modelId} ${key.id}`);
      return createOpenAICompatible({ name: 'simgw', baseURL: `${sim.url}/v1`, apiKey: key.secret, includeUsage: true })(modelId);
    };
    const swarm = createSwarm({ providers: { gw: gateway }, tools: [lookup], store: false, env: { SIM_GW_KEY: KEY }, backoff: { baseMs: 1, maxMs: 5 } });
    const run = swarm.run({
      providers: { gw: { type: 'ai-sdk', keys: [{ env: 'SIM_GW_KEY' }] } },
      models: { fast: { provider: 'gw', model: 'sim-small', maxTokens: 256 } },
      tasks: [
        { id: 'quote', model: 'fast', tools: ['lookup'], prompt: 'Price SKU A1. [[sim:tool lookup {"sku":"A1"}]]' },
        { id: 'busy', model: 'fast', prompt: 'Say hi. [[sim:error 429 1]]' },
        { id: 'after', model: 'fast', deps: ['quote', 'busy'], prompt: 'Sum up: {{quote}} {{busy}}' },
      ],
    });
    const events: RunEvent[] = [];
    run.events.on('*', (_type, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    // quote: 2 turns; busy: a 429 and its retry; after: 1.
    expect(sim.stats().requests).toBeGreaterThanOrEqual(5);
    // The tool result went back to the model and the task finished with its answer.
    expect(events.some((e) => e.type === 'tool:called' && e.name === 'lookup' && e.taskId === 'quote')).toBe(true);
    expect(result.tasks.quote!.output).toBeTypeOf('string');
    // The 429 came back as rate_limited with the server's Retry-After, and the retry succeeded.
    const limited = events.find((e): e is Extract<RunEvent, { type: 'model:error' }> => e.type === 'model:error' && e.taskId === 'busy');
    expect(limited?.error).toMatchObject({ code: 'rate_limited', retryAfterMs: 1000, status: 429 });
    expect(events.some((e) => e.type === 'key:backoff' && e.retryAfterMs === 1000)).toBe(true);
    expect(result.tasks.busy!.status).toBe('completed');
    // Usage came through the spec's usage.
    const response = events.find((e): e is Extract<RunEvent, { type: 'model:response' }> => e.type === 'model:response');
    expect(response!.usage.inputTokens).toBeGreaterThan(0);
    expect(response!.usage.outputTokens).toBeGreaterThan(0);
    // One model per (model id, key): the key's secret reached the AI SDK provider, only its id is ours.
    expect(new Set(made).size).toBe(1);
    expect(made[0]).toMatch(/^sim-small gw:[0-9a-f]+$/);
    expect(JSON.stringify(events)).not.toContain(KEY);
  }, 60_000);

  it('reads prompt-cache tokens through the AI SDK Anthropic provider', async () => {
    const anthropic = createAnthropic({ baseURL: `${sim.url}/v1`, apiKey: KEY });
    const swarm = createSwarm({ providers: { claude: anthropic }, store: false });
    const system = 'You are a careful catalog writer. '.repeat(200);
    const run = swarm.run({
      providers: { claude: { type: 'ai-sdk' } },
      models: { m: { provider: 'claude', model: 'sim-claude', maxTokens: 128 } },
      tasks: [
        { id: 'a', model: 'm', system, prompt: 'Describe item A.' },
        { id: 'b', model: 'm', system, prompt: 'Describe item B.', deps: ['a'] },
      ],
    });
    const responses: Extract<RunEvent, { type: 'model:response' }>[] = [];
    run.events.on('model:response', (e) => responses.push(e));
    const result = await run.result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(responses).toHaveLength(2);
    expect(responses[0]!.usage.inputTokens).toBeGreaterThan(0);
    expect(responses.some((r) => r.usage.cacheReadTokens > 0 || r.usage.cacheWriteTokens > 0)).toBe(true);
  }, 60_000);
});

describe('custom providers', () => {
  it('takes any object with call(request), with no keys in the plan', async () => {
    const seen: string[] = [];
    const echo = {
      type: 'echo',
      async call(request: { meta: { taskId: string } }) {
        seen.push(request.meta.taskId);
        return { content: [{ type: 'text' as const, text: `echo ${request.meta.taskId}` }], stopReason: 'end_turn' as const, usage: { inputTokens: 3, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 } };
      },
    };
    const swarm = createSwarm({ providers: { echo }, store: false });
    const result = await swarm.run({
      providers: { echo: { type: 'custom' } },
      models: { m: { provider: 'echo', model: 'any' } },
      tasks: [{ id: 'one', model: 'm', prompt: 'hi' }],
    }).result;
    await swarm.close();
    expect(result.tasks.one!.output).toBe('echo one');
    expect(seen).toEqual(['one']);
  });

  it('a custom or ai-sdk provider with no object given fails the run naming the provider and what to pass', async () => {
    const swarm = createSwarm({ store: false });
    for (const type of ['custom', 'ai-sdk']) {
      const error = await swarm.run({
        providers: { mine: { type } },
        models: { m: { provider: 'mine', model: 'x' } },
        tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
      }).result.then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(PlanValidationError);
      expect((error as PlanValidationError).issues[0]).toMatchObject({ path: 'providers.mine.type' });
      expect((error as Error).message).toContain('createSwarm({ providers: { "mine": ... } })');
    }
    await swarm.close();
  });

  it('an AI SDK model given for a custom provider is refused with the type to use', async () => {
    const anthropic = createAnthropic({ baseURL: `${sim.url}/v1`, apiKey: KEY });
    const swarm = createSwarm({ providers: { mine: anthropic('sim-claude') as never }, store: false });
    const error = await swarm.run({
      providers: { mine: { type: 'custom' } },
      models: { m: { provider: 'mine', model: 'x' } },
      tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
    }).result.then(() => undefined, (e: unknown) => e);
    await swarm.close();
    expect((error as Error).message).toContain('"type": "ai-sdk"');
  });
});

/**
 * A custom provider's reply enters the run unchecked by any adapter: the one check every
 * provider kind's reply goes through (src/providers/replyCheck.ts) must refuse what is not a
 * reply, as a provider error (retried like any malformed reply), never a completed task or a
 * cost that is not a number.
 */
describe('custom providers: replies checked at the boundary', () => {
  const good = { inputTokens: 3, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 };
  const reply = (fields: Record<string, unknown>) => ({ content: [{ type: 'text', text: 'fine' }], stopReason: 'end_turn', usage: good, ...fields });

  /** Runs one task on a custom provider that answers `answer` every time (budget $1 when asked). */
  async function runWith(answer: () => unknown, budget = false) {
    let calls = 0;
    const provider = {
      type: 'bad',
      async call() {
        calls++;
        return answer() as never;
      },
    };
    const swarm = createSwarm({ providers: { bad: provider }, store: false, backoff: { baseMs: 1, maxMs: 1 } });
    const run = swarm.run({
      providers: { bad: { type: 'custom' } },
      models: { m: { provider: 'bad', model: 'x', maxTokens: 64, price: { input: 1, output: 1 } } },
      defaults: { maxRetries: 1 },
      ...(budget ? { budget: { usd: 1 } } : {}),
      tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
    });
    const events: RunEvent[] = [];
    run.events.on('*', (_type, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();
    const errors = events.flatMap((e) => (e.type === 'model:error' ? [e.error] : []));
    return { result, events, errors, calls };
  }

  const cases: { name: string; answer: () => unknown; says: RegExp }[] = [
    { name: 'NaN input tokens', answer: () => reply({ usage: { ...good, inputTokens: Number.NaN } }), says: /usage\.inputTokens is NaN/ },
    { name: 'a string count', answer: () => reply({ usage: { ...good, outputTokens: '5' } }), says: /usage\.outputTokens is "5"/ },
    { name: 'a negative count', answer: () => reply({ usage: { ...good, cacheReadTokens: -4 } }), says: /usage\.cacheReadTokens is -4/ },
    { name: 'no usage', answer: () => ({ content: [{ type: 'text', text: 'fine' }], stopReason: 'end_turn' }), says: /usage is missing/ },
    { name: 'content a string', answer: () => reply({ content: 'fine' }), says: /content is not an array/ },
    { name: 'a block of no known type', answer: () => reply({ content: [{ type: 'image', data: 'x' }] }), says: /content\[0\]\.type is "image"/ },
    { name: 'a text block without text', answer: () => reply({ content: [{ type: 'text' }] }), says: /content\[0\]\.text is missing/ },
    { name: 'an unknown stop reason', answer: () => reply({ stopReason: 'because' }), says: /stopReason is "because"/ },
    { name: 'not an object', answer: () => 42, says: /the reply is 42, not an object/ },
  ];
  for (const c of cases) {
    it(`${c.name}: the task fails with a malformed-reply provider error, retried once, never completed`, async () => {
      const { result, errors, calls } = await runWith(c.answer);
      expect(result.status).toBe('failed');
      expect(result.tasks.t!.status).toBe('failed');
      // A malformed reply is retried like any (server_error): 2 calls for maxRetries 1.
      expect(calls).toBe(2);
      expect(errors).toHaveLength(2);
      for (const error of errors) {
        expect(error).toMatchObject({ code: 'server_error', retryable: true, provider: 'bad', model: 'x' });
        expect(error.message).toMatch(/^bad\/x, key bad:anonymous: malformed response: /);
        expect(error.message).toMatch(c.says);
      }
      expect(result.tasks.t!.error).toMatchObject({ code: 'server_error' });
    });
  }

  it('Infinity input tokens on a $1 budget: not completed, and no cost that is not a finite number', async () => {
    const { result, errors } = await runWith(() => reply({ usage: { ...good, inputTokens: Number.POSITIVE_INFINITY } }), true);
    expect(result.status).not.toBe('completed');
    expect(errors[0]!.message).toMatch(/usage\.inputTokens is Infinity/);
    expect(Number.isFinite(result.totals.costUsd)).toBe(true);
    expect(Number.isFinite(result.tasks.t!.costUsd)).toBe(true);
    expect(Number.isFinite(result.totals.usage.inputTokens)).toBe(true);
  });

  it('1e300 input tokens on a $1 budget: above any plausible count, a malformed reply, not a completed run at $1e+294', async () => {
    const { result, errors } = await runWith(() => reply({ usage: { ...good, inputTokens: 1e300 } }), true);
    expect(result.status).not.toBe('completed');
    expect(errors[0]!.message).toMatch(/usage\.inputTokens is 1e\+300, above 10000000 \(no model reads or writes that many tokens in one call\)/);
    // Each malformed reply may have been billed: charged its worst case, within the budget.
    expect(result.totals.costUsd).toBeLessThanOrEqual(1);
  });

  it('a provider that throws a plain object is reported with its contents (bounded), not [object Object]', async () => {
    const { errors } = await runWith(() => {
      throw { status: 'nope', detail: 'the gateway said no', pad: 'x'.repeat(5000) };
    });
    expect(errors[0]!.code).toBe('internal');
    expect(errors[0]!.message).not.toContain('[object Object]');
    expect(errors[0]!.message).toContain('{"status":"nope","detail":"the gateway said no"');
    expect(errors[0]!.message.length).toBeLessThan(800);
  });

  it('a well-formed reply still completes, its usage and cost as given', async () => {
    const { result } = await runWith(() => reply({}), true);
    expect(result.status).toBe('completed');
    expect(result.tasks.t!.output).toBe('fine');
    expect(result.totals.costUsd).toBe(0.000005);
  });
});
