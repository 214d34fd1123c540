/**
 * Structured outputs, field placeholders and quality gates end to end, over HTTP against the
 * simulated provider, on both wire protocols. A recording proxy in front of the simulator keeps
 * every request body as it went over the wire: the schema goes out natively (checked against the
 * official SDKs' request types), a bad answer is retried with the problems in the next prompt,
 * and the result's output is the parsed value.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { createSwarm, type OutputOf, type PlanInput, type ResultOf, type RunEvent, type RunResult } from '../../src/index.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { recordingProxy, type RecordedRequest } from '../helpers/recordingProxy.js';
import { cli } from '../helpers/cli.js';
import { recordingProvider } from '../helpers/recordingProvider.js';
import { toModelOutput } from '../../src/providers/scripted.js';
import type { RunHandle } from '../../src/swarm.js';

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 3 },
    tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
    meta: { type: 'object', properties: { lang: { type: 'string', enum: ['en', 'fr'] }, score: { type: 'number', minimum: 1 } }, required: ['lang', 'score'], additionalProperties: false },
  },
  required: ['title', 'tags', 'meta'],
  additionalProperties: false,
};

let sim: SimServer;
let proxy: Awaited<ReturnType<typeof recordingProxy>>;
beforeAll(async () => {
  sim = await startSim({ seed: 3 });
  proxy = await recordingProxy(sim.url);
});
afterAll(async () => {
  await proxy.close();
  await sim.close();
});

function planOf(protocol: 'anthropic' | 'openai', tasks: unknown[]) {
  return {
    providers: { sim: { type: 'sim', baseURL: proxy.url, sim: { protocol }, cache: false } },
    models: {
      fast: { provider: 'sim', model: `sim-${protocol}`, maxTokens: 256, price: { input: 1, output: 5 } },
      judge: { provider: 'sim', model: `judge-${protocol}`, maxTokens: 64, price: { input: 2, output: 10 } },
    },
    tasks,
  };
}

async function run(plan: unknown) {
  const swarm = createSwarm({ seed: 1, backoff: { baseMs: 1, maxMs: 2 } });
  const handle = swarm.run(plan);
  const events: RunEvent[] = [];
  handle.events.on('*', (_type: string, e: RunEvent) => events.push(e));
  try {
    return { result: await handle.result, events };
  } finally {
    await swarm.close();
  }
}

/** The wire bodies of one task's requests, in order. */
const bodiesOf = (taskId: string) => proxy.requests.filter((r) => r.call.split(';')[0] === taskId);

/** The text of a request's last user message, in either protocol's shape. */
function lastUserText(r: RecordedRequest): string {
  const messages = r.body.messages as { role: string; content: string | { type: string; text?: string }[] }[];
  const last = messages.filter((m) => m.role === 'user').at(-1)!;
  return typeof last.content === 'string' ? last.content : last.content.map((b) => b.text ?? '').join('\n');
}

