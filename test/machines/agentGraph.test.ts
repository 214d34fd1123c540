/**
 * The agent machine walked with @xstate/graph (its context is immutable data, so every branch of
 * the walk is independent): once as a plain run (no hooks, no budget; a model with one fallback,
 * so an open breaker's refusal reaches `waiting.rerouting`), once with dispatch hooks, tool hooks
 * and a budget, which adds the states a plain walk never reaches (`waiting.hook`,
 * `waiting.reserving`, `tools.hook`).
 */
import { getShortestPaths } from '@xstate/graph';
import { describe, expect, it } from 'vitest';
import { createEmptyActor, initialTransition, transition } from 'xstate';
import type { AnyActorRef, AnyActorScope } from 'xstate';
import { agentMachine, type AgentEvent, type AgentInput } from '../../machines/agent/index.js';
import type { ModelCallOutput } from '../../machines/protocol.js';
import { agentInput, modelError, textReply, toolReply } from '../helpers/harness.js';

type AgentSnapshot = ReturnType<typeof agentMachine.getInitialSnapshot>;

const BASE_INPUT = agentInput({ taskId: 't', tools: ['search'], maxTurns: 2, retries: 1, timeoutMs: 1_000 });
/** The plain task's model has a fallback, so an open breaker's refusal leads somewhere. */
const GRAPH_INPUT: AgentInput = { ...BASE_INPUT, fallbacks: [{ provider: 'p', model: 'f', maxTokens: 100 }] };
/** The task (no fallback: the walk stays small) in a run with a beforeDispatch hook, a beforeToolCall hook and a budget. */
const HOOKED_INPUT: AgentInput = { ...BASE_INPUT, hooked: true, toolHooked: true, budgeted: true, price: { input: 3, output: 15 } };

/**
 * Every event the agent can meet, the replies carrying the id of the request now outstanding:
 * `${taskId}#${attempt}.${seq}` is deterministic, so the walk computes it from the context.
 */
function graphEvents(state: AgentSnapshot): AgentEvent[] {
  const requestId = `t#1.${state.context.counts.seq}`;
  const ok: ModelCallOutput = textReply('ok');
  const wantsTool: ModelCallOutput = toolReply([{ id: 'u1', name: 'search' }]);
  const events: Array<AgentEvent | { type: string; [k: string]: unknown }> = [
    // The route's breaker is open and the turn has a fallback; then the fallback's breaker's answer.
    { type: 'BREAKER.REFUSED', requestId },
    { type: 'BREAKER.STATUS', requestId, open: false },
    { type: 'BREAKER.STATUS', requestId, open: true },
    { type: 'LEASE.GRANTED', requestId, leaseId: 'A#1', keyId: 'A' },
    { type: 'LEASE.DENIED', requestId, error: { code: 'no_keys', message: 'no keys', retryable: false } },
    { type: 'MODEL.REPLY', output: ok },
    { type: 'MODEL.REPLY', output: wantsTool },
    { type: 'MODEL.FAILED', error: modelError('server_error').error },
    { type: 'MODEL.FAILED', error: modelError('bad_request').error },
    { type: 'TOOL.RESULT', callId: 'u1', content: 'found', isError: false },
    { type: 'xstate.after.backoff.agent.active.backoff' },
    { type: 'AGENT.TIMEOUT' },
    { type: 'CANCEL' },
  ];
  return events as AgentEvent[];
}

/** The plain events, and the answers of the hooks and the ledger. */
function hookedEvents(state: AgentSnapshot): AgentEvent[] {
  const requestId = `t#1.${state.context.counts.seq}`;
  const events: Array<{ type: string; [k: string]: unknown }> = [
    { type: 'xstate.done.actor.beforeDispatch', output: { action: 'allow' } },
    { type: 'xstate.done.actor.beforeDispatch', output: { action: 'deny', reason: 'not now' } },
    { type: 'xstate.error.actor.beforeDispatch', error: new Error('hook bug') },
    { type: 'LEDGER.RESERVED', reservationId: requestId },
    { type: 'LEDGER.DENIED', reservationId: requestId, error: { code: 'budget_exceeded', message: 'run budget exceeded', retryable: false } },
    { type: 'xstate.done.actor.beforeToolCall', output: [{ action: 'allow' }] },
    { type: 'xstate.done.actor.beforeToolCall', output: [{ action: 'deny', reason: 'not this one' }] },
    { type: 'xstate.error.actor.beforeToolCall', error: new Error('tool hook bug') },
  ];
  return [...graphEvents(state), ...(events as AgentEvent[])];
}

/**
 * A graph walk runs in a mock actor system where no breaker, pool, bus or ledger exists. An agent
 * with no breaker runs unguarded, one with no pool fails at once, one with no bus answers tool
 * calls itself with errors, and a budgeted one with no ledger fails its first call. To walk the
 * real protocol, this logic is the agent machine in a system where those resolve to stand-ins
 * (the walk executes no sends; the replies are the synthetic events above).
 */
