/**
 * The agent's actions before a call is sent: the dispatch hook's decision, the budget reservation,
 * the lease request (through the route's breaker), and the move to a fallback when the route is
 * open. Each does at most one assign (every assign copies the whole context). Guards decide in
 * the chart; what an action finds missing (no ledger, no pool) it records as `error`, and the
 * chart's `blocked` guard takes the agent to `failed`.
 */
import { errorInfo } from '../errors.js';
import { enqueueReport } from '../kit.js';
import { nowOf } from '../clock.js';
import type { BreakerEvent, DispatchDecision, DispatchInfo, LeaseEvent, LedgerEvent, RunEvent } from '../protocol.js';
import {
  patchOf,
  poolOf,
  requestIdOf,
  leaseTokensOf,
  requestTokensOf,
  worstCaseOf,
  routeOf,
  targetOf,
  type ActionArgs,
  type AgentContext,
  type AgentEvent,
  type PatchArgs,
  type Patch,
  type CallTarget,
} from './context.js';
import { callEvent } from './calls.js';

/** What the dispatch hook sees of the call about to be sent. */
export function dispatchInfoOf(context: AgentContext): DispatchInfo {
  const target = targetOf(context);
  const info: DispatchInfo = {
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    turn: context.counts.turn,
    call: context.call,
    model: target.modelName ?? routeOf(target),
    provider: target.provider,
    modelId: target.model,
    messageCount: context.messages.length,
    estimatedInputTokens: requestTokensOf(context),
    maxTokens: target.maxTokens,
    depth: context.input.depth ?? 0,
  };
  const worst = worstCaseOf(context);
  if (worst !== undefined) info.estimatedCostUsd = worst;
  return info;
}

export function fallbackEvent(context: AgentContext, from: CallTarget, to: CallTarget, reason: string): RunEvent {
  return {
    type: 'task:fallback',
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    from: from.modelName ?? routeOf(from),
    to: to.modelName ?? routeOf(to),
    reason,
  };
}

/** What a hook's rewrite changes of the call about to be sent (for this call only). */
export function overrideOf(decision: Extract<DispatchDecision, { action: 'rewrite' }>): NonNullable<AgentContext['override']> {
  const override: NonNullable<AgentContext['override']> = {};
  if (decision.target) override.target = decision.target;
  if (decision.maxTokens !== undefined) override.maxTokens = decision.maxTokens;
  if (decision.messages) override.messages = decision.messages;
  return override;
}

/** No budget in the run, or the call's model has no price: nothing to reserve. */
export const unbudgeted = (context: AgentContext) => !context.input.budgeted || targetOf(context).price === undefined;

/** The same, of the call as the hook's decision (the event's output) leaves it: a rewrite may name another model. */
export const unbudgetedAsDecided = (context: AgentContext, event: unknown) => {
  const decision = (event as { output?: DispatchDecision }).output;
  return unbudgeted(decision?.action === 'rewrite' ? { ...context, override: overrideOf(decision) } : context);
};

/**
 * A turn on its own choice of route may move to a fallback when that route is open; a call a hook
 * sent to another model keeps it (the hook chose it), and so does one that already looked and
 * found every fallback open.
 */
export const canReroute = (context: AgentContext) =>
  context.call === 'turn' && !context.override?.target && context.held.reroute === null && context.routeIndex < (context.input.fallbacks?.length ?? 0);

/**
 * Applies a hook's decision (a rewrite holds for this call only; a denial is the attempt's error)
 * and records it as an event. Called with the hook's output, or with a decision as params.
 */
