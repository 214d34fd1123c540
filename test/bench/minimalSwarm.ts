/**
 * The minimal actor-per-agent program: what anyone writing "a supervisor actor spawns an actor
 * per sub-agent" on XState has to pay for the scheduler bench's run, and nothing more. It takes
 * the same plan (plans.ts layeredPlan: the DAG, maxInFlight 50) and runs it so:
 *
 * - the supervisor reads the plan into its book (dependency counts, dependents, a ready list) and
 *   spawns an agent actor per ready task, at most `maxInFlight` at a time;
 * - the agent asks the key actor for a grant (`GRANT`), which answers it (`GRANTED`);
 * - the agent makes an instant call (it resolves in a microtask, as the bench's scripted
 *   provider) and tells the supervisor `DONE` with the text;
 * - the supervisor keeps the text, stops the agent, marks its dependents and spawns the next
 *   ready tasks.
 *
 * Five events and one spawned actor per task (the agent's init, `GRANT`, `GRANTED`, the reply,
 * `DONE`): no groups, no pool, no breaker, no release, no journal, no retries, no checks. Agent
 * ids are slots reused, as the runtime's and the floor's (floor.ts: a new id per spawn gives
 * XState's children map a new object shape each time, which made the floor 1.5× dearer): a
 * baseline that did not would flatter the runtime.
 */
import { assign, createActor, enqueueActions, sendParent, sendTo, setup, spawnChild, type AnyActorRef } from 'xstate';
import type { layeredPlan } from './plans.js';

type Plan = ReturnType<typeof layeredPlan>;

/** The instant call: resolves in a microtask. */
const call = (prompt: string): Promise<string> => Promise.resolve(prompt.length > 0 ? 'ok' : '');

const key = setup({ types: {} as { context: { granted: number }; events: { type: 'GRANT'; replyTo: AnyActorRef } } }).createMachine({
  id: 'key',
  context: { granted: 0 },
  on: {
    GRANT: { actions: [assign({ granted: ({ context }) => context.granted + 1 }), sendTo(({ event }) => event.replyTo, { type: 'GRANTED' })] },
  },
});

type AgentInput = { task: number; prompt: string };
const agent = setup({
  types: {} as { input: AgentInput; context: AgentInput; events: { type: 'GRANTED' } | { type: 'REPLY'; text: string } },
}).createMachine({
  id: 'agent',
  context: ({ input }) => input,
  initial: 'asking',
  states: {
    asking: {
      entry: sendTo(({ system }) => system.get('key'), ({ self }) => ({ type: 'GRANT', replyTo: self })),
      on: { GRANTED: 'calling' },
    },
    calling: {
      entry: ({ context, self }) => void call(context.prompt).then((text) => self.send({ type: 'REPLY', text })),
      on: { REPLY: { actions: sendParent(({ context, event }) => ({ type: 'DONE', task: context.task, text: event.text })) } },
    },
  },
});

/** The supervisor's book, held by reference in its context (as the runtime's run table). */
interface Book {
  prompts: string[];
  /** Dependencies not yet done, per task. */
  waiting: Int32Array;
  dependents: number[][];
  ready: number[];
  /** The agent (its slot) of each task in flight. */
  slotOf: Int32Array;
  free: number[];
  slots: number;
  inFlight: number;
  maxInFlight: number;
  results: Array<string | undefined>;
  done: number;
}

function bookOf(plan: Plan): Book {
  const n = plan.tasks.length;
  const index = new Map(plan.tasks.map((t, i) => [t.id, i]));
  const waiting = new Int32Array(n);
  const dependents: number[][] = Array.from({ length: n }, () => []);
  const ready: number[] = [];
  plan.tasks.forEach((t, i) => {
    waiting[i] = t.deps.length;
    for (const d of t.deps) dependents[index.get(d)!]!.push(i);
    if (t.deps.length === 0) ready.push(i);
  });
  ready.reverse(); // popped from the end: the plan's order
  return { prompts: plan.tasks.map((t) => t.prompt), waiting, dependents, ready, slotOf: new Int32Array(n), free: [], slots: 0, inFlight: 0, maxInFlight: plan.defaults.maxInFlight, results: new Array(n), done: 0 };
}

type SupervisorEvent = { type: 'DONE'; task: number; text: string };

const supervisor = setup({
  types: {} as { input: { plan: Plan; finished: (results: Array<string | undefined>) => void }; context: { book: Book; finished: (results: Array<string | undefined>) => void }; events: SupervisorEvent },
  actors: { key, agent },
  actions: {
    spawnReady: enqueueActions(({ context: { book }, enqueue }) => {
      while (book.inFlight < book.maxInFlight && book.ready.length > 0) {
        const task = book.ready.pop()!;
        const slot = book.free.pop() ?? book.slots++;
        book.slotOf[task] = slot;
        book.inFlight++;
        enqueue.spawnChild('agent', { id: `agent:${slot}`, input: { task, prompt: book.prompts[task]! } });
      }
    }),
  },
}).createMachine({
  id: 'supervisor',
  context: ({ input }) => ({ book: bookOf(input.plan), finished: input.finished }),
  // The key first: the agents spawned next ask it for their grants as they start.
  entry: [spawnChild('key', { id: 'key', systemId: 'key' }), 'spawnReady'],
  on: {
    DONE: {
      actions: [
        enqueueActions(({ context: { book, finished }, enqueue, event }) => {
          const slot = book.slotOf[event.task]!;
          book.results[event.task] = event.text;
          book.inFlight--;
          book.done++;
          book.free.push(slot);
          enqueue.stopChild(`agent:${slot}`);
          for (const next of book.dependents[event.task]!) if (--book.waiting[next]! === 0) book.ready.push(next);
          if (book.done === book.results.length) enqueue(() => finished(book.results));
        }),
        'spawnReady',
      ],
    },
  },
});

/** Runs the plan's tasks through the minimal program; resolves with every task's text. */
export function runMinimalSwarm(plan: Plan, inspect?: (event: unknown) => void): Promise<Array<string | undefined>> {
  return new Promise((resolve) => {
    const actor = createActor(supervisor, {
      input: {
        plan,
        finished: (results) => {
          queueMicrotask(() => actor.stop());
          resolve(results);
        },
      },
      ...(inspect ? { inspect } : {}),
    });
    actor.start();
  });
}

/**
 * CPU µs per task of the minimal program on `plan(tasks)`, measured as the runtime's run is
 * (measure.ts, scheduler.ts): one run after a 200-task warm-up, the plan made before the clock
 * starts. (A best of several runs after a longer warm-up would leave out the compiler's work on
 * its first big run, which the runtime's figure counts: about 1.5× cheaper, and not comparable.)
 */
export async function minimalCpuUs(plan: (tasks: number) => Plan, tasks: number): Promise<number> {
  await runMinimalSwarm(plan(200));
  const p = plan(tasks);
  const c0 = process.cpuUsage();
  const results = await runMinimalSwarm(p);
  const d = process.cpuUsage(c0);
  if (results.length !== tasks || results.some((r) => r !== 'ok')) throw new Error('the minimal program left a task undone');
  return (d.user + d.system) / tasks;
}