describe.each(['anthropic', 'openai'] as const)('structured output over %s', (protocol) => {
  it('sends the schema natively (the SDK request types), exposes the parsed value, and {{dep.field}} places one field', async () => {
    const id = `extract-${protocol}`;
    const use = `use-${protocol}`;
    const { result } = await run(
      planOf(protocol, [
        { id, model: 'fast', prompt: 'Extract the product.', output: { schema } },
        { id: use, model: 'fast', deps: [id], prompt: `Title: {{${id}.title}} / lang {{${id}.meta.lang}} / tags {{${id}.tags}} [[sim:reply ok]]` },
      ]),
    );
    expect(result.status).toBe('completed');
    expect(result.tasks[id]!.output).toEqual({ title: 'sim title', tags: ['sim tags 1', 'sim tags 2'], meta: { lang: 'en', score: 1 } });
    expect(result.tasks[use]!.output).toBe('ok');

    const [sent] = bodiesOf(id);
    if (protocol === 'anthropic') {
      const expected: Pick<Anthropic.MessageCreateParams, 'output_config'> = { output_config: { format: { type: 'json_schema', schema } } };
      expect(sent!.path).toBe('/v1/messages');
      expect(sent!.body).toMatchObject(expected);
    } else {
      const expected: Pick<OpenAI.ChatCompletionCreateParams, 'response_format'> = { response_format: { type: 'json_schema', json_schema: { name: id, schema, strict: true } } };
      expect(sent!.path).toBe('/v1/chat/completions');
      expect(sent!.body).toMatchObject(expected);
    }
    // The simulator's own log: what it parsed out of the request.
    const seen = sim.stats().log.filter((e) => e.call?.split(';')[0] === id);
    expect(seen.map((e) => e.outputSchema)).toEqual([schema]);
    // A task without a schema sends none; its prompt got the fields, and not the whole output.
    const [dependent] = bodiesOf(use);
    expect(dependent!.body.response_format ?? dependent!.body.output_config).toBeUndefined();
    expect(lastUserText(dependent!)).toBe('Title: sim title / lang en / tags ["sim tags 1","sim tags 2"] [[sim:reply ok]]');
  });

  it('retries an answer that is not JSON with the problems in the next prompt, and completes on attempt 2', async () => {
    const id = `retry-${protocol}`;
    const { result, events } = await run(planOf(protocol, [{ id, model: 'fast', prompt: `Extract. [[sim:invalid 1 ${id}]]`, output: { schema }, maxRetries: 2 }]));
    const task = result.tasks[id]!;
    expect(task.status).toBe('completed');
    expect(task.attempts).toBe(2);
    expect(task.output).toMatchObject({ title: 'sim title' });
    const failed = events.find((e): e is Extract<RunEvent, { type: 'task:failed' }> => e.type === 'task:failed' && e.taskId === id)!;
    expect(failed.error.code).toBe('invalid_output');
    expect(failed.willRetry).toBe(true);
    const [first, second] = bodiesOf(id);
    expect(lastUserText(first!)).not.toContain('<rejected-answer>');
    expect(lastUserText(second!)).toContain('<rejected-answer>');
    expect(lastUserText(second!)).toMatch(/- the answer is not valid JSON/);
    expect(lastUserText(second!)).toContain('simulated invalid output 1 of 1');
  });

  it('puts the schema errors in the next prompt, and fails with invalid_output after maxRetries, keeping the last answer', async () => {
    const id = `bad-${protocol}`;
    const { result } = await run(planOf(protocol, [{ id, model: 'fast', prompt: 'Extract. [[sim:reply {"title": 7}]]', output: { schema }, maxRetries: 2 }]));
    const task = result.tasks[id]!;
    expect(task.status).toBe('failed');
    expect(task.error!.code).toBe('invalid_output');
    expect(task.attempts).toBe(3);
    expect(task.error!.message).toMatch(/\/title must be string/);
    expect(task.output).toEqual({ title: 7 });
    const bodies = bodiesOf(id);
    expect(bodies).toHaveLength(3);
    expect(lastUserText(bodies[1]!)).toMatch(/- the JSON at \/title must be string/);
    expect(lastUserText(bodies[1]!)).toMatch(/must have required property 'tags'/);
  });

  it('accepts an answer wrapped in a ```json fence', async () => {
    const id = `fenced-${protocol}`;
    const fenced = '```json\n{"title": "abc", "tags": ["x", "y"], "meta": {"lang": "fr", "score": 2}}\n```';
    const { result } = await run(planOf(protocol, [{ id, model: 'fast', prompt: `Extract. [[sim:reply ${fenced}]]`, output: { schema }, maxRetries: 0 }]));
    expect(result.tasks[id]!.status).toBe('completed');
    expect(result.tasks[id]!.output).toEqual({ title: 'abc', tags: ['x', 'y'], meta: { lang: 'fr', score: 2 } });
  });
});

