/**
 * What iterating a run's events costs. Prints one JSON line.
 *   node --import tsx test/bench/iterate.ts [tasks] [rounds]
 *
 * The scheduler benchmark's layered DAG on the embedded simulator (real HTTP over loopback,
 * model `instant`), no journal, in three modes alternating in one process: `none` (nobody reads
 * the events: the handle still keeps them, for an iterator made later), `iterator` (a
 * `for await (const event of run)` from the start) and `listener` (`run.events.on('*')`, for
 * comparison). Per mode: events per second of wall time, and CPU µs of the process per event
 * (less disturbed than wall time by other processes on a shared machine), median and best of the
 * rounds. Then the log alone, without the runtime's noise around it: ns per event to keep a
 * million events nobody reads, and to keep and hand them to one `for await` reader.
 */
import type { RunEvent } from '../../machines/protocol.js';
import { createSwarm } from '../../src/index.js';
import { EventLog } from '../../src/run/eventStream.js';
import { layeredPlan } from './plans.js';

const n = Number(process.argv[2] ?? 1000);
const rounds = Number(process.argv[3] ?? 7);
type Mode = 'none' | 'iterator' | 'listener';

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function once(tasks: number, mode: Mode): Promise<{ wallMs: number; cpuMs: number; events: number }> {
  const swarm = createSwarm({ store: false, tracer: false });
  const c0 = cpuMs();
  const t0 = performance.now();
  const run = swarm.run(layeredPlan(tasks));
  let events = 0;
  if (mode === 'listener') run.events.on('*', () => events++);
  if (mode === 'iterator') for await (const _ of run) events++;
  const result = await run.result;
  const wallMs = performance.now() - t0;
  const cpu = cpuMs() - c0;
  // Counted after the clock stopped: what `none` kept (and would give an iterator made now).
  if (mode === 'none' && 'stream' in run) for await (const _ of run.stream()) events++;
  await swarm.close();
  if (result.totals.completed !== tasks) throw new Error(`only ${result.totals.completed} of ${tasks} tasks completed`);
  return { wallMs, cpuMs: cpu, events };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const modes: Mode[] = ['none', 'iterator', 'listener'];
for (const mode of modes) await once(200, mode); // JIT warm-up of every path
const perSec: Record<string, number[]> = { none: [], iterator: [], listener: [] };
const cpuUs: Record<string, number[]> = { none: [], iterator: [], listener: [] };
let events = 0;
for (let r = 0; r < rounds; r++) {
  for (const mode of modes) {
    const m = await once(n, mode);
    events = m.events;
    perSec[mode]!.push((m.events * 1000) / m.wallMs);
    cpuUs[mode]!.push((m.cpuMs * 1000) / m.events);
  }
}
/** ns per event through a log of `count` events: kept only, or kept and read by one iterator as they come. */
async function logAlone(count: number, read: boolean): Promise<number> {
  const event: RunEvent = { type: 'task:queued', taskId: 't1' };
  const log = new EventLog<RunEvent>('bench');
  const it = read ? log.stream() : undefined;
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const next = it?.next();
    log.push(event, i);
    if (next) await next;
  }
  return ((performance.now() - t0) * 1e6) / count;
}
await logAlone(100_000, false);
await logAlone(100_000, true);
const alone = { keptNs: 0, readNs: 0 };
const keptRuns: number[] = [];
const readRuns: number[] = [];
for (let r = 0; r < 5; r++) {
  keptRuns.push(await logAlone(1_000_000, false));
  readRuns.push(await logAlone(1_000_000, true));
}
alone.keptNs = median(keptRuns);
alone.readNs = median(readRuns);
const round = (x: number, d = 1) => Number(x.toFixed(d));
console.log(
  JSON.stringify({
    tasks: n,
    rounds,
    eventsPerRun: events,
    eventsPerSecond: Object.fromEntries(modes.map((m) => [m, round(median(perSec[m]!), 0)])),
    eventsPerSecondBest: Object.fromEntries(modes.map((m) => [m, round(Math.max(...perSec[m]!), 0)])),
    cpuUsPerEvent: Object.fromEntries(modes.map((m) => [m, round(median(cpuUs[m]!), 2)])),
    cpuUsPerEventBest: Object.fromEntries(modes.map((m) => [m, round(Math.min(...cpuUs[m]!), 2)])),
    logAloneNsPerEvent: { kept: round(alone.keptNs), keptAndRead: round(alone.readNs) },
  }),
);
