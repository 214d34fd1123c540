/**
 * What the CPU benchmarks share: the process's CPU time, one bare XState actor's lifecycle (the
 * yardstick that travels between machines), and one timed run of a plan, CPU and wall.
 */
import { join } from 'node:path';
import { assign, createActor, setup } from 'xstate';
import { createScriptedProvider, createSwarm, type RunResult, type SwarmOptions } from '../../src/index.js';
import { layeredPlan } from './plans.js';

const bare = setup({}).createMachine({
  context: { n: 0 },
  initial: 'a',
  states: {
    a: { on: { GO: { target: 'b', actions: assign({ n: ({ context }) => context.n + 1 }) } } },
    b: { on: { GO: { target: 'a' } } },
  },
});

/** CPU time (user + system) of the process since `t0`, in ms. */
export const cpuSince = (t0: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1000;
};

/** µs per bare actor lifecycle (create, start, two events, stop) over `reps` actors: [wall, CPU]. */
export function bareLifecycle(reps: number): [number, number] {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) {
    const actor = createActor(bare);
    actor.start();
    actor.send({ type: 'GO' });
    actor.send({ type: 'GO' });
    actor.stop();
  }
  return [((performance.now() - t0) * 1000) / reps, (cpuSince(c0) * 1000) / reps];
}

let files = 0;
/** The journal of a benchmark run: `none` (`store: false`), `memory`, or `sqlite` (a fresh file in `dir` per run). */
export const benchStore = (journal: string, dir: string): SwarmOptions['store'] => (journal === 'sqlite' ? join(dir, `runs-${files++}.db`) : journal === 'none' ? false : 'memory');

/** Runs `plan` on a fresh swarm: wall and CPU ms of the run alone (not the swarm's creation nor close); throws unless all `n` tasks completed. */
export async function timedRun(options: SwarmOptions, plan: unknown, n: number): Promise<{ ms: number; cpuMs: number; result: RunResult }> {
  const swarm = createSwarm(options);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const result = await swarm.run(plan).result;
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(c0);
  await swarm.close();
  if (result.totals.completed !== n) throw new Error(`only ${result.totals.completed} of ${n} tasks completed`);
  return { ms, cpuMs, result };
}

/** The scheduler benchmark's run: the n-task layered DAG, every task a model call on an instant in-process provider. */
export function modelRun(n: number, journal: string, dir: string) {
  const provider = createScriptedProvider({ reply: () => 'ok' });
  return timedRun({ providers: { p: provider }, store: benchStore(journal, dir) }, layeredPlan(n), n);
}
