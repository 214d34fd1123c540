/**
 * The execute_tool spans of a trace (src/telemetryTools.ts), from run events given to a RunTracer
 * and recorded by the OpenTelemetry SDK's InMemorySpanExporter: which result ends which span when
 * the bus reports per execution (shared calls, batches), a denied call, a cached one, and the
 * spans a model call or the attempt's end closes.
 */
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../machines/protocol.js';
import { RunTracer } from '../src/telemetry.js';

/** Event times: epoch milliseconds (the SDK reads a number below its time origin as a performance.now() time). */
const T0 = 2_000_000_000_000;

function traced() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = new RunTracer(provider.getTracer('test'), 'r1', { providers: {} });
  tracer.record({ type: 'run:started', runId: 'r1', tasks: 2 }, T0);
  for (const taskId of ['a', 'b']) tracer.record({ type: 'task:started', taskId, attempt: 1, model: 'm' }, T0 + 1);
  /** Ended execute_tool spans: [task, tool, end time, error type]. */
  const tools = () =>
    exporter
      .getFinishedSpans()
      .filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool')
      .map((s) => [s.attributes['swarmstate.task.id'], s.attributes['gen_ai.tool.name'], Math.round(s.endTime[0] * 1e3 + s.endTime[1] / 1e6 - T0), s.attributes['error.type'] ?? null]);
  return { record: (event: RunEvent, at: number) => tracer.record(event, T0 + at), tools };
}

describe('execute_tool spans', () => {
  it('a result ends the oldest call of its tool, and every shared call waiting with it', () => {
    const t = traced();
    t.record({ type: 'tool:called', taskId: 'a', name: 'search', shared: false }, 10);
    t.record({ type: 'tool:called', taskId: 'b', name: 'search', shared: true }, 11);
    t.record({ type: 'tool:called', taskId: 'b', name: 'search', shared: false }, 12);
    t.record({ type: 'tool:result', name: 'search', isError: false }, 20);
    expect(t.tools()).toEqual([['a', 'search', 20, null], ['b', 'search', 20, null]]);
    t.record({ type: 'tool:result', name: 'search', isError: true, timedOut: true }, 30);
    expect(t.tools().at(-1)).toEqual(['b', 'search', 30, 'timeout']);
  });

  it('a batch\'s result ends as many calls as it ran; a cached call and a denied one end at once', () => {
    const t = traced();
    for (const taskId of ['a', 'b', 'a']) t.record({ type: 'tool:called', taskId, name: 'fetch', shared: false }, 10);
    t.record({ type: 'tool:result', name: 'fetch', isError: false, batch: 2 }, 20);
    expect(t.tools().map((s) => s[2])).toEqual([20, 20]);
    t.record({ type: 'tool:called', taskId: 'b', name: 'fetch', shared: true, cached: true }, 21);
    t.record({ type: 'tool:denied', taskId: 'b', name: 'secret', reason: 'no' }, 22);
    expect(t.tools().slice(2)).toEqual([['b', 'fetch', 21, null], ['b', 'secret', 22, 'tool_denied']]);
  });

  it('a call with no result ends when its attempt makes its next model call, or ends', () => {
    const t = traced();
    t.record({ type: 'tool:called', taskId: 'a', name: 'slow', shared: false }, 10);
    t.record({ type: 'tool:called', taskId: 'b', name: 'slow', shared: false }, 10);
    t.record({ type: 'model:request', taskId: 'a', attempt: 1, turn: 1, provider: 'p', model: 'm', keyId: 'p:k' }, 40);
    expect(t.tools()).toEqual([['a', 'slow', 40, null]]);
    // a's call is no longer open: the next result is b's.
    t.record({ type: 'tool:called', taskId: 'a', name: 'slow', shared: false }, 41);
    t.record({ type: 'tool:result', name: 'slow', isError: false }, 50);
    expect(t.tools().at(-1)).toEqual(['b', 'slow', 50, null]);
    t.record({ type: 'task:cancelled', taskId: 'a', reason: 'stop' } as RunEvent, 60);
    expect(t.tools().at(-1)).toEqual(['a', 'slow', 60, null]);
  });
});
