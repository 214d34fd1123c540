/**
 * What a code step (`kind: "fn"`) costs in the runtime. The scheduler benchmark's layered DAG with
 * every task a function that answers at once, against, in the same process: the same DAG of model
 * tasks on an instant in-process provider (the scheduler benchmark's run), and a plain program
 * that awaits each function as soon as its deps resolve, at most `maxInFlight` at once. After a
 * warm-up of each, three rounds alternate the three; CPU time of the process per task. Prints one
 * JSON line.
 *   node --import tsx test/bench/fnSteps.ts <tasks> [none|sqlite]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createScriptedProvider, type FnContext } from '../../src/index.js';
import { bareLifecycle, benchStore, cpuSince, modelRun, timedRun } from './measure.js';
import { layeredPlan } from './plans.js';

const IN_FLIGHT = 50;

/** A task's value: its depth in the DAG. Small, JSON, and known in advance for the last layer. */
type Depth = { depth: number; deps: number };
const step = async (deps: readonly unknown[]): Promise<Depth> => ({ depth: 1 + Math.max(0, ...deps.map((d) => (d as Depth).depth)), deps: deps.length });
const functions = { step: (ctx: FnContext) => step(Object.values(ctx.deps)) };

function fnPlan(n: number) {
  const plan = layeredPlan(n, { maxInFlight: IN_FLIGHT });
  // The plan keeps the scheduler's providers and models: a plan must have them even when no task calls a model.
  return { ...plan, tasks: plan.tasks.map(({ id, deps }) => ({ id, kind: 'fn' as const, fn: 'step', deps })) };
}

/** At most `max` calls of `fn` at once, the rest in order of arrival: what p-limit does. */
function limiter(max: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  const next = () => {
    active--;
    waiting.shift()?.();
  };
  return <T>(fn: () => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const start = () => {
        active++;
        fn().then(resolve, reject).finally(next);
      };
      if (active < max) start();
      else waiting.push(start);
    });
}

/** The peer: the same DAG as a plain program, every function awaited once its deps have resolved. */
async function plainRun(n: number) {
  const { tasks } = layeredPlan(n, { maxInFlight: IN_FLIGHT });
  const limit = limiter(IN_FLIGHT);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const done = new Map<string, Promise<Depth>>();
  for (const t of tasks) done.set(t.id, Promise.all(t.deps.map((d) => done.get(d)!)).then((deps) => limit(() => step(deps))));
  const values = await Promise.all(done.values());
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(c0);
  return { ms, cpuMs, last: values[n - 1]! };
}

const n = Number(process.argv[2] ?? 10_000);
const journal = process.argv[3] ?? 'none';
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-bench-'));
const fnRun = async (size: number) => {
  // The same provider as the model run's, so the two swarms differ only in their tasks' kind.
  const r = await timedRun({ providers: { p: createScriptedProvider({ reply: () => 'ok' }) }, functions, store: benchStore(journal, dir) }, fnPlan(size), size);
  return { ...r, last: r.result.tasks[`t${size - 1}`]!.output as Depth };
};
// Every task of layer L is at depth L + 1: the last task proves each program ran the whole DAG in order.
const layers = Math.ceil(n / 100);
const check = (who: string, last: Depth) => {
  if (last.depth !== layers) throw new Error(`${who}: the last task's depth is ${last.depth}, not ${layers}`);
};

bareLifecycle(20_000);
const bares = [0, 1, 2, 3, 4].map(() => bareLifecycle(20_000)[1]);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
// JIT warm-up of the three, so the rounds compare the programs, not the compiler (200 tasks were not enough).
const warm = Math.min(n, 2_000);
await fnRun(warm);
await modelRun(warm, journal, dir);
await plainRun(warm);
const cpu = { fn: [] as number[], model: [] as number[], plain: [] as number[] };
const wall = { fn: [] as number[], model: [] as number[], plain: [] as number[] };
const programs = {
  fn: fnRun,
  model: (size: number) => modelRun(size, journal, dir),
  plain: plainRun,
};
const order = ['fn', 'model', 'plain'] as const;
for (let round = 0; round < 3; round++) {
  // Each round starts with another program, so the garbage one leaves falls on each in turn.
  for (let i = 0; i < order.length; i++) {
    const name = order[(round + i) % order.length]!;
    const r = await programs[name](n);
    if ('last' in r) check(name, r.last as Depth);
    cpu[name].push((r.cpuMs * 1000) / n);
    wall[name].push((r.ms * 1000) / n);
  }
}
// Ratios per round (the two runs of a pair are close in time), then their median.
const ratios = (a: number[], b: number[]) => a.map((x, i) => x / b[i]!);
rmSync(dir, { recursive: true, force: true });
console.log(
  JSON.stringify({
    tasks: n,
    journal,
    fnCpuUs: median(cpu.fn),
    modelCpuUs: median(cpu.model),
    plainCpuUs: median(cpu.plain),
    fnWallUs: median(wall.fn),
    modelWallUs: median(wall.model),
    plainWallUs: median(wall.plain),
    overModel: median(ratios(cpu.fn, cpu.model)),
    overPlain: median(ratios(cpu.fn, cpu.plain)),
    wallOverModel: median(ratios(wall.fn, wall.model)),
    bareCpuUs: median(bares),
    cpu,
    wall,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  }),
);
