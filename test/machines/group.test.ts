/**
 * The agents' group actor (machines/supervisor/group.machine.ts): it keeps its agents' deadlines as data
 * with one scheduled event, tells each agent when its deadline passes, passes CANCEL on, and
 * reports each agent's end (a crash too) to its parent.
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, enqueueActions, setup, SimulatedClock, type AnyActorRef } from 'xstate';
import type { AgentInput, agentMachine } from '../../machines/agent/index.js';
import { ZERO_USAGE, type AttemptReport } from '../../machines/protocol.js';
import { Deadlines, groupMachine } from '../../machines/supervisor/group.machine.js';
import { AgentSlots } from '../../machines/slots.js';
import type { AgentEndedEvent } from '../../machines/supervisor/types.js';
import { advanceClock, pendingTimers } from '../helpers/clock.js';

/** An agent that runs until told: FINISH completes it, AGENT.TIMEOUT fails it, CANCEL cancels it, CRASH throws. */
const stubAgent = setup({
  types: {} as { input: AgentInput; context: { input: AgentInput; status: AttemptReport['status'] | null; code?: 'task_timeout' | 'cancelled' } },
  actions: {
    crash: () => {
      throw new Error('agent bug');
    },
  },
}).createMachine({
  context: ({ input }) => ({ input, status: null }),
  // Active from its spawn, as the agent is (no START).
  initial: 'active',
  states: {
    active: {
      on: {
        FINISH: { target: 'done', actions: assign({ status: 'completed' as const }) },
        'AGENT.TIMEOUT': { target: 'done', actions: assign({ status: 'failed' as const, code: 'task_timeout' as const }) },
        CANCEL: { target: 'done', actions: assign({ status: 'cancelled' as const, code: 'cancelled' as const }) },
        CRASH: { actions: 'crash' },
      },
    },
    done: { type: 'final' },
  },
  output: ({ context }): AttemptReport => ({
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    status: context.status ?? 'failed',
    ...(context.code ? { error: { code: context.code, message: context.code, retryable: context.code === 'task_timeout' } } : {}),
    usage: ZERO_USAGE,
    requests: 0,
    retries: 0,
    turns: 0,
    messages: [],
  }),
}) as unknown as typeof agentMachine;

function agentInput(taskId: string, timeoutMs: number): AgentInput {
  return {
    taskId, attempt: 1, provider: 'p', model: 'm', maxTokens: 10, priority: 0, prompt: 'x', tools: [], maxTurns: 1, retries: 0, timeoutMs,
    backoff: { baseMs: 1, maxMs: 2 }, seed: 1,
  };
}

/** A parent that spawns one group and records every AGENT.ENDED with the simulated time. */
function withGroup() {
  const clock = new SimulatedClock();
  const ended: { taskId: string; status: string; code?: string; message?: string; at: number; group: number }[] = [];
  const parent = setup({
    types: {} as { events: AgentEndedEvent | { type: 'SPAWN'; input: AgentInput } | { type: 'CANCEL' } },
    actors: { group: groupMachine.provide({ actors: { agent: stubAgent } }) },
  }).createMachine({
    entry: enqueueActions(({ enqueue }) => enqueue.spawnChild('group', { id: 'group:4', input: { group: 4 } })),
    on: {
      SPAWN: { actions: enqueueActions(({ event, enqueue }) => enqueue.sendTo('group:4', event)) },
      CANCEL: { actions: enqueueActions(({ enqueue }) => enqueue.sendTo('group:4', { type: 'CANCEL', reason: 'stop' })) },
      'AGENT.ENDED': {
        actions: ({ event }) =>
          void ended.push({ taskId: event.report.taskId, status: event.report.status, code: event.report.error?.code, message: event.report.error?.message, at: clock.now(), group: event.group }),
      },
    },
  });
  const actor = createActor(parent, { clock }).start();
  const group = actor.getSnapshot().children['group:4'] as AnyActorRef;
  const agents = () => (group.getSnapshot() as { children: Record<string, AnyActorRef> }).children;
  const agentOf = (taskId: string) => Object.values(agents()).find((a) => (a.getSnapshot() as { context: { input: AgentInput } }).context.input.taskId === taskId)!;
  const scheduled = () => Object.keys((actor.system as unknown as { getSnapshot(): { _scheduledEvents: object } }).getSnapshot()._scheduledEvents).length;
  const spawn = (taskId: string, timeoutMs: number) => actor.send({ type: 'SPAWN', input: agentInput(taskId, timeoutMs) });
  return { clock, actor, group, agents, agentOf, scheduled, spawn, ended };
}

