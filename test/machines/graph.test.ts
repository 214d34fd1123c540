/**
 * The machines whose bookkeeping is a mutable object held by reference in context (the
 * supervisor's RunTable, the pool's queue, the tool bus's ToolBook, a group's agents), reached by live
 * actors: every state of the supervisor, the agents' group and the pool, and every transition of the tool bus.
 *
 * Why not @xstate/graph here: its adjacency walk applies every event to every snapshot it finds,
 * and those snapshots share the one bookkeeping object, so one branch's CANCEL would cancel the
 * tasks of every other branch (and getPathsFromEvents builds its default start state without the
 * input: xstate-graph.cjs.js createDefaultMachineOptions). The key, breaker and agent machines
 * keep immutable context and are walked with getShortestPaths (key.test.ts, breaker.test.ts,
 * agentGraph.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, fromPromise, setup, SimulatedClock } from 'xstate';
import type { AgentInput, agentMachine } from '../../machines/agent/index.js';
import { groupMachine } from '../../machines/supervisor/group.machine.js';
import { poolMachine } from '../../machines/pool.machine.js';
import { ZERO_USAGE, type BusTool, type ToolExecInput } from '../../machines/protocol.js';
import type { SupervisedTask } from '../../machines/tasks/types.js';
import { supervisorMachine, type SupervisorInput } from '../../machines/supervisor/machine.js';
import { toolBusMachine, type ToolBusInput } from '../../machines/toolBus.machine.js';
import { advanceClock, pendingTimers } from '../helpers/clock.js';

const task: SupervisedTask = {
  id: 'a', deps: [], priority: 0, rank: 1, modelName: 'fast', provider: 'p', model: 'm', maxTokens: 10,
  prompt: 'x', tools: [], maxTurns: 2, maxRetries: 0, timeoutMs: 1000,
};
const input: SupervisorInput = {
  runId: 'r', tasks: [task], providers: [{ name: 'p', keys: [{ keyId: 'p:k', limits: {} }] }], routes: [{ route: 'p/m' }],
  toolBus: { tools: [] }, maxInFlight: 1, onFailure: 'continue', backoff: { baseMs: 1, maxMs: 2 }, seed: 0,
};

/** An agent that completes after 10 ms of simulated time unless cancelled first. */
const slowAgent = setup({
  types: {} as { input: { taskId: string; attempt: number }; context: { taskId: string; attempt: number; cancelled: boolean } },
}).createMachine({
  context: ({ input }) => ({ ...input, cancelled: false }),
  // Active from its spawn, as the real agent is (nobody sends it START).
  initial: 'busy',
  states: {
    busy: { after: { 10: 'done' }, on: { CANCEL: { target: 'cancelled', actions: assign({ cancelled: true }) } } },
    done: { type: 'final' },
    cancelled: { type: 'final' },
  },
  output: ({ context }) => ({
    taskId: context.taskId, attempt: context.attempt, usage: ZERO_USAGE, requests: 1, retries: 0, turns: 1, messages: [],
    ...(context.cancelled ? { status: 'cancelled' as const } : { status: 'completed' as const, output: 'ok' }),
  }),
}) as unknown as typeof agentMachine;

function supervisor() {
  const clock = new SimulatedClock();
  const actor = createActor(supervisorMachine.provide({ actors: { group: groupMachine.provide({ actors: { agent: slowAgent } }) } }), { input, clock }).start();
  const seen = new Set<string>([String(actor.getSnapshot().value)]);
  actor.subscribe((s) => seen.add(String(s.value)));
  return { actor, clock, seen };
}

