/**
 * Scheduler overhead: a layered DAG on an instant in-process provider, so all the time measured
 * is the runtime's own (actors, events, leases, bookkeeping). Prints one JSON line.
 *   node --import tsx test/bench/scheduler.ts <tasks> [none|memory|sqlite]
 * The journal: `none` (`store: false`), `memory` (default: the in-memory store) or `sqlite` (a
 * fresh file in a temporary folder, as a durable run writes it).
 *
 * The same process first measures one bare XState actor's lifecycle (create, start, two events,
 * stop): absolute figures do not travel between machines, a ratio to XState's own cost does.
 * Both are measured in wall time and in CPU time of the process (on a shared machine the wall
 * time includes waiting for a core; the CPU time does not). It then measures XState's floor
 * under the scheduler (floor.ts): the same messages per task between machines that do nothing
 * else, at the same maxInFlight; and the minimal actor-per-agent program (minimalSwarm.ts) on the
 * same plan: a supervisor, an agent actor per task, a key, five events per task.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { floorCpuUs } from './floor.js';
import { bareLifecycle, modelRun } from './measure.js';
import { minimalCpuUs } from './minimalSwarm.js';
import { layeredPlan } from './plans.js';

const journal = process.argv[3] ?? 'memory';
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-bench-'));
const once = (n: number) => modelRun(n, journal, dir);

const n = Number(process.argv[2] ?? 10_000);
// Warm, then the median of five: XState's code is compiled by then, as the runtime's is below.
bareLifecycle(20_000);
const bares = [0, 1, 2, 3, 4].map(() => bareLifecycle(20_000));
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const bareUs = median(bares.map((b) => b[0]));
const bareCpuUs = median(bares.map((b) => b[1]));
await once(200); // JIT warm-up, so the sizes compare the runtime, not the compiler
const { ms, cpuMs } = await once(n);
const maxRssMb = process.resourceUsage().maxRSS / 1024;
// The same run again, warm: the first big run of a process also pays V8 for compiling the code
// it made hot and for growing the heap (about a third of its CPU here). The minimal program
// below runs warm too (XState's code compiled, the heap grown): the two are compared warm.
const warm = await once(n);
// After the runs and the first one's peak RSS: the floor at the same size and layeredPlan's
// maxInFlight (50), then the minimal program on the same plan.
const floorUs = await floorCpuUs(n, 50);
const minimalUs = await minimalCpuUs(layeredPlan, n);
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ tasks: n, ms, usPerTask: (ms * 1000) / n, tasksPerSec: n / (ms / 1000), maxRssMb, journal, bareUs, cpuUsPerTask: (cpuMs * 1000) / n, warmCpuUsPerTask: (warm.cpuMs * 1000) / n, bareCpuUs, floorCpuUs: floorUs, minimalCpuUs: minimalUs }));
