/**
 * The GenAI semantic conventions (v1.41.0) on a run's spans and metrics, checked attribute by
 * attribute with the SDK's in-memory span exporter and a metric reader: the chat span's request,
 * response and server attributes, the conversation id, execute_tool's call id and type,
 * invoke_agent's provider and model, exceptions (redacted), opt-in content capture (redacted),
 * the OTEL_SEMCONV_STABILITY_OPT_IN switch, and an AI SDK model reported as its own provider.
 */
import { AggregationTemporality, MeterProvider, MetricReader, type HistogramMetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startSim, type SimServer } from '../../src/index.js';

const API_KEY = 'sk-genai-SECRET-4b1d9e77aa';
let sim: SimServer;

beforeAll(async () => {
  sim = await startSim({ seed: 3, keys: { [API_KEY]: {} } });
});
afterAll(() => sim.close());

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

function telemetry() {
  const exporter = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('test');
  const reader = new TestReader();
  const meter = new MeterProvider({ readers: [reader] }).getMeter('test');
  return { exporter, tracer, reader, meter };
}

const lookup = {
  name: 'lookup',
  inputSchema: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
  handler: async ({ sku }: { sku: string }) => {
    if (sku === 'BAD') throw new Error(`lookup failed with key ${API_KEY}`);
    return `SKU ${sku}: 12 EUR`;
  },
};

const plan = (tasks: unknown[]) => ({
  providers: { main: { type: 'anthropic' as const, baseURL: sim.url, keys: [{ env: 'GENAI_KEY' }], limits: { rpm: 6000 } } },
  models: { m: { provider: 'main', model: 'sim-small', maxTokens: 200, temperature: 0.2, topP: 0.9, stopSequences: ['END'], price: { input: 3, output: 15 } } },
  defaults: { maxRetries: 0 },
  tasks: tasks as { id: string; model: string; prompt: string }[],
});

async function runWith(options: { captureContent?: boolean; env?: Record<string, string> }, tasks: unknown[]) {
  const t = telemetry();
  const swarm = createSwarm({ tracer: t.tracer, tracing: { meter: t.meter, ...(options.captureContent ? { captureContent: true } : {}) }, tools: [lookup], store: false, env: { GENAI_KEY: API_KEY, ...options.env } });
  const result = await swarm.run(plan(tasks)).result;
  await swarm.close();
  const spans = t.exporter.getFinishedSpans();
  const runId = String(spans.find((s) => s.name === 'swarmstate.run')!.attributes['swarmstate.run.id']);
  return { ...t, result, runId, spans };
}

const chatsOf = (spans: ReadableSpan[], taskId: string) => spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat' && s.attributes['swarmstate.task.id'] === taskId);