describe.each(['anthropic', 'openai'] as const)('quality gates over %s', (protocol) => {
  it('minChars and pattern: a rejected answer is retried with the reason, the next passes', async () => {
    const short = `short-${protocol}`;
    const sku = `sku-${protocol}`;
    const { result, events } = await run(
      planOf(protocol, [
        { id: short, model: 'fast', prompt: `Describe. [[sim:replies too short ${protocol} || a description long enough to pass the gate]]`, accept: { minChars: 30 } },
        { id: sku, model: 'fast', prompt: `Name it. [[sim:replies no code here ${protocol} || the code is SKU-123]]`, accept: { pattern: 'SKU-\\d+' } },
      ]),
    );
    expect(result.status).toBe('completed');
    expect(result.tasks[short]).toMatchObject({ status: 'completed', attempts: 2, output: 'a description long enough to pass the gate' });
    expect(result.tasks[sku]).toMatchObject({ status: 'completed', attempts: 2, output: 'the code is SKU-123' });
    const codes = events.filter((e): e is Extract<RunEvent, { type: 'task:failed' }> => e.type === 'task:failed').map((e) => [e.taskId, e.error.code]);
    expect(codes.sort()).toEqual([[short, 'rejected_output'], [sku, 'rejected_output']].sort());
    expect(lastUserText(bodiesOf(short)[1]!)).toMatch(/- the answer has \d+ characters, fewer than the 30 required/);
    expect(lastUserText(bodiesOf(sku)[1]!)).toContain('- the answer does not match the pattern /SKU-\\d+/');
  });

  it('a judge below the threshold rejects, above it accepts; its calls go through the same pool and count in the task spend', async () => {
    const id = `judged-${protocol}`;
    const { result, events } = await run(
      planOf(protocol, [
        { id, model: 'fast', prompt: 'Write the SEO text. [[sim:reply a fine text]]', accept: { judge: { model: 'judge', prompt: `Is it persuasive? [[sim:replies 0.3 ${protocol} || {"score": 0.9, "reason": "good"}]]`, threshold: 0.7 } } },
      ]),
    );
    const task = result.tasks[id]!;
    expect(task).toMatchObject({ status: 'completed', attempts: 2, output: 'a fine text' });
    const bodies = bodiesOf(id);
    // task, judge (0.3: rejected), task again, judge (0.9: accepted)
    expect(bodies.map((b) => b.body.model)).toEqual([`sim-${protocol}`, `judge-${protocol}`, `sim-${protocol}`, `judge-${protocol}`]);
    expect(lastUserText(bodies[1]!)).toContain('<answer>\na fine text\n</answer>');
    expect(lastUserText(bodies[2]!)).toContain('- the judge scored it 0.3, below the threshold of 0.7');
    expect(task.requests).toBe(4);
    const judgeCost = events
      .filter((e): e is Extract<RunEvent, { type: 'model:response' }> => e.type === 'model:response' && e.taskId === id && e.model === `judge-${protocol}`)
      .reduce((sum, e) => sum + (e.costUsd ?? 0), 0);
    expect(judgeCost).toBeGreaterThan(0);
    const allCost = events
      .filter((e): e is Extract<RunEvent, { type: 'model:response' }> => e.type === 'model:response' && e.taskId === id)
      .reduce((sum, e) => sum + (e.costUsd ?? 0), 0);
    expect(task.costUsd).toBeCloseTo(allCost, 8);
  });

  it('the judge call reserves against the budget like any call: a judge model without budget left stops the task', async () => {
    const id = `judge-budget-${protocol}`;
    const { result, events } = await run({
      ...planOf(protocol, [{ id, model: 'fast', prompt: 'Write. [[sim:reply text]]', accept: { judge: { model: 'judge', prompt: 'good? [[sim:reply 1]]' } } }]),
      budget: { perModel: { judge: 0.000001 } },
    });
    const task = result.tasks[id]!;
    expect(task.status).toBe('failed');
    expect(task.error!.code).toBe('budget_exceeded');
    expect(task.error!.message).toMatch(/judge/);
    // The answer went out; the judge's call was refused before it was sent.
    expect(bodiesOf(id).map((b) => b.body.model)).toEqual([`sim-${protocol}`]);
    expect(events.some((e) => e.type === 'budget:denied' && e.taskId === id)).toBe(true);
  });

  it('a judge score exactly at the threshold passes (the threshold is the lowest passing score); just below it rejects', async () => {
    const at = `judge-at-${protocol}`;
    const below = `judge-below-${protocol}`;
    const { result } = await run(
      planOf(protocol, [
        { id: at, model: 'fast', prompt: 'Write. [[sim:reply at the line]]', accept: { judge: { model: 'judge', prompt: 'good? [[sim:reply {"score": 0.7}]]', threshold: 0.7 } }, maxRetries: 0 },
        { id: below, model: 'fast', prompt: 'Write. [[sim:reply under the line]]', accept: { judge: { model: 'judge', prompt: 'good? [[sim:reply {"score": 0.69}]]', threshold: 0.7 } }, maxRetries: 0 },
      ]),
    );
    expect(result.tasks[at]).toMatchObject({ status: 'completed', attempts: 1, output: 'at the line' });
    expect(result.tasks[below]).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'rejected_output', message: expect.stringContaining('the judge scored it 0.69, below the threshold of 0.7') } });
  });

  it('fails with rejected_output after maxRetries and keeps the last output', async () => {
    const id = `rejected-${protocol}`;
    const { result } = await run(planOf(protocol, [{ id, model: 'fast', prompt: 'Describe. [[sim:reply tiny]]', accept: { minChars: 50 }, maxRetries: 1 }]));
    const task = result.tasks[id]!;
    expect(task.status).toBe('failed');
    expect(task.error!.code).toBe('rejected_output');
    expect(task.attempts).toBe(2);
    expect(task.output).toBe('tiny');
  });
});