function withInfrastructure(): typeof agentMachine {
  const standIns = new Map<string, AnyActorRef>(['toolBus', 'pool:p', 'breaker:p/m', 'breaker:p/f', 'ledger'].map((id) => [id, createEmptyActor() as AnyActorRef]));
  const withStandIns = (scope: AnyActorScope) => ({ ...scope, system: { ...scope.system, get: (id: string) => standIns.get(id) ?? scope.system.get(id) } }) as typeof scope;
  const transition = (snapshot: AgentSnapshot, event: AgentEvent, scope: AnyActorScope) => agentMachine.transition(snapshot, event, withStandIns(scope));
  // The agent is active from its spawn: its first lease request is made by the initial snapshot.
  const getInitialSnapshot = (scope: AnyActorScope, input: AgentInput) => agentMachine.getInitialSnapshot(withStandIns(scope), input);
  return Object.create(agentMachine, { transition: { value: transition }, getInitialSnapshot: { value: getInitialSnapshot } }) as typeof agentMachine;
}

function shortestByValue(logic: typeof agentMachine, input = GRAPH_INPUT, events = graphEvents) {
  const paths = getShortestPaths(logic, { input, events });
  const byValue = new Map<string, (typeof paths)[number]>();
  for (const path of paths) {
    const value = JSON.stringify(path.state.value);
    const best = byValue.get(value);
    if (!best || path.steps.length < best.steps.length) byValue.set(value, path);
  }
  return { paths, byValue };
}

/** The plain walk, taken once: two tests read it. */
let plainWalk: ReturnType<typeof shortestByValue> | undefined;
const walkPlain = () => (plainWalk ??= shortestByValue(withInfrastructure()));

const ALL_STATES = [
  '{"active":{"waiting":"lease"}}',
  '{"active":{"waiting":"rerouting"}}',
  '{"active":"running"}',
  '{"active":{"tools":"calling"}}',
  '{"active":"backoff"}',
  '"done"',
  '"failed"',
  '"cancelled"',
];
/** What hooks and a budget add (`checking`, `decided` and `nextTurn` are transient: never at rest). */
const HOOKED_STATES = ['{"active":{"waiting":"hook"}}', '{"active":{"waiting":"reserving"}}', '{"active":{"tools":"hook"}}'];

const stepTypes = (path: { steps: { event: { type: string } }[] }) => path.steps.map((s) => s.event.type).filter((t) => t !== 'xstate.init');

