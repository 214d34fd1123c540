/**
 * Scheduler overhead: a layered DAG on an instant in-process provider, so all the time measured
 * is the runtime's own (actors, events, leases, bookkeeping). Prints one JSON line.
 *   node --import tsx test/bench/scheduler.ts <tasks> [memory|sqlite]
 * The journal: `memory` (default: the runtime's own overhead) or `sqlite` (a fresh file in a
 * temporary folder, as a durable run writes it).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { layeredPlan } from './plans.js';

const journal = process.argv[3] ?? 'memory';
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-bench-'));
let runs = 0;

async function once(n: number) {
  const provider = createScriptedProvider({ reply: () => 'ok' });
  const store = journal === 'sqlite' ? join(dir, `runs-${runs++}.db`) : journal === 'none' ? false : 'memory';
  const swarm = createSwarm({ providers: { p: provider }, store });
  const plan = layeredPlan(n);
  const t0 = performance.now();
  const result = await swarm.run(plan).result;
  const ms = performance.now() - t0;
  await swarm.close();
  if (result.totals.completed !== n) throw new Error(`only ${result.totals.completed} of ${n} tasks completed`);
  return ms;
}

const n = Number(process.argv[2] ?? 10_000);
await once(200); // JIT warm-up, so the sizes compare the runtime, not the compiler
const ms = await once(n);
const maxRssMb = process.resourceUsage().maxRSS / 1024;
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ tasks: n, ms, usPerTask: (ms * 1000) / n, tasksPerSec: n / (ms / 1000), maxRssMb, journal }));
