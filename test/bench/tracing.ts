/**
 * Tracing overhead, two ways. Prints one JSON line.
 *   node --import tsx test/bench/tracing.ts [tasks] [rounds]
 *
 * 1. End to end: the scheduler benchmark's layered DAG on an instant in-process provider (all
 *    the time measured is the runtime's own), with tracing off (`tracer: false`), the default
 *    (the global `@opentelemetry/api` tracer with no SDK: a no-op), and an SDK recording every
 *    span (BatchSpanProcessor into an InMemorySpanExporter). Modes alternate in one process, `rounds` times each; CPU
 *    time of the process per task (less disturbed than wall time by other processes on a shared
 *    machine), median and best.
 * 2. Isolated: one run's event stream recorded, then replayed through the run tracer alone, so
 *    its own cost per task is measured without the runtime's noise around it.
 */
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import type { RunEvent } from '../../machines/protocol.js';
import { createScriptedProvider, createSwarm, parsePlan, type SwarmOptions } from '../../src/index.js';
import { RunTracer } from '../../src/telemetry.js';
import { layeredPlan } from './plans.js';

const n = Number(process.argv[2] ?? 2000);
const rounds = Number(process.argv[3] ?? 7);
const exporter = new InMemorySpanExporter();
// Batched, as an application exports (NodeSDK's default), with a queue that holds a whole run.
const sdk = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: 65_536, maxExportBatchSize: 512 })] });
const sdkTracer = sdk.getTracer('bench');
const modes: Record<string, Pick<SwarmOptions, 'tracer'>> = { off: { tracer: false }, noop: {}, sdk: { tracer: sdkTracer } };

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function once(tasks: number, options: Pick<SwarmOptions, 'tracer'>, events?: { event: RunEvent; at: number }[]): Promise<number> {
  const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => 'ok' }) }, store: false, ...options });
  const run = swarm.run(layeredPlan(tasks));
  if (events) run.events.on('*', (_type, e) => events.push({ event: e as RunEvent, at: (e as { at: number }).at }));
  const t0 = cpuMs();
  const result = await run.result;
  const ms = cpuMs() - t0;
  await swarm.close();
  if (result.totals.completed !== tasks) throw new Error(`only ${result.totals.completed} of ${tasks} tasks completed`);
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const stats = (times: Record<string, number[]>) => ({
  median: Object.fromEntries(Object.entries(times).map(([m, xs]) => [m, median(xs)])),
  best: Object.fromEntries(Object.entries(times).map(([m, xs]) => [m, Math.min(...xs)])),
});

for (const options of Object.values(modes)) await once(200, options); // JIT warm-up of every path
const times: Record<string, number[]> = { off: [], noop: [], sdk: [] };
let spans = 0;
for (let r = 0; r < rounds; r++) {
  for (const [mode, options] of Object.entries(modes)) {
    exporter.reset();
    times[mode]!.push(((await once(n, options)) * 1000) / n);
    if (mode === 'sdk') {
      await sdk.forceFlush();
      spans = exporter.getFinishedSpans().length;
    }
  }
}
const e2e = stats(times);

// Isolated: the tracer alone over a recorded stream.
const events: { event: RunEvent; at: number }[] = [];
await once(n, { tracer: false }, events);
const plan = parsePlan(layeredPlan(n));
/** The tracer over the stream, and the export of what it made (queued spans flushed to the exporter). */
const replay = async (tracer: ReturnType<typeof trace.getTracer>) => {
  const t0 = performance.now();
  const rt = new RunTracer(tracer, 'bench', plan);
  for (const { event, at } of events) rt.record(event, at);
  rt.close(events.at(-1)!.at);
  await sdk.forceFlush();
  const us = ((performance.now() - t0) * 1000) / n;
  exporter.reset();
  return us;
};
const replayTimes: Record<string, number[]> = { noop: [], sdk: [] };
// The SDK's code takes several replays to be compiled: warm both paths up first.
for (let r = 0; r < 8; r++) {
  await replay(trace.getTracer('bench'));
  await replay(sdkTracer);
}
for (let r = 0; r < 15; r++) {
  replayTimes.noop!.push(await replay(trace.getTracer('bench')));
  replayTimes.sdk!.push(await replay(sdkTracer));
}
const isolated = stats(replayTimes);

console.log(JSON.stringify({
  tasks: n,
  rounds,
  cpuUsPerTask: e2e.median,
  bestCpuUsPerTask: e2e.best,
  runs: times,
  spansPerRun: spans,
  noopRatio: e2e.median.noop! / e2e.median.off!,
  sdkRatio: e2e.median.sdk! / e2e.median.off!,
  tracerUsPerTask: isolated.median,
  tracerBestUsPerTask: isolated.best,
  // The tracer's own cost over the runtime's cost per task (medians).
  isolatedSdkShare: isolated.median.sdk! / e2e.median.off!,
  isolatedNoopShare: isolated.median.noop! / e2e.median.off!,
}));