describe('agentMachine: graph', () => {
  it('reaches every state, and every way to fail, with synthetic replies', () => {
    const { paths, byValue } = walkPlain();
    expect([...byValue.keys()].sort()).toEqual([...ALL_STATES].sort()); // nextTurn is transient: never at rest
    // The lease request passes a closed breaker on its own: no answer from the breaker to wait for.
    expect(stepTypes(byValue.get('{"active":"running"}')!)).toEqual(['LEASE.GRANTED']);
    expect(stepTypes(byValue.get('{"active":{"tools":"calling"}}')!)).toEqual(['LEASE.GRANTED', 'MODEL.REPLY']);
    expect(stepTypes(byValue.get('{"active":"backoff"}')!)).toEqual(['LEASE.GRANTED', 'MODEL.FAILED']);
    expect(stepTypes(byValue.get('{"active":{"waiting":"rerouting"}}')!)).toEqual(['BREAKER.REFUSED']);
    // The fallback is up: the turn moves there (and asks for its lease again); down: it waits on its own route.
    const moved = paths.find((p) => p.state.matches({ active: { waiting: 'lease' } }) && p.state.context.routeIndex === 1);
    expect(stepTypes(moved!)).toEqual(['BREAKER.REFUSED', 'BREAKER.STATUS']);
    const stayed = paths.filter((p) => p.state.matches({ active: { waiting: 'lease' } }) && p.state.context.held.reroute !== null);
    expect(stayed.map((p) => [p.state.context.routeIndex, p.state.context.held.reroute])).toContainEqual([0, { index: 0, open: true }]);
    const failures = new Set(paths.filter((p) => p.state.value === 'failed').map((p) => p.state.context.error?.code));
    // no_keys (denied), bad_request (fatal), server_error (retries spent), max_turns, task_timeout.
    expect([...failures].sort()).toEqual(['bad_request', 'max_turns', 'no_keys', 'server_error', 'task_timeout']);
    // Whatever path reached a final state, nothing is left held or requested.
    for (const p of paths.filter((p) => p.state.status === 'done')) {
      expect([p.state.context.held.pending, p.state.context.held.lease]).toEqual([null, null]);
    }
  });

  it('with hooks and a budget, also reaches the hook, the reservation and the tool hook, each in its place', () => {
    const { paths, byValue } = shortestByValue(withInfrastructure(), HOOKED_INPUT, hookedEvents);
    const rerouting = '{"active":{"waiting":"rerouting"}}';
    expect([...byValue.keys()].sort()).toEqual([...ALL_STATES.filter((s) => s !== rerouting), ...HOOKED_STATES].sort());
    // The hook decides first, then the worst case is reserved, then the breaker and the pool.
    expect(stepTypes(byValue.get('{"active":{"waiting":"hook"}}')!)).toEqual([]);
    expect(stepTypes(byValue.get('{"active":{"waiting":"reserving"}}')!)).toEqual(['xstate.done.actor.beforeDispatch']);
    expect(stepTypes(byValue.get('{"active":"running"}')!)).toEqual([
      'xstate.done.actor.beforeDispatch', 'LEDGER.RESERVED', 'LEASE.GRANTED',
    ]);
    // The tool hook sits between the reply asking for a tool and the call to the bus.
    expect(stepTypes(byValue.get('{"active":{"tools":"hook"}}')!).at(-1)).toBe('MODEL.REPLY');
    expect(stepTypes(byValue.get('{"active":{"tools":"calling"}}')!).at(-1)).toBe('xstate.done.actor.beforeToolCall');
    const failures = new Set(paths.filter((p) => p.state.value === 'failed').map((p) => p.state.context.error?.code));
    // dispatch_denied (the hook denied, or threw) and budget_exceeded (the ledger refused) join the rest.
    expect([...failures].sort()).toEqual(['bad_request', 'budget_exceeded', 'dispatch_denied', 'max_turns', 'no_keys', 'server_error', 'task_timeout']);
    const denials = paths.filter((p) => p.state.context.error?.code === 'dispatch_denied').map((p) => p.state.context.error!.message);
    expect(denials).toEqual(expect.arrayContaining([expect.stringContaining('not now'), expect.stringContaining('the hook threw: hook bug')]));
    // Refused by the hook or the ledger before any call: nothing was asked of the breaker or the pool.
    const refusedFirst = paths.filter(
      (p) => ['dispatch_denied', 'budget_exceeded'].includes(p.state.context.error?.code ?? '') && !stepTypes(p).some((t) => t.startsWith('MODEL.')),
    );
    expect(refusedFirst.length).toBeGreaterThan(0);
    for (const p of refusedFirst) {
      expect(stepTypes(p)).not.toContain('LEASE.GRANTED');
      expect([p.state.context.counts.requests, p.state.context.held.pending]).toEqual([0, null]);
    }
    // Whatever path reached a final state, nothing is left held, requested or reserved.
    for (const p of paths.filter((p) => p.state.status === 'done')) {
      const c = p.state.context;
      expect([c.held.pending, c.held.lease, c.held.reservation]).toEqual([null, null, null]);
    }
  });

  it('asks with deterministic request ids, and ignores replies to any other request', () => {
    const { byValue } = walkPlain();
    const running = byValue.get('{"active":"running"}')!;
    const ids = running.steps.map((s) => (s.event as { requestId?: string }).requestId).filter(Boolean);
    expect(ids).toEqual(['t#1.1']);
    // A stale grant (an earlier request's id) does not move the agent.
    const lease = byValue.get('{"active":{"waiting":"lease"}}')!.state;
    const [stale] = transition(agentMachine, lease, { type: 'LEASE.GRANTED', requestId: 't#1.0', leaseId: 'A#9', keyId: 'A' });
    expect(stale.value).toEqual({ active: { waiting: 'lease' } });
  });

  it('asks whether to reserve of the call as the hook rewrote it: a rewrite to a priced model reserves, one to an unpriced model does not', () => {
    const logic = withInfrastructure();
    const unpriced: AgentInput = { ...BASE_INPUT, hooked: true, budgeted: true };
    const priced: AgentInput = { ...unpriced, price: { input: 3, output: 15 } };
    const afterRewrite = (input: AgentInput, target: { provider: string; model: string; maxTokens: number; price?: { input: number; output: number } }) => {
      let [state] = initialTransition(logic, input);
      expect(state.value).toEqual({ active: { waiting: 'hook' } });
      [state] = transition(logic, state, { type: 'xstate.done.actor.beforeDispatch', output: { action: 'rewrite', target } } as unknown as AgentEvent);
      return state.value;
    };
    expect(afterRewrite(unpriced, { provider: 'p', model: 'm2', maxTokens: 100, price: { input: 1, output: 1 } })).toEqual({ active: { waiting: 'reserving' } });
    expect(afterRewrite(priced, { provider: 'p', model: 'm2', maxTokens: 100 })).toEqual({ active: { waiting: 'lease' } });
  });

  it('with no infrastructure in the system (a bare walk), fails at once: no pool to lease from', () => {
    const { byValue } = shortestByValue(agentMachine);
    expect([...byValue.keys()].sort()).toEqual(['"cancelled"', '"failed"']);
    expect(byValue.get('"failed"')!.state.context.error).toMatchObject({ code: 'internal' });
  });
});
