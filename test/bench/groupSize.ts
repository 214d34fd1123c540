/**
 * What a group size costs per task in XState alone (machines/supervisor/crew.ts AGENTS_PER_GROUP):
 * one agent stopped and one spawned under a slot id in a group of k agents, while `g` other actors
 * of the same system each hold a scheduled event (the other groups' deadline timers). A bigger
 * group copies a bigger children map on every spawn and stop; more groups make every actor stop
 * scan more scheduled events (XState's scheduler.cancelAll). g is ceil(inFlight / k) for 50 and
 * 3,000 agents in flight. Interleaved, five rounds, min and median CPU µs per spawn and stop.
 *   node --import tsx test/bench/groupSize.ts
 */
import { createActor, createMachine, enqueueActions, setup } from 'xstate';

type Fill = { type: 'FILL'; k: number; g: number };
type Cycle = { type: 'CYCLE'; i: number };

const agent = createMachine({ id: 'agent', initial: 'a', states: { a: {} } });
const timer = createMachine({ id: 'timer', initial: 'a', states: { a: { after: { 600_000: 'b' } }, b: {} } });

const timers = setup({ types: {} as { events: Fill | Cycle }, actors: { timer } }).createMachine({
  on: { FILL: { actions: enqueueActions(({ enqueue, event }) => { for (let i = 0; i < (event as Fill).g; i++) enqueue.spawnChild('timer', { id: `t:${i}` }); }) } },
});
const group = setup({ types: {} as { events: Fill | Cycle }, actors: { agent } }).createMachine({
  on: {
    FILL: { actions: enqueueActions(({ enqueue, event }) => { for (let i = 0; i < (event as Fill).k; i++) enqueue.spawnChild('agent', { id: `agent:${i}` }); }) },
    CYCLE: {
      actions: enqueueActions(({ enqueue, event }) => {
        const id = `agent:${(event as Cycle).i}`;
        enqueue.stopChild(id);
        enqueue.spawnChild('agent', { id });
      }),
    },
  },
});
const system = setup({ types: {} as { events: Fill | Cycle }, actors: { group, timers } }).createMachine({
  invoke: [{ src: 'group', id: 'group' }, { src: 'timers', id: 'timers' }],
  on: {
    FILL: { actions: enqueueActions(({ enqueue, event }) => { enqueue.sendTo('group', event); enqueue.sendTo('timers', event); }) },
    CYCLE: { actions: enqueueActions(({ enqueue, event }) => enqueue.sendTo('group', event)) },
  },
});

function cycleCpuUs(k: number, g: number, reps: number): number {
  const actor = createActor(system).start();
  actor.send({ type: 'FILL', k, g });
  const c0 = process.cpuUsage();
  for (let r = 0; r < reps; r++) actor.send({ type: 'CYCLE', i: r % k });
  const d = process.cpuUsage(c0);
  actor.stop();
  return (d.user + d.system) / reps;
}

const cases = [50, 3_000].flatMap((inFlight) => [8, 16, 32].map((k) => ({ inFlight, k, g: Math.ceil(inFlight / k) })));
for (const c of cases) cycleCpuUs(c.k, c.g, 10_000);
const runs = new Map<(typeof cases)[number], number[]>(cases.map((c) => [c, []]));
for (let round = 0; round < 5; round++) for (const c of cases) runs.get(c)!.push(cycleCpuUs(c.k, c.g, 10_000));
for (const [c, xs] of runs) {
  xs.sort((a, b) => a - b);
  console.log(`${c.inFlight} in flight, groups of ${c.k} (${c.g} timers): min ${xs[0]!.toFixed(1)}, median ${xs[2]!.toFixed(1)} µs per spawn and stop`);
}
