/**
 * A run's spans through the real OTLP HTTP exporter (`@opentelemetry/exporter-trace-otlp-http`,
 * JSON) to a collector stub on 127.0.0.1: what a backend (Jaeger, Langfuse, Phoenix) receives,
 * read off the wire, attribute by attribute against the GenAI conventions' names. No sleeps: the
 * provider is force-flushed.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startSim, type SimServer } from '../../src/index.js';

const API_KEY = 'sk-otlp-SECRET-0c9e2d55f1';

interface WireValue { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: WireValue[] } }
interface WireSpan { name: string; kind: number; traceId: string; parentSpanId?: string; attributes?: { key: string; value: WireValue }[]; status?: { code?: number }; events?: { name: string }[] }

let sim: SimServer;
let collector: Server;
let url: string;
const requests: { path: string; contentType: string | undefined; body: string }[] = [];

beforeAll(async () => {
  sim = await startSim({ seed: 5, keys: { [API_KEY]: {} } });
  collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/traces`;
});
afterAll(async () => {
  await sim.close();
  await new Promise((resolve) => collector.close(resolve));
});

/** An attribute's value as sent (OTLP JSON: typed values, 64-bit ints as strings or numbers). */
function valueOf(v: WireValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}
const attrs = (s: WireSpan) => Object.fromEntries((s.attributes ?? []).map((a) => [a.key, valueOf(a.value)]));

describe('OTLP HTTP export', () => {
  it('a collector receives the run\'s GenAI spans with the conventions\' attributes and no secret', async () => {
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url }))] });
    const swarm = createSwarm({
      tracer: provider.getTracer('otlp-test'),
      tracing: { meter: false },
      store: false,
      env: { OTLP_KEY: API_KEY },
      tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: { sku: { type: 'string' } } }, handler: async () => '12 EUR' }],
    });
    const result = await swarm.run({
      providers: { main: { type: 'openai', baseURL: `${sim.url}/v1`, keys: [{ env: 'OTLP_KEY' }] } },
      models: { m: { provider: 'main', model: 'sim-small', maxTokens: 100, temperature: 0.5 } },
      tasks: [{ id: 'q', model: 'm', tools: ['lookup'], prompt: 'Price? [[sim:tool lookup {"sku":"A1"}]]' }],
    }).result;
    await swarm.close();
    await provider.forceFlush();
    await provider.shutdown();
    expect(result.status).toBe('completed');

    const traces = requests.filter((r) => r.path === '/v1/traces');
    expect(traces.length).toBeGreaterThan(0);
    expect(traces[0]!.contentType).toContain('application/json');
    const spans: WireSpan[] = traces.flatMap((r) =>
      (JSON.parse(r.body) as { resourceSpans: { scopeSpans: { spans: WireSpan[] }[] }[] }).resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)),
    );
    const names = spans.map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['swarmstate.run', 'task q', 'invoke_agent q', 'chat sim-small', 'execute_tool lookup']));
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);

    const chats = spans.filter((s) => s.name === 'chat sim-small');
    expect(chats).toHaveLength(2);
    const simURL = new URL(sim.url);
    const a = attrs(chats[0]!);
    expect(chats[0]!.kind).toBe(3); // OTLP SPAN_KIND_CLIENT
    expect(a['gen_ai.operation.name']).toBe('chat');
    expect(a['gen_ai.provider.name']).toBe('openai');
    expect(a['gen_ai.request.model']).toBe('sim-small');
    expect(a['gen_ai.request.max_tokens']).toBe(100);
    expect(a['gen_ai.request.temperature']).toBe(0.5);
    expect(a['gen_ai.response.model']).toBe('sim-small');
    expect(a['gen_ai.response.id']).toMatch(/^chatcmpl-/);
    expect(a['gen_ai.response.finish_reasons']).toEqual(['tool_call']);
    expect(a['server.address']).toBe(simURL.hostname);
    expect(a['server.port']).toBe(Number(simURL.port));
    expect(a['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    expect(a['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    expect(String(a['gen_ai.conversation.id'])).toMatch(/\/q$/);
    expect(attrs(chats[1]!)['gen_ai.response.finish_reasons']).toEqual(['stop']);

    const tool = attrs(spans.find((s) => s.name === 'execute_tool lookup')!);
    expect(tool).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup', 'gen_ai.tool.type': 'function' });
    expect(String(tool['gen_ai.tool.call.id'])).toMatch(/\S/);
    expect(attrs(spans.find((s) => s.name === 'invoke_agent q')!)).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'sim-small' });

    expect(traces.map((r) => r.body).join('')).not.toContain(API_KEY);
  }, 60_000);
});