describe('agent group', () => {
  it('fires each deadline at its simulated time with one scheduled event, re-armed when an earlier deadline arrives', () => {
    const g = withGroup();
    g.spawn('a', 1_000);
    expect(g.scheduled()).toBe(1);
    advanceClock(g.clock, 100);
    g.spawn('b', 500); // due at 600: before a's 1,000, so the one timer moves to it
    g.spawn('c', 5_000);
    expect(g.scheduled()).toBe(1);
    expect(pendingTimers(g.clock)).toBe(1);
    advanceClock(g.clock, 599);
    expect(g.ended).toEqual([]);
    advanceClock(g.clock, 600);
    expect(g.ended).toEqual([{ taskId: 'b', status: 'failed', code: 'task_timeout', message: 'task_timeout', at: 600, group: 4 }]);
    expect(g.scheduled()).toBe(1); // now armed for a
    advanceClock(g.clock, 999);
    expect(g.ended).toHaveLength(1);
    advanceClock(g.clock, 1_000);
    expect(g.ended.map((e) => [e.taskId, e.at])).toEqual([['b', 600], ['a', 1_000]]);
    advanceClock(g.clock, 5_100);
    expect(g.ended.map((e) => [e.taskId, e.at])).toEqual([['b', 600], ['a', 1_000], ['c', 5_100]]);
    // Every agent ended: no timer is left behind, and the group is idle again.
    expect(g.scheduled()).toBe(0);
    expect(g.group.getSnapshot().value).toBe('idle');
  });

  it('agents that end before their deadline leave no scheduled event behind; the timer moves to the next deadline', () => {
    const g = withGroup();
    g.spawn('a', 1_000);
    g.spawn('b', 2_000);
    expect(g.group.getSnapshot().value).toBe('busy');
    g.agentOf('a').send({ type: 'FINISH' });
    expect(g.ended.map((e) => [e.taskId, e.status])).toEqual([['a', 'completed']]);
    expect(g.scheduled()).toBe(1);
    advanceClock(g.clock, 1_999);
    expect(g.ended).toHaveLength(1); // a's deadline was withdrawn with it: nothing fired at 1,000
    g.agentOf('b').send({ type: 'FINISH' });
    expect(g.scheduled()).toBe(0);
    expect(pendingTimers(g.clock)).toBe(0);
    expect(Object.keys(g.agents())).toEqual([]); // stopped, not kept
    expect(g.group.getSnapshot().value).toBe('idle');
  });

  it('a timer left for an ended agent fires early, finds nothing due, and still fires the next deadline on time', () => {
    const g = withGroup();
    g.spawn('a', 1_000);
    g.spawn('b', 2_000);
    g.agentOf('a').send({ type: 'FINISH' });
    advanceClock(g.clock, 1_000);
    expect(g.ended.map((e) => e.taskId)).toEqual(['a']);
    expect(g.scheduled()).toBe(1); // armed for b now
    advanceClock(g.clock, 1_999);
    expect(g.ended).toHaveLength(1);
    advanceClock(g.clock, 2_000);
    expect(g.ended.map((e) => [e.taskId, e.status, e.at])).toEqual([['a', 'completed', 0], ['b', 'failed', 2_000]]);
    expect(g.scheduled()).toBe(0);
  });

  it('computes a spawn\'s deadline once: a spawn behind the timer reads the clock once (the guard reads what `book` decided)', () => {
    const g = withGroup();
    g.spawn('a', 1_000);
    const now = g.clock.now.bind(g.clock);
    let reads = 0;
    g.clock.now = () => (reads++, now());
    g.spawn('b', 5_000);
    expect(reads).toBe(1);
    g.spawn('c', 500); // due before a: the timer moves to it
    advanceClock(g.clock, 500);
    expect(g.ended.map((e) => [e.taskId, e.at])).toEqual([['c', 500]]);
  });

  it('holds a deadline of 2^31 ms or more instead of firing it after 1 ms', () => {
    const g = withGroup();
    g.spawn('a', 3_000_000_000);
    advanceClock(g.clock, 10_000);
    expect(g.ended).toEqual([]);
  });

  it('passes CANCEL on to every agent, and reuses the places of ended agents', () => {
    const g = withGroup();
    for (const id of ['a', 'b', 'c']) g.spawn(id, 60_000);
    g.agentOf('b').send({ type: 'FINISH' });
    g.spawn('d', 60_000);
    expect(Object.keys(g.agents()).sort()).toEqual(['agent:0', 'agent:1', 'agent:2']); // d took b's place
    g.actor.send({ type: 'CANCEL' });
    expect(g.ended.map((e) => [e.taskId, e.status]).sort()).toEqual([['a', 'cancelled'], ['b', 'completed'], ['c', 'cancelled'], ['d', 'cancelled']]);
    expect(g.scheduled()).toBe(0);
  });

  it('reports a crashed agent as a failed attempt of the task it held', () => {
    const g = withGroup();
    g.spawn('a', 60_000);
    g.agentOf('a').send({ type: 'CRASH' });
    expect(g.ended).toMatchObject([{ taskId: 'a', status: 'failed', code: 'internal', message: 'agent crashed: agent bug' }]);
    expect(g.scheduled()).toBe(0);
    expect(Object.keys(g.agents())).toEqual([]);
  });
});

