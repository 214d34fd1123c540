/**
 * Every state of the two machines whose bookkeeping is a mutable object held by reference in
 * context (the supervisor's RunTable, the pool's queue), reached by a live actor.
 *
 * Why not @xstate/graph here: its adjacency walk applies every event to every snapshot it finds,
 * and those snapshots share the one bookkeeping object, so one branch's CANCEL would cancel the
 * tasks of every other branch (and getPathsFromEvents builds its default start state without the
 * input: xstate-graph.cjs.js createDefaultMachineOptions). The key, breaker, tool bus and agent
 * machines keep immutable context and are walked with getShortestPaths in their own files.
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, setup, SimulatedClock } from 'xstate';
import type { agentMachine } from '../../machines/agent.machine.js';
import { poolMachine } from '../../machines/pool.machine.js';
import { ZERO_USAGE } from '../../machines/protocol.js';
import type { SupervisedTask } from '../../machines/runTable.js';
import { supervisorMachine, type SupervisorInput } from '../../machines/supervisor.machine.js';

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
  initial: 'idle',
  states: {
    idle: { on: { START: 'busy' } },
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
  const actor = createActor(supervisorMachine.provide({ actors: { agent: slowAgent } }), { input, clock }).start();
  const seen = new Set<string>([String(actor.getSnapshot().value)]);
  actor.subscribe((s) => seen.add(String(s.value)));
  return { actor, clock, seen };
}

describe('state reachability (machines with mutable bookkeeping)', () => {
  it('supervisor: running -> finished when every task is final', () => {
    const { actor, clock, seen } = supervisor();
    clock.increment(10);
    expect([...seen]).toEqual(['running', 'finished']);
    expect(actor.getSnapshot().output!.status).toBe('completed');
  });

  it('supervisor: running -> draining (cancel with an agent in flight) -> finished', () => {
    const { actor, seen } = supervisor();
    actor.send({ type: 'CANCEL' });
    expect([...seen]).toEqual(['running', 'draining', 'finished']);
    expect(actor.getSnapshot().output!.status).toBe('cancelled');
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