describe('zod schemas in plans written in code', () => {
  it('turns a zod output.schema into a JSON Schema sent natively, and types the result by task id', async () => {
    const Product = z.object({ name: z.string().min(2), price: z.number().min(1), kind: z.enum(['book', 'pen']) });
    const swarm = createSwarm({ seed: 1 });
    try {
      const handle = swarm.run({
        providers: { sim: { type: 'sim', baseURL: proxy.url, sim: { protocol: 'openai' } } },
        models: { fast: { provider: 'sim', model: 'sim-zod', maxTokens: 256 } },
        tasks: [
          { id: 'zod-extract', model: 'fast', prompt: 'Extract.', output: { schema: Product } },
          { id: 'zod-text', model: 'fast', prompt: 'Say it. [[sim:reply hello]]' },
        ],
      });
      const result = await handle.result;
      const product = result.tasks['zod-extract'].output;
      expectTypeOf(product).toEqualTypeOf<{ name: string; price: number; kind: 'book' | 'pen' } | undefined>();
      expectTypeOf(result.tasks['zod-text'].output).toEqualTypeOf<string | undefined>();
      // Not known from the type: a plan typed as PlanInput, a plan read from JSON.
      expectTypeOf<OutputOf<PlanInput['tasks'][number]>>().toEqualTypeOf<unknown>();
      expectTypeOf<ResultOf<any>>().toEqualTypeOf<RunResult>();
      expectTypeOf<ResultOf<PlanInput>['tasks'][string]['output']>().toEqualTypeOf<unknown>();
      expect(product).toEqual({ name: 'sim name', price: 1, kind: 'book' });
      expect(Product.parse(product)).toEqual(product);
      expect(result.tasks['zod-text'].output).toBe('hello');
      const [sent] = bodiesOf('zod-extract');
      const format = sent!.body.response_format as { json_schema: { schema: Record<string, unknown> } };
      expect(format.json_schema.schema).toEqual(z.toJSONSchema(Product));
    } finally {
      await swarm.close();
    }
  });
});