describe('groupMachine: a spawn into a busy group', () => {
  it('changes no state: its transition has no target (busy is not exited and entered again per task)', () => {
    const busy = groupMachine.resolveState({ value: 'busy', context: { group: 0, slots: new AgentSlots(), deadlines: new Deadlines() } });
    const [transition] = groupMachine.getTransitionData(busy, { type: 'SPAWN', input: { taskId: 'a', attempt: 1, timeoutMs: 1000 } as AgentInput });
    expect(transition!.target).toBeUndefined();
    // From idle it still moves to busy.
    const idle = groupMachine.resolveState({ value: 'idle', context: { group: 0, slots: new AgentSlots(), deadlines: new Deadlines() } });
    const [first] = groupMachine.getTransitionData(idle, { type: 'SPAWN', input: { taskId: 'a', attempt: 1, timeoutMs: 1000 } as AgentInput });
    expect(first!.target?.map((t) => t.key)).toEqual(['busy']);
  });
});

describe('groupMachine: the per-task transitions', () => {
  /** The type of each action a transition runs ('xstate.enqueueActions' builds an action list when it runs). */
  const actionTypes = (transition: { actions: readonly unknown[] } | undefined) =>
    transition!.actions.map((a) => {
      const impl = typeof a === 'string' ? (groupMachine.implementations.actions as Record<string, { type?: string }>)[a] : (a as { type?: string });
      return impl?.type ?? 'plain';
    });

  it('a spawn after the timer and an agent that ends beside others run fixed actions, with no action list built per task', () => {
    const deadlines = new Deadlines();
    deadlines.armed = 2_000; // armed for an agent already there, due before the new one
    deadlines.set('agent:0', 2_000);
    deadlines.set('agent:1', 2_500);
    const busy = groupMachine.resolveState({ value: 'busy', context: { group: 0, slots: new AgentSlots(), deadlines } });
    const [spawn] = groupMachine.getTransitionData(busy, { type: 'SPAWN', input: { taskId: 'a', attempt: 1, timeoutMs: 5_000 } as AgentInput });
    expect(actionTypes(spawn)).not.toContain('xstate.enqueueActions');
    expect(actionTypes(spawn)).toContain('xstate.spawnChild');
    const [ended] = groupMachine.getTransitionData(busy, { type: 'xstate.done.actor.agent:1', actorId: 'agent:1', output: {} } as never);
    expect(actionTypes(ended)).not.toContain('xstate.enqueueActions');
    expect(actionTypes(ended)).toEqual(expect.arrayContaining(['xstate.stopChild', 'xstate.sendTo']));
    expect(actionTypes(ended)).not.toContain('xstate.cancel'); // another deadline is left: the timer stays
  });
});
