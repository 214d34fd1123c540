/**
 * XState's own floor under the scheduler: the message pattern of one task in a run, played by
 * machines that do nothing else (no bookkeeping, no journal, no checks). Whatever the runtime
 * does per task costs at least this, so a runtime "faster" than the floor would mean the floor no
 * longer matches the runtime's pattern (test/run/floor.test.ts keeps the two equal).
 *
 * The pattern, as in a run (docs/architecture.md, "One model call"): the supervisor sends its
 * group SPAWN; the group spawns the agent (its init); the agent sends the pool LEASE.REQUEST
 * (the route's breaker is closed and clean, so the pool does not hand it over), which sends the
 * key GRANT; the key answers the agent (LEASE.GRANTED); the call resolves in a microtask
 * (MODEL.REPLY); the agent sends the pool LEASE.RELEASE (passed to the key as KEY.RELEASE; a
 * success changes nothing at a clean breaker, so the breaker hears nothing), and ends; its group
 * gets the done event, stops it and tells the supervisor AGENT.ENDED, which starts the next task
 * in that group: 10 messages. Groups of at most AGENTS_PER_GROUP agents, as the runtime's.
 */
import { assign, createActor, enqueueActions, sendTo, setup, type AnyActorRef } from 'xstate';
import { AGENTS_PER_GROUP } from '../../machines/supervisor/crew.js';

const GROUP = AGENTS_PER_GROUP;

type Reply = { replyTo: AnyActorRef };

const key = setup({ types: {} as { events: ({ type: 'KEY.GRANT' } & Reply) | { type: 'KEY.RELEASE' } } }).createMachine({
  id: 'key',
  context: { out: 0 },
  on: {
    'KEY.GRANT': { actions: [assign({ out: ({ context }) => context.out + 1 }), sendTo(({ event }) => event.replyTo, { type: 'LEASE.GRANTED' })] },
    'KEY.RELEASE': { actions: assign({ out: ({ context }) => context.out - 1 }) },
  },
});

const pool = setup({ types: {} as { events: ({ type: 'LEASE.REQUEST' } & Reply) | { type: 'LEASE.RELEASE' } }, actors: { key } }).createMachine({
  id: 'pool',
  context: { requests: 0 },
  invoke: { src: 'key', id: 'key' },
  on: {
    'LEASE.REQUEST': {
      actions: [assign({ requests: ({ context }) => context.requests + 1 }), sendTo('key', ({ event }) => ({ type: 'KEY.GRANT', replyTo: event.replyTo }))],
    },
    'LEASE.RELEASE': { actions: sendTo('key', { type: 'KEY.RELEASE' }) },
  },
});

const agent = setup({ types: {} as { input: { task: number }; context: { task: number; calls: number }; events: { type: 'LEASE.GRANTED' } | { type: 'MODEL.REPLY' } } }).createMachine({
  id: 'agent',
  context: ({ input }) => ({ task: input.task, calls: 0 }),
  initial: 'lease',
  states: {
    lease: {
      entry: sendTo(({ system }) => system.get('pool'), ({ self }) => ({ type: 'LEASE.REQUEST', replyTo: self })),
      on: { 'LEASE.GRANTED': { target: 'running', actions: assign({ calls: ({ context }) => context.calls + 1 }) } },
    },
    running: {
      // An instant model call: it resolves in a microtask, as the scheduler bench's provider does.
      entry: ({ self }) => void Promise.resolve().then(() => self.send({ type: 'MODEL.REPLY' })),
      on: {
        'MODEL.REPLY': {
          target: 'done',
          actions: sendTo(({ system }) => system.get('pool'), { type: 'LEASE.RELEASE' }),
        },
      },
    },
    done: { type: 'final' },
  },
  output: ({ context }) => ({ task: context.task }),
});

const group = setup({ types: {} as { input: { group: number }; context: { group: number; free: number[]; size: number } }, actors: { agent } }).createMachine({
  id: 'group',
  // The free slots are held by reference, as the runtime's AgentSlots.
  context: ({ input }) => ({ group: input.group, free: [], size: 0 }),
  on: {
    // Agent ids are slots reused within the group, as the runtime's (machines/slots.ts): a new id
    // per agent would give XState's children map a new object shape per spawn, a cost the runtime
    // does not pay (it made this floor about 1.5× dearer).
    SPAWN: {
      actions: enqueueActions(({ context, enqueue, event }) => {
        const task = (event as unknown as { task: number }).task;
        enqueue.spawnChild('agent', { id: `agent:${context.free.pop() ?? context.size++}`, input: { task } });
      }),
    },
    'xstate.done.actor.*': {
      actions: enqueueActions(({ context, enqueue, event }) => {
        const actorId = (event as unknown as { actorId: string }).actorId;
        context.free.push(Number(actorId.slice('agent:'.length)));
        enqueue.stopChild(actorId);
        enqueue.sendParent({ type: 'AGENT.ENDED', group: context.group });
      }),
    },
  },
});

/** Runs `tasks` tasks through the pattern, `inFlight` at a time; resolves when every one has ended. */
export function runFloor(tasks: number, inFlight: number, inspect?: (event: unknown) => void): Promise<void> {
  const groups = Math.ceil(inFlight / GROUP);
  return new Promise((resolve) => {
    const supervisor = setup({ actors: { pool, group } }).createMachine({
      id: 'supervisor',
      context: { next: Math.min(inFlight, tasks), ended: 0 },
      invoke: [
        { src: 'pool', id: 'pool', systemId: 'pool' },
        ...Array.from({ length: groups }, (_, g) => ({ src: 'group' as const, id: `group:${g}`, input: { group: g } })),
      ],
      entry: enqueueActions(({ enqueue }) => {
        for (let task = 0; task < Math.min(inFlight, tasks); task++) enqueue.sendTo(`group:${task % groups}`, { type: 'SPAWN', task });
      }),
      on: {
        'AGENT.ENDED': {
          actions: enqueueActions(({ context, enqueue, event }) => {
            const ended = context.ended + 1;
            const more = context.next < tasks;
            enqueue.assign({ ended, next: context.next + (more ? 1 : 0) });
            if (more) enqueue.sendTo(`group:${(event as unknown as { group: number }).group}`, { type: 'SPAWN', task: context.next });
            if (ended === tasks) enqueue(() => resolve());
          }),
        },
      },
    });
    createActor(supervisor, inspect ? { inspect } : {}).start();
  });
}

/** CPU µs per task of the floor (the fastest of `rounds` runs of `tasks` at `inFlight`, after a warm-up). */
export async function floorCpuUs(tasks: number, inFlight: number, rounds = 3): Promise<number> {
  await runFloor(Math.min(tasks, 2_000), inFlight);
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < rounds; i++) {
    const c0 = process.cpuUsage();
    await runFloor(tasks, inFlight);
    const d = process.cpuUsage(c0);
    best = Math.min(best, (d.user + d.system) / tasks);
  }
  return best;
}