describe('state reachability (machines with mutable bookkeeping)', () => {
  it('supervisor: running -> closing -> finished when every task is final', () => {
    const { actor, clock, seen } = supervisor();
    clock.increment(10);
    expect([...seen]).toEqual(['running', 'closing', 'finished']);
    expect(actor.getSnapshot().output!.status).toBe('completed');
  });

  it('supervisor: running -> draining (cancel with an agent in flight) -> closing -> finished', () => {
    const { actor, seen } = supervisor();
    actor.send({ type: 'CANCEL' });
    expect([...seen]).toEqual(['running', 'draining', 'closing', 'finished']);
    expect(actor.getSnapshot().output!.status).toBe('cancelled');
  });

  it('group: idle -SPAWN-> busy -its last agent ended-> idle', () => {
    const clock = new SimulatedClock();
    // The group reports to its parent (the supervisor in a run).
    const parent = setup({ actors: { group: groupMachine.provide({ actors: { agent: slowAgent } }) } }).createMachine({
      invoke: { id: 'group', src: 'group', input: { group: 0 } },
      on: { 'AGENT.ENDED': {} },
    });
    const group = createActor(parent, { clock }).start().getSnapshot().children.group!;
    const seen = [String(group.getSnapshot().value)];
    group.subscribe((s) => seen.at(-1) !== String(s.value) && seen.push(String(s.value)));
    group.send({ type: 'SPAWN', input: { taskId: 'a', attempt: 1, timeoutMs: 1000 } as AgentInput });
    clock.increment(10);
    expect(seen).toEqual(['idle', 'busy', 'idle']);
  });

  it('pool: serving, then exhausted once every key is revoked', () => {
    const parent = setup({ actors: { pool: poolMachine } }).createMachine({
      invoke: { id: 'pool', src: 'pool', input: { provider: 'p', keys: [{ keyId: 'p:k', limits: {} }] } },
    });
    const root = createActor(parent).start();
    const pool = root.getSnapshot().children.pool!;
    expect(pool.getSnapshot().value).toBe('serving');
    pool.send({ type: 'KEY.STATE', keyId: 'p:k', state: 'revoked' });
    expect(pool.getSnapshot().value).toBe('exhausted');
  });
});

// ---------------------------------------------------------------------------------------------
// The tool bus: every transition, by a breadth-first walk that replays each path on a new actor
// ---------------------------------------------------------------------------------------------

type Transition = { source: { id: string; transitions: Map<string, unknown[]>; always?: unknown[] }; eventType: string };
type Node = { id: string; transitions: Map<string, unknown[]>; always?: unknown[]; states: Record<string, Node> };

/** `<state id> <event> #<branch>`: one branch of one handler. */
function transitionKey(t: Transition): string {
  const list = t.eventType === '' ? (t.source.always ?? []) : (t.source.transitions.get(t.eventType) ?? []);
  return `${t.source.id} ${t.eventType || 'always'} #${list.indexOf(t)}`;
}

function allTransitions(node: Node): string[] {
  const keys: string[] = [];
  for (const [eventType, list] of node.transitions) list.forEach((_, i) => keys.push(`${node.id} ${eventType} #${i}`));
  (node.always ?? []).forEach((_, i) => keys.push(`${node.id} always #${i}`));
  for (const child of Object.values(node.states)) keys.push(...allTransitions(child));
  return keys;
}

const BUS_TOOLS: BusTool[] = [
  { name: 'read', server: 'fs', shareable: true, readOnly: true, batch: false },
  { name: 'write', server: 'fs', shareable: false, readOnly: false, batch: false },
];

/** What can happen to the bus next: calls from two agents, time passing, executions ending, an agent leaving. */
const STEPS = ['call read (t1)', 'same call read (t2)', 'call write (t1)', 'call unknown (t2)', 'time to the next timer', 'oldest execution succeeds', 'oldest execution fails', 't1 withdraws its calls', 'asked for its counters'] as const;
type Step = (typeof STEPS)[number];