export const recordDecision = ({ context, event, enqueue }: ActionArgs, params: DispatchDecision | undefined) => {
  const decision = params ?? (event as unknown as { output: DispatchDecision }).output;
  const from = targetOf(context);
  if (decision.action === 'rewrite') {
    enqueue.assign({ override: overrideOf(decision) });
  } else if (decision.action === 'deny') {
    const error = errorInfo('dispatch_denied', `task "${context.input.taskId}": the beforeDispatch hook denied the call: ${decision.reason ?? 'denied'}`);
    enqueue.assign({ error });
  }
  enqueueReport(enqueue, {
    type: 'dispatch:decision',
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    turn: context.counts.turn,
    model: from.modelName ?? routeOf(from),
    decision: decision.action,
    ...(decision.action !== 'allow' && decision.reason ? { reason: decision.reason } : {}),
    ...(decision.action === 'rewrite' && decision.target ? { to: decision.target.modelName ?? routeOf(decision.target) } : {}),
    ...(decision.action === 'rewrite' && decision.maxTokens !== undefined ? { maxTokens: decision.maxTokens } : {}),
    ...(decision.action === 'rewrite' && decision.messages ? { messages: decision.messages.length } : {}),
  });
};

/** Asks the ledger to hold the call's worst case. */
export const requestReservation = ({ context, enqueue, self, system }: ActionArgs) => {
  const seq = context.counts.seq + 1;
  const reservationId = requestIdOf(context, seq);
  const ledger = system.get('ledger');
  if (!ledger) {
    enqueue.assign(patchOf(context, { counts: { seq }, error: errorInfo('internal', 'the run has a budget but no ledger') }));
    return;
  }
  enqueue.assign(patchOf(context, { counts: { seq }, held: { pending: { kind: 'reservation', requestId: reservationId } } }));
  const target = targetOf(context);
  const event: LedgerEvent = {
    type: 'LEDGER.RESERVE',
    reservationId,
    taskId: context.input.taskId,
    model: target.modelName ?? target.model,
    amountUsd: worstCaseOf(context)!,
    replyTo: self,
  };
  enqueue.sendTo(ledger, event);
};

export const holdReservation = ({ event }: PatchArgs): Patch => ({
  held: { reservation: (event as Extract<AgentEvent, { type: 'LEDGER.RESERVED' }>).reservationId, pending: null },
});

/** The ledger or the pool said no (budget_exceeded, no_keys): the attempt fails with its error. */
export const requestDenied = ({ event }: PatchArgs): Patch => ({
  held: { pending: null },
  error: (event as Extract<AgentEvent, { type: 'LEDGER.DENIED' | 'LEASE.DENIED' }>).error,
});

/**
 * Asks the pool for a key, naming the route: the pool is the breaker's front desk
 * (machines/breakerDesk.ts), and it alone knows whether the route has a breaker (the agent looks
 * none up per call). While the breaker is closed with no failure counted the pool grants at once;
 * otherwise it hands the request to the breaker, which passes it on, holds it until it lets calls
 * through again, or, when the turn can move to a fallback (`unlessOpen`), refuses it
 * (BREAKER.REFUSED, relayed by the pool). A route with no breaker is unguarded: the pool books it.
 */
export const requestLease = ({ context, enqueue, self, system }: ActionArgs) => {
  const seq = context.counts.seq + 1;
  const requestId = requestIdOf(context, seq);
  const pool = poolOf(system, context);
  if (!pool) {
    // Nobody to lease a key from: fail now rather than wait for the deadline.
    enqueue.assign(patchOf(context, { counts: { seq }, error: errorInfo('internal', `no key pool "pool:${context.input.provider}" in the actor system`) }));
    return;
  }
  const target = targetOf(context);
  const lease: Extract<LeaseEvent, { type: 'LEASE.REQUEST' }> = {
    type: 'LEASE.REQUEST',
    requestId,
    priority: context.input.priority,
    inputTokens: leaseTokensOf(context),
    outputTokens: target.maxTokens,
    deadline: context.startedAt + context.input.timeoutMs,
    replyTo: self,
    route: routeOf(target),
  };
  if (canReroute(context)) lease.unlessOpen = true;
  enqueue.assign(patchOf(context, { counts: { seq }, held: { pending: { kind: 'lease', requestId } } }));
  enqueue.sendTo(pool, lease);
};