describe('GenAI semantic conventions', () => {
  it('chat, execute_tool and invoke_agent spans carry the conventions\' attributes; metrics too', async () => {
    const { spans, result, runId, reader } = await runWith({}, [
      { id: 'quote', model: 'm', tools: ['lookup'], prompt: 'Price it. [[sim:tool lookup {"sku":"A1"}]]' },
      { id: 'broken', model: 'm', prompt: 'Nope. [[sim:error 400]]' },
    ]);
    expect(result.tasks.quote!.status).toBe('completed');
    const [first, second] = chatsOf(spans, 'quote');
    const server = new URL(sim.url);
    for (const chat of [first!, second!]) {
      const a = chat.attributes;
      expect(chat.kind).toBe(2); // CLIENT
      expect(a['gen_ai.operation.name']).toBe('chat');
      expect(a['gen_ai.provider.name']).toBe('anthropic');
      expect(a['gen_ai.system']).toBe('anthropic');
      expect(a['gen_ai.request.model']).toBe('sim-small');
      expect(a['gen_ai.request.max_tokens']).toBe(200);
      expect(a['gen_ai.request.temperature']).toBe(0.2);
      expect(a['gen_ai.request.top_p']).toBe(0.9);
      expect(a['gen_ai.request.stop_sequences']).toEqual(['END']);
      expect(a['server.address']).toBe(server.hostname);
      expect(a['server.port']).toBe(Number(server.port));
      expect(a['gen_ai.conversation.id']).toBe(`${runId}/quote`);
      expect(a['gen_ai.response.id']).toMatch(/^msg_01/);
      expect(a['gen_ai.response.model']).toBe('sim-small');
      expect(a['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(a['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
      // No content unless asked for.
      expect(a['gen_ai.input.messages']).toBeUndefined();
      expect(a['gen_ai.output.messages']).toBeUndefined();
    }
    expect(first!.attributes['gen_ai.response.finish_reasons']).toEqual(['tool_call']);
    expect(second!.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);

    const [tool] = spans.filter((s) => s.name === 'execute_tool lookup');
    expect(tool!.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup', 'gen_ai.tool.type': 'function' });
    expect(tool!.attributes['gen_ai.tool.call.id']).toMatch(/\S/);
    expect(tool!.kind).toBe(0); // INTERNAL

    const [agent] = spans.filter((s) => s.name === 'invoke_agent quote');
    expect(agent!.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'quote', 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'sim-small', 'gen_ai.conversation.id': `${runId}/quote` });

    // A failed call: error.type, status ERROR, and the exception recorded.
    const [bad] = chatsOf(spans, 'broken');
    expect(bad!.status.code).toBe(2);
    expect(bad!.attributes['error.type']).toBe('bad_request');
    const exception = bad!.events.find((e) => e.name === 'exception')!;
    expect(exception.attributes).toMatchObject({ 'exception.type': 'bad_request' });
    expect(String(exception.attributes!['exception.message'])).toMatch(/\S/);

    // Metrics: tokens by type, durations (one per call, the failed one with its error.type).
    const { resourceMetrics } = await reader.collect();
    const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics) as HistogramMetricData[];
    const tokens = metrics.find((m) => m.descriptor.name === 'gen_ai.client.token.usage')!;
    expect(tokens.descriptor.unit).toBe('{token}');
    const byType = (type: string) => tokens.dataPoints.filter((p) => p.attributes['gen_ai.token.type'] === type);
    for (const type of ['input', 'output']) {
      const [point] = byType(type);
      expect(point!.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'sim-small', 'gen_ai.response.model': 'sim-small', 'server.address': server.hostname, 'server.port': Number(server.port) });
      expect(point!.value.count).toBe(2);
    }
    expect(byType('input')[0]!.value.sum).toBe(Number(first!.attributes['gen_ai.usage.input_tokens']) + Number(second!.attributes['gen_ai.usage.input_tokens']));
    const duration = metrics.find((m) => m.descriptor.name === 'gen_ai.client.operation.duration')!;
    expect(duration.descriptor.unit).toBe('s');
    const ok = duration.dataPoints.find((p) => p.attributes['error.type'] === undefined)!;
    const failed = duration.dataPoints.find((p) => p.attributes['error.type'] === 'bad_request')!;
    expect(ok.value.count).toBe(2);
    expect(failed.value.count).toBe(1);
    expect(ok.value.sum).toBeGreaterThanOrEqual(0);

    // No secret anywhere.
    expect(JSON.stringify(spans.map((s) => ({ a: s.attributes, e: s.events, st: s.status })))).not.toContain(API_KEY);
  }, 60_000);

  it('captureContent records the prompt and output as the conventions\' JSON, redacted; a failed tool records its exception, redacted', async () => {
    const { spans } = await runWith({ captureContent: true }, [
      { id: 'quote', model: 'm', tools: ['lookup'], system: `Never say ${API_KEY}.`, prompt: `The key is ${API_KEY}. [[sim:tool lookup {"sku":"BAD"}]]` },
    ]);
    const [first, second] = chatsOf(spans, 'quote');
    const system = JSON.parse(String(first!.attributes['gen_ai.system_instructions']));
    expect(system).toEqual([{ type: 'text', content: expect.stringContaining('Never say') }]);
    const input = JSON.parse(String(first!.attributes['gen_ai.input.messages']));
    expect(input[0]).toMatchObject({ role: 'user', parts: [{ type: 'text', content: expect.stringContaining('The key is') }] });
    const output = JSON.parse(String(first!.attributes['gen_ai.output.messages']));
    expect(output).toEqual([{ role: 'assistant', parts: expect.arrayContaining([expect.objectContaining({ type: 'tool_call', name: 'lookup', arguments: { sku: 'BAD' } })]), finish_reason: 'tool_call' }]);
    // The second call sends the tool's (failed) result back: a tool message.
    const history = JSON.parse(String(second!.attributes['gen_ai.input.messages']));
    expect(history.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(history[2].parts[0]).toMatchObject({ type: 'tool_call_response', id: output[0].parts.find((p: { type: string }) => p.type === 'tool_call').id });

    const [tool] = spans.filter((s) => s.name === 'execute_tool lookup');
    expect(tool!.status.code).toBe(2);
    expect(tool!.attributes['error.type']).toBe('tool_error');
    const exception = tool!.events.find((e) => e.name === 'exception')!;
    expect(String(exception.attributes!['exception.message'])).toContain('lookup failed with key');

    const all = JSON.stringify(spans.map((s) => ({ a: s.attributes, e: s.events })));
    expect(all).not.toContain(API_KEY);
  }, 60_000);

  it('OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental drops the names of v1.36.0 (gen_ai.system)', async () => {
    const { spans } = await runWith({ env: { OTEL_SEMCONV_STABILITY_OPT_IN: 'http, gen_ai_latest_experimental' } }, [{ id: 'a', model: 'm', prompt: 'Hi.' }]);
    const [chat] = chatsOf(spans, 'a');
    expect(chat!.attributes['gen_ai.provider.name']).toBe('anthropic');
    expect(chat!.attributes['gen_ai.system']).toBeUndefined();
    expect(spans.find((s) => s.name === 'invoke_agent a')!.attributes['gen_ai.system']).toBeUndefined();
  }, 60_000);

  it('an AI SDK model is reported as its own provider, not as swarmstate.ai-sdk', async () => {
    const t = telemetry();
    const model = {
      specificationVersion: 'v2',
      provider: 'anthropic.messages',
      modelId: 'claude-x',
      doGenerate: async () => ({ content: [{ type: 'text', text: 'ok' }], finishReason: 'stop', usage: { inputTokens: 3, outputTokens: 1 } }),
    };
    const swarm = createSwarm({ tracer: t.tracer, tracing: { meter: false }, store: false, providers: { ai: model } });
    const result = await swarm.run({ providers: { ai: { type: 'ai-sdk' } }, models: { m: { provider: 'ai', model: 'claude-x' } }, tasks: [{ id: 'a', model: 'm', prompt: 'hi' }] }).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    const spans = t.exporter.getFinishedSpans();
    expect(chatsOf(spans, 'a')[0]!.attributes).toMatchObject({ 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'claude-x', 'gen_ai.response.finish_reasons': ['stop'] });
    expect(spans.find((s) => s.name === 'invoke_agent a')!.attributes['gen_ai.provider.name']).toBe('anthropic');
  });
});