/** Replays `path` on a new bus; returns the transitions it took and a signature of where it ended. */
async function replay(input: ToolBusInput, path: readonly Step[]): Promise<{ taken: Set<string>; signature: string }> {
  const clock = new SimulatedClock();
  const taken = new Set<string>();
  const running: { resolve: (v: string) => void; reject: (e: unknown) => void; done: boolean }[] = [];
  const executeTool = fromPromise<string, ToolExecInput>(({ signal }) => new Promise<string>((resolve, reject) => {
    const r = { resolve, reject, done: false };
    signal.addEventListener('abort', () => void (r.done = true));
    running.push(r);
  }));
  const replies = new Map<string, number>();
  const told: unknown[] = [];
  const agent = createActor(
    setup({}).createMachine({
      on: {
        'TOOL.RESULT': { actions: ({ event }) => void replies.set(event.callId, (replies.get(event.callId) ?? 0) + 1) },
        'TOOL.STATS': { actions: ({ event }) => void told.push(event.stats) },
      },
    }),
  ).start();
  let bus: ReturnType<typeof createActor<typeof toolBusMachine>> | undefined;
  bus = createActor(toolBusMachine.provide({ actors: { executeTool } }), {
    clock,
    input,
    inspect: (ev) => {
      if (ev.type === '@xstate.microstep' && ev.actorRef === bus) for (const t of ev._transitions) taken.add(transitionKey(t as unknown as Transition));
    },
  });
  bus.start();
  const calls: Record<string, string[]> = { t1: [], t2: [] };
  let n = 0;
  const call = (taskId: 't1' | 't2', name: string, args: unknown) => {
    const callId = `c${n++}`;
    calls[taskId]!.push(callId);
    bus!.send({ type: 'TOOL.CALL', callId, taskId, name, args, replyTo: agent });
  };
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  for (const step of path) {
    const oldest = running.find((r) => !r.done);
    if (step === 'call read (t1)') call('t1', 'read', { path: 'a' });
    else if (step === 'same call read (t2)') call('t2', 'read', { path: 'a' });
    else if (step === 'call write (t1)') call('t1', 'write', { path: 'b' });
    else if (step === 'call unknown (t2)') call('t2', 'nope', {});
    else if (step === 'time to the next timer') {
      const timers = [...(clock as unknown as { timeouts: Map<number, { start: number; timeout: number }> }).timeouts.values()];
      if (timers.length > 0) advanceClock(clock, Math.min(...timers.map((t) => t.start + t.timeout)));
    } else if (step === 'oldest execution succeeds' && oldest) {
      oldest.done = true;
      oldest.resolve('ok');
    } else if (step === 'oldest execution fails' && oldest) {
      oldest.done = true;
      oldest.reject(new Error('tool failed'));
    } else if (step === 't1 withdraws its calls') bus.send({ type: 'TOOL.CANCEL', taskId: 't1', callIds: calls.t1! });
    else if (step === 'asked for its counters') {
      bus.send({ type: 'TOOL.STATS.ASK', replyTo: agent });
      // The counters as they stand, a copy: the bus keeps counting in its own.
      expect(told.at(-1)).toEqual(bus.getSnapshot().context.stats);
      expect(told.at(-1)).not.toBe(bus.getSnapshot().context.stats);
    }
    await settle();
  }
  const snapshot = bus.getSnapshot();
  const signature = JSON.stringify([snapshot.value, snapshot.context.stats, running.filter((r) => !r.done).length, pendingTimers(clock)]);
  bus.stop();
  // On every path: no call is answered twice (a join, a cache hit, a deadline and a withdrawal all close it once).
  expect([...replies].filter(([, count]) => count > 1), path.join(' > ')).toEqual([]);
  return { taken, signature };
}

/** Breadth-first over paths of up to `depth` steps, extending only paths that ended somewhere new. */
async function walkBus(input: ToolBusInput, depth: number): Promise<Set<string>> {
  const taken = new Set<string>();
  const seen = new Set<string>();
  let frontier: Step[][] = [[]];
  for (let d = 0; d < depth && frontier.length > 0; d++) {
    const next: Step[][] = [];
    for (const path of frontier) {
      for (const step of STEPS) {
        const longer = [...path, step];
        const result = await replay(input, longer);
        for (const t of result.taken) taken.add(t);
        if (!seen.has(result.signature)) {
          seen.add(result.signature);
          next.push(longer);
        }
      }
    }
    frontier = next;
  }
  return taken;
}

describe('toolBus: every transition, walked', () => {
  // Why not @xstate/graph: the bus keeps its ToolBook by reference in context, so the walk's
  // snapshots would share one book. Each path is replayed on a new actor instead.
  it('takes every branch of every handler, with a batch window and without one', async () => {
    const windowed = await walkBus({ tools: BUS_TOOLS, batchWindowMs: 10, batchSize: 2, callTimeoutMs: 50 }, 5);
    const direct = await walkBus({ tools: BUS_TOOLS, batchWindowMs: 0, callTimeoutMs: 50 }, 4);
    const taken = new Set([...windowed, ...direct]);
    const all = allTransitions(toolBusMachine.root as unknown as Node);
    // A done or error event from an execution the bus no longer runs (ended by its deadline or a
    // withdrawal) cannot arrive from a live child: stopping it silences it. The branches stay as
    // a guard against an unhandled xstate.error.actor.* putting the whole bus in error.
    const defensive = ['toolBus xstate.done.actor.* #1', 'toolBus xstate.error.actor.* #1'];
    expect(all.filter((t) => !taken.has(t)).sort()).toEqual(defensive.sort());
  });
});