describe('a pattern that backtracks for ever on a backtracking engine', () => {
  // In a child process (the CLI), so that a regression ends in its kill, not in a hung suite.
  it('^(a+)+$ runs in linear time and ^(?=(a+)+$) is stopped at its time bound, in accept and in a schema: failed checks, not a hung run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'swarmstate-pattern-'));
    const answer = 'a'.repeat(10_000) + 'b';
    const file = join(dir, 'plan.json');
    writeFileSync(
      file,
      JSON.stringify({
        providers: { sim: { type: 'sim' } },
        models: { m: { provider: 'sim', model: 'sim-x', maxTokens: 8192 } },
        tasks: [
          { id: 'gate', model: 'm', prompt: `[[sim:reply ${answer}]]`, accept: { pattern: '^(a+)+$' }, maxRetries: 0 },
          { id: 'schema', model: 'm', prompt: `[[sim:reply {"code": "${answer}"}]]`, output: { schema: { type: 'object', properties: { code: { type: 'string', pattern: '^(a+)+$' } } } }, maxRetries: 0 },
          // Lookahead: JavaScript's backtracking engine, in a worker stopped after 1,000 ms.
          { id: 'lookahead', model: 'm', prompt: `[[sim:reply ${answer}]]`, accept: { pattern: '^(?=(a+)+$)' }, maxRetries: 0 },
          { id: 'items', model: 'm', prompt: `[[sim:reply ["${answer}", "${answer}"] ]]`, output: { schema: { type: 'array', items: { type: 'string', pattern: '^(?=(a+)+$)' } } }, maxRetries: 0 },
        ],
      }),
    );
    const r = await cli(['run', file, '--json', '--store', 'memory']);
    expect(r.code).toBe(1);
    const result = JSON.parse(r.stdout) as RunResult;
    expect(result.tasks.gate!.error).toMatchObject({ code: 'rejected_output', message: 'task "gate" attempt 1: the answer was rejected by its quality gate: the answer does not match the pattern /^(a+)+$/' });
    expect(result.tasks.schema!.error).toMatchObject({ code: 'invalid_output', message: 'task "schema" attempt 1: the answer does not meet its output schema: the JSON at /code must match pattern "^(a+)+$"' });
    const stopped = 'checking the pattern /^(?=(a+)+$)/ took more than 1000 ms and was stopped (a pattern with lookaround or backreferences runs on a backtracking engine, with this time bound; without them it runs in linear time)';
    expect(result.tasks.lookahead!.error).toMatchObject({ code: 'rejected_output', problems: [stopped] });
    expect(result.tasks.items!.error).toMatchObject({ code: 'invalid_output', problems: [stopped] });
  });
});

describe('repair attempts are bounded', () => {
  it('an answer that never meets its schema is tried maxRetries + 1 times, then the task fails (a bound of its own ends the test if not)', async () => {
    let calls = 0;
    let handle: RunHandle | undefined;
    const { provider } = recordingProvider(sim.url, (r) => {
      calls += 1;
      // Twice the bound: past it the retry loop would go on for ever, so the run is cancelled instead.
      if (calls > 6) handle?.cancel('the retry loop did not stop');
      return Promise.resolve(toModelOutput(r, 'not JSON at all', 0));
    });
    const swarm = createSwarm({ store: false, providers: { p: provider }, backoff: { baseMs: 1, maxMs: 2 } });
    try {
      handle = swarm.run({
        providers: { p: { type: 'sim' } },
        models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 } },
        tasks: [{ id: 'stubborn', model: 'm', prompt: 'Extract.', output: { schema }, maxRetries: 2 }],
      });
      const result = await handle.result;
      expect(calls).toBe(3);
      expect(result.status).toBe('failed');
      expect(result.tasks.stubborn).toMatchObject({ status: 'failed', attempts: 3, error: { code: 'invalid_output' } });
    } finally {
      await swarm.close();
    }
  });
});
