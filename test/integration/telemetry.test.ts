/**
 * OpenTelemetry spans of a run, recorded by the SDK's InMemorySpanExporter: parentage (run ->
 * task -> attempt -> chat / execute_tool), GenAI attributes and ours, errors as span status,
 * and no secret (an API key, an MCP server's header value) in any attribute.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startSim, type SimServer } from '../../src/index.js';
import { startHttpFixture, type HttpFixture } from '../tools/fixtures/httpServer.js';

const API_KEY = 'sk-trace-SECRET-7f3a9c2e11';
const MCP_TOKEN = 'mcp-header-SECRET-55aa01';
let sim: SimServer;
let http: HttpFixture;

beforeAll(async () => {
  [sim, http] = await Promise.all([startSim({ seed: 9, keys: { [API_KEY]: {} } }), startHttpFixture()]);
});
afterAll(async () => {
  await Promise.all([sim.close(), http.close()]);
});

function tracing() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, tracer: provider.getTracer('test') };
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const lookup = {
  name: 'lookup',
  inputSchema: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
  handler: async ({ sku }: { sku: string }) => `SKU ${sku}: 12 EUR`,
};

describe('OpenTelemetry spans', () => {
  it('run -> task -> attempt -> chat / execute_tool, with GenAI attributes, errors and no secret', async () => {
    const { exporter, tracer } = tracing();
    const swarm = createSwarm({ tracer, tools: [lookup], store: false, env: { TRACE_KEY: API_KEY, CALC_TOKEN: MCP_TOKEN }, backoff: { baseMs: 1, maxMs: 2 } });
    const result = await swarm.run({
      providers: { main: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'TRACE_KEY' }], limits: { rpm: 6000 } } },
      models: { m: { provider: 'main', model: 'sim-small', maxTokens: 128, price: { input: 3, output: 15 } } },
      tools: { servers: { calc: { url: http.url, trusted: true, headers: { Authorization: { env: 'CALC_TOKEN' } } } } },
      defaults: { maxRetries: 2 },
      tasks: [
        { id: 'quote', model: 'm', tools: ['lookup', 'calc.add'], prompt: `Price it. [[sim:tool lookup {"sku":"A1"}]] [[sim:tool calc__add {"a":1,"b":2}]]` },
        { id: 'flaky', model: 'm', prompt: 'Hi. [[sim:error 500 1]]' },
        { id: 'broken', model: 'm', prompt: 'Nope. [[sim:error 400]]' },
        { id: 'after', model: 'm', deps: ['broken'], prompt: 'Never runs.' },
      ],
    }).result;
    await swarm.close();
    expect(result.tasks.quote!.status).toBe('completed');
    expect(result.tasks.flaky!.status).toBe('completed');
    expect(result.tasks.broken!.status).toBe('failed');

    const spans = exporter.getFinishedSpans();
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const named = (prefix: string) => spans.filter((s) => s.name.startsWith(prefix));
    const [run] = named('swarmstate.run');
    expect(run).toBeDefined();
    expect(parentOf(run!)).toBeUndefined();
    expect(run!.attributes['swarmstate.run.id']).toBeTypeOf('string');
    expect(run!.attributes['swarmstate.run.status']).toBe('partial');
    // One trace.
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);

    // Tasks under the run, attempts under their task, calls under their attempt.
    const task = (id: string) => named(`task ${id}`)[0]!;
    for (const id of ['quote', 'flaky', 'broken', 'after']) expect(parentOf(task(id))).toBe(run!.spanContext().spanId);
    expect(task('after').attributes).toMatchObject({ 'swarmstate.task.status': 'skipped', 'swarmstate.skip_cause': 'dependency' });
    const attempts = named('invoke_agent quote');
    expect(attempts).toHaveLength(1);
    expect(parentOf(attempts[0]!)).toBe(task('quote').spanContext().spanId);
    expect(attempts[0]!.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'swarmstate.task.id': 'quote', 'swarmstate.attempt': 1, 'swarmstate.route': 'main/sim-small' });

    const chats = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    for (const chat of chats) expect(byId.get(parentOf(chat)!)!.name).toMatch(/^invoke_agent /);
    const quoteChats = chats.filter((s) => s.attributes['swarmstate.task.id'] === 'quote');
    expect(quoteChats).toHaveLength(2);
    expect(quoteChats[0]!.name).toBe('chat sim-small');
    expect(quoteChats[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': 'sim-small',
      'swarmstate.route': 'main/sim-small',
      'swarmstate.attempt': 1,
    });
    expect(quoteChats[0]!.attributes['swarmstate.key.id']).toMatch(/^main:[0-9a-f]+$/);
    expect(quoteChats[0]!.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    expect(quoteChats[0]!.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    expect(quoteChats[0]!.attributes['gen_ai.usage.cache_read.input_tokens']).toBeTypeOf('number');
    expect(quoteChats[0]!.attributes['swarmstate.cost_usd']).toBeGreaterThan(0);

    // Both tool calls of quote's first turn, under its attempt, between its two model calls.
    const tools = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
    expect(tools.map((t) => t.attributes['gen_ai.tool.name']).sort()).toEqual(['calc.add', 'lookup']);
    const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6;
    for (const t of tools) {
      expect(parentOf(t)).toBe(attempts[0]!.spanContext().spanId);
      expect(ms(t.startTime)).toBeGreaterThanOrEqual(ms(quoteChats[0]!.endTime));
      expect(ms(t.endTime)).toBeLessThanOrEqual(ms(quoteChats[1]!.startTime));
      expect(t.name).toBe(`execute_tool ${t.attributes['gen_ai.tool.name']}`);
      // The model's id of the call; an in-process tool is a function, an MCP server's an extension.
      expect(t.attributes['gen_ai.tool.call.id']).toMatch(/\S/);
      expect(t.attributes['gen_ai.tool.type']).toBe(t.attributes['gen_ai.tool.name'] === 'lookup' ? 'function' : 'extension');
    }

    // A failed call: status ERROR with the error class; the retry then succeeded.
    const flakyChats = chats.filter((s) => s.attributes['swarmstate.task.id'] === 'flaky');
    expect(flakyChats).toHaveLength(2);
    const failedCall = flakyChats.find((s) => s.status.code === 2)!;
    expect(failedCall.status.message).toBe('server_error');
    expect(failedCall.attributes).toMatchObject({ 'error.type': 'server_error', 'http.response.status_code': 500 });
    expect(flakyChats.filter((s) => s.status.code !== 2)).toHaveLength(1);
    // A failed task: its attempt and its task span are errors too.
    const broken = task('broken');
    expect(broken.status).toMatchObject({ code: 2, message: 'bad_request' });
    expect(broken.attributes['error.type']).toBe('bad_request');
    expect(named('invoke_agent broken')[0]!.status.code).toBe(2);

    // Nothing secret anywhere: attributes, names, events, statuses.
    const all = JSON.stringify(spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status })));
    expect(all).not.toContain(API_KEY);
    expect(all).not.toContain(MCP_TOKEN);
    // The header did reach the MCP server: the secret was there to leak.
    expect(http.seen.authorization).toContain(MCP_TOKEN);
  }, 60_000);

  it('parents the run span under the caller\'s active span', async () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    const { exporter, tracer } = tracing();
    const swarm = createSwarm({ tracer, store: false, providers: { p: { type: 'echo', call: async () => ({ content: [{ type: 'text' as const, text: 'ok' }], stopReason: 'end_turn' as const, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 } }) } } });
    const outer = tracer.startSpan('app request');
    const run = context.with(trace.setSpan(context.active(), outer), () =>
      swarm.run({ providers: { p: { type: 'custom' } }, models: { m: { provider: 'p', model: 'x' } }, tasks: [{ id: 't', model: 'm', prompt: 'hi' }] }),
    );
    await run.result;
    outer.end();
    await swarm.close();
    context.disable();
    const spans = exporter.getFinishedSpans();
    const runSpan = spans.find((s) => s.name === 'swarmstate.run')!;
    expect(parentOf(runSpan)).toBe(outer.spanContext().spanId);
    expect(spans.find((s) => s.name === 'chat x')!.attributes['gen_ai.provider.name']).toBe('swarmstate.custom');
  });

  it('puts a planner\'s sub-tasks under the planner\'s task span', async () => {
    const { exporter, tracer } = tracing();
    const subtasks = JSON.stringify([{ id: 'a', model: 'm', prompt: 'part a' }, { id: 'b', model: 'm', prompt: 'part b' }]);
    const swarm = createSwarm({ tracer, store: false });
    const result = await swarm.run({
      providers: { s: { type: 'sim' } },
      models: { m: { provider: 's', model: 'sim-small', maxTokens: 256 } },
      tasks: [{ id: 'plan', kind: 'plan', model: 'm', prompt: `split it [[sim:reply ${subtasks} ]]` }],
    }).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    const spans = exporter.getFinishedSpans();
    const planner = spans.find((s) => s.name === 'task plan')!;
    for (const id of ['plan/a', 'plan/b']) {
      const sub = spans.find((s) => s.name === `task ${id}`)!;
      expect(parentOf(sub)).toBe(planner.spanContext().spanId);
      expect(sub.attributes['swarmstate.task.parent']).toBe('plan');
    }
  });

  it('a function step is an execute_tool span of its function under its task; a model on a provider named "fn" is still an agent', async () => {
    const { exporter, tracer } = tracing();
    const swarm = createSwarm({ tracer, store: false, functions: { total: ({ deps }) => String(deps.ask).length, flaky: ({ attempt }) => { if (attempt === 1) throw new Error('once'); return attempt; } } });
    const result = await swarm.run({
      providers: { fn: { type: 'sim' } },
      models: { m: { provider: 'fn', model: 'sim-fast' } },
      defaults: { maxRetries: 1 },
      tasks: [
        { id: 'ask', model: 'm', prompt: 'Hi. [[sim:reply HELLO]]' },
        { id: 'count', kind: 'fn', fn: 'total', deps: ['ask'] },
        { id: 'again', kind: 'fn', fn: 'flaky' },
      ],
    }).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    const spans = exporter.getFinishedSpans();
    const task = (id: string) => spans.find((s) => s.name === `task ${id}`)!;
    const steps = spans.filter((s) => s.name === 'execute_tool total');
    expect(steps).toHaveLength(1);
    expect(parentOf(steps[0]!)).toBe(task('count').spanContext().spanId);
    expect(steps[0]!.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'total', 'gen_ai.tool.type': 'function', 'swarmstate.task.id': 'count', 'swarmstate.attempt': 1 });
    // A thrown error is its attempt's error status; the retry is a second span.
    const flaky = spans.filter((s) => s.name === 'execute_tool flaky');
    expect(flaky.map((s) => s.attributes['swarmstate.attempt'])).toEqual([1, 2]);
    expect(flaky[0]!.status.code).toBe(2);
    // The route "fn/sim-fast" of a provider named fn is a model call's.
    const agent = spans.filter((s) => s.name === 'invoke_agent ask');
    expect(agent).toHaveLength(1);
    expect(agent[0]!.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'swarmstate.route': 'fn/sim-fast' });
    expect(spans.some((s) => s.name === 'execute_tool sim-fast')).toBe(false);
  });

  it('a tracer that throws does not fail the run', async () => {
    const { tracer } = tracing();
    const broken = {
      startSpan: (name: string, ...rest: Parameters<typeof tracer.startSpan> extends [unknown, ...infer R] ? R : never) => {
        if (name.startsWith('chat')) throw new Error('exporter down');
        return tracer.startSpan(name, ...rest);
      },
      startActiveSpan: tracer.startActiveSpan.bind(tracer),
    } as typeof tracer;
    const echo = { call: async () => ({ content: [{ type: 'text' as const, text: 'ok' }], stopReason: 'end_turn' as const, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 } }) };
    const swarm = createSwarm({ tracer: broken, store: false, providers: { p: echo } });
    const result = await swarm.run({ providers: { p: { type: 'custom' } }, models: { m: { provider: 'p', model: 'x' } }, tasks: [{ id: 'a', model: 'm', prompt: 'hi' }, { id: 'b', model: 'm', prompt: 'hi', deps: ['a'] }] }).result;
    await swarm.close();
    expect(result.status).toBe('completed');
  });

  it('makes no span without an SDK (the global no-op tracer) and none with tracer: false', async () => {
    const { exporter, tracer } = tracing();
    const calls: string[] = [];
    const echo = { type: 'echo', call: async (r: { meta: { taskId: string } }) => (calls.push(r.meta.taskId), { content: [{ type: 'text' as const, text: 'ok' }], stopReason: 'end_turn' as const, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 } }) };
    for (const options of [{}, { tracer: false as const }]) {
      const swarm = createSwarm({ ...options, store: false, providers: { p: echo } });
      const result = await swarm.run({ providers: { p: { type: 'custom' } }, models: { m: { provider: 'p', model: 'x' } }, tasks: [{ id: 't', model: 'm', prompt: 'hi' }] }).result;
      await swarm.close();
      expect(result.status).toBe('completed');
    }
    expect(calls).toEqual(['t', 't']);
    void tracer;
    expect(exporter.getFinishedSpans()).toHaveLength(0);
  });
});