/** The next request is too long for the task's input budget: it is compacted first. */
export const overBudget = (context: AgentContext) =>
  context.call === 'turn' && context.input.inputBudget !== undefined && requestTokensOf(context) > context.input.inputBudget;

/**
 * `lease`'s entry: a call with nothing to check (no hook, nothing to reserve, within its input
 * budget) asks at once; any other asks after `checking`, whose way into `lease` asks for it
 * (the request is then pending, and this does nothing).
 */
export const requestPlainLease = (args: ActionArgs) => {
  const { context } = args;
  if (context.held.pending !== null || context.input.hooked === true || !unbudgeted(context) || overBudget(context)) return;
  requestLease(args);
};

/** A key is leased: the call starts now (one assign for all of it). */
export const leaseGranted = ({ context, event, enqueue, self }: ActionArgs) => {
  const { leaseId, keyId } = event as Extract<AgentEvent, { type: 'LEASE.GRANTED' }>;
  enqueue.assign(
    patchOf(context, {
      held: { lease: { leaseId, keyId }, pending: null, reroute: null },
      counts: { requests: context.counts.requests + 1 },
      spend: { callStartedAt: nowOf(self) },
    }),
  );
  enqueueReport(enqueue, callEvent('model:request', context, keyId));
};

/** Why a turn the pool denied for 429s (every key set aside, or backing off past the deadline) moves on. */
export const KEYS_RATE_LIMITED = 'every key rate limited (429)';

/**
 * The route's breaker is open and said so, or the pool denied the turn for 429s: look for a
 * fallback, starting with the next one.
 */
export const refused = ({ context, event }: PatchArgs): Patch => ({
  held: { pending: null, reroute: { index: context.routeIndex, open: null, ...(event.type === 'LEASE.DENIED' ? { why: KEYS_RATE_LIMITED } : {}) } },
});

/** Asks the breaker of the fallback under consideration whether it is open (no breaker: it is not). */
export const peekFallback = ({ context, enqueue, self, system }: ActionArgs) => {
  const { index } = context.held.reroute!;
  const breaker = system.get(`breaker:${routeOf(context.input.fallbacks![index]!)}`);
  if (!breaker) {
    enqueue.assign(patchOf(context, { held: { reroute: { ...context.held.reroute!, open: false } } }));
    return;
  }
  const seq = context.counts.seq + 1;
  const requestId = requestIdOf(context, seq);
  enqueue.assign(patchOf(context, { counts: { seq }, held: { pending: { kind: 'peek', requestId } } }));
  const peek: BreakerEvent = { type: 'BREAKER.PEEK', requestId, replyTo: self };
  enqueue.sendTo(breaker, peek);
};

export const heardStatus = ({ context, event }: PatchArgs): Patch => ({
  held: { pending: null, reroute: { ...context.held.reroute!, open: (event as Extract<AgentEvent, { type: 'BREAKER.STATUS' }>).open } },
});

export const peekNext = ({ context }: PatchArgs): Patch => ({
  held: { reroute: { ...context.held.reroute!, index: context.held.reroute!.index + 1, open: null } },
});

/**
 * Moves the turn to the fallback found up. Whatever was checked was for the route left behind:
 * its reservation goes back, and the chart checks again (hook, budget) for the new one.
 */
export const moveToFallback = ({ context, enqueue, system }: ActionArgs) => {
  const { index } = context.held.reroute!;
  enqueueReport(enqueue, fallbackEvent(context, targetOf(context), context.input.fallbacks![index]!, context.held.reroute!.why ?? 'breaker open'));
  const ledger = system.get('ledger');
  if (context.held.reservation && ledger) {
    const release: LedgerEvent = { type: 'LEDGER.RELEASE', reservationId: context.held.reservation };
    enqueue.sendTo(ledger, release);
  }
  enqueue.assign(patchOf(context, { routeIndex: index + 1, counts: { overloads: 0 }, held: { reservation: null, reroute: null } }));
};
