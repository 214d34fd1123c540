/**
 * One sub-agent: one attempt at one task, with a context of its own.
 *
 *   idle -START-> waiting.checking -> (compacting) -> reserving -RESERVED-> admission
 *        -ADMITTED-> lease -GRANTED-> running
 *   running -reply with tool calls-> tools -all results-> waiting (next turn)
 *   running -final reply-> done
 *   running -retryable error-> backoff -> waiting          -fatal error-> failed
 *   running -429-> waiting (a wait for the next free key, not a retry)
 *   any -CANCEL-> cancelled          any -AGENT.TIMEOUT (its deadline)-> failed (task_timeout)
 *
 * The machine decides; `src/` does: the model call is the `callModel` actor, the route's breaker
 * (`breaker:<provider>/<model>`), the key pool (`pool:<provider>`) and the tool bus (`toolBus`)
 * are actors found in the system by id, and so is the run's `ledger` when it has budgets.
 * Whatever the agent holds (a reservation, an admission, a lease request, a lease) it gives back
 * on the way out, so a cancelled agent never wedges a key, a breaker or a budget.
 */
import { and, assign, enqueueActions, fromPromise, not, setup, type AnyActorRef } from 'xstate';
import {
  breakerOf,
  callFacts,
  callInputOf,
  errorOf,
  keepLastOf,
  outputOf,
  poolOf,
  reportOf,
  requestIdOf,
  reservationUsd,
  handBack,
  toolCallsOf,
  toolCallInfosOf,
  routeOf,
  OVERLOADS_BEFORE_FALLBACK,
  type CallTarget,
  requestTokensOf,
  requestTokenBoundOf,
  targetOf,
  type AgentContext,
  type AgentEvent,
  type AgentInput,
  type ToolWait,
} from './agentContext.js';
import { canCompact, compact } from './compaction.js';
import { scoreOf } from './judge.js';
import { clampDelay, nowOf } from './clock.js';
import { costOfUsage } from './cost.js';
import { breakerVerdictOf, errorInfo, isKeyScoped, leaseOutcomeOf, toErrorInfo } from './errors.js';
import type {
  AttemptReport,
  BreakerEvent,
  ContentBlock,
  CallRecord,
  DispatchDecision,
  DispatchInfo,
  ErrorInfo,
  ToolCallDecision,
  ToolCallInfo,
  LeaseEvent,
  LedgerEvent,
  ModelCallInput,
  ModelCallOutput,
  RunEvent,
  ToolBusEvent,
} from './protocol.js';
import { addUsage, ZERO_USAGE } from './protocol.js';
import { backoffDelay, nextRandom } from './random.js';
import { enqueueReport } from './kit.js';
import { estimateRequestTokens, textOf } from './tokens.js';

export type { AgentContext, AgentEvent, AgentInput } from './agentContext.js';

/** A closed breaker that counts no failure: a success would change nothing in it. */
const isQuietlyClosed = (breaker: AnyActorRef) => {
  const snap = breaker.getSnapshot() as { value?: unknown; context?: { failures?: number } };
  return snap.value === 'closed' && snap.context?.failures === 0;
};

/** A breaker that refuses calls now (open; half-open still lets a probe through). */
const isOpen = (breaker: AnyActorRef | undefined) => (breaker?.getSnapshot() as { value?: unknown } | undefined)?.value === 'open';

function fallbackEvent(context: AgentContext, from: CallTarget, to: CallTarget, reason: string): RunEvent {
  return {
    type: 'task:fallback',
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    from: from.modelName ?? routeOf(from),
    to: to.modelName ?? routeOf(to),
    reason,
  };
}

/** What the dispatch hook sees of the call about to be sent. */
function dispatchInfoOf(context: AgentContext): DispatchInfo {
  const target = targetOf(context);
  const estimatedInputTokens = requestTokensOf(context);
  const info: DispatchInfo = {
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    turn: context.turn,
    call: context.call,
    model: target.modelName ?? routeOf(target),
    provider: target.provider,
    modelId: target.model,
    messageCount: context.messages.length,
    estimatedInputTokens,
    maxTokens: target.maxTokens,
    depth: context.input.depth ?? 0,
  };
  if (target.price) info.estimatedCostUsd = reservationUsd(target.price, requestTokenBoundOf(context), target.maxTokens);
  return info;
}

/** The context after a reply joined the conversation (the overflow retry is once per request). */
function withReply(context: AgentContext, content: ContentBlock[]) {
  return { overflowRetried: false, turn: context.turn + 1, messages: [...context.messages, { role: 'assistant' as const, content }] };
}

/** The attempt waited out `maxRateLimitWaits` 429s and met one more: it fails, and says why. */
function rateLimitedOutError(context: AgentContext, last: ErrorInfo): ErrorInfo {
  const { taskId, attempt, maxRateLimitWaits } = context.input;
  return {
    ...last,
    retryable: false,
    message: `task "${taskId}" attempt ${attempt}: rate limited ${context.rateLimitWaits + 1} times, more than maxRateLimitWaits (${maxRateLimitWaits}) allows; last: ${last.message}`,
  };
}

/** An answer that failed its checks: retryable, with the problems for the next attempt's prompt. */
function outputError(context: AgentContext, code: 'invalid_output' | 'rejected_output', what: string, problems: string[]): ErrorInfo {
  const { taskId, attempt } = context.input;
  return { ...errorInfo(code, `task "${taskId}" attempt ${attempt}: the answer ${what}: ${problems.join('; ')}`, true), problems };
}

function deniedError(context: AgentContext, decision: DispatchDecision) {
  const reason = decision.action === 'deny' ? decision.reason : 'denied';
  return errorInfo('dispatch_denied', `task "${context.input.taskId}": the beforeDispatch hook denied the call: ${reason}`);
}

export const agentMachine = setup({
  types: {} as {
    context: AgentContext;
    events: AgentEvent;
    input: AgentInput;
    output: AttemptReport;
  },
  actors: {
    callModel: fromPromise<ModelCallOutput, ModelCallInput>(async () => {
      throw errorInfo('internal', 'no callModel actor provided');
    }),
    /** The run's beforeToolCall hook: one decision per call, in order (src provides it). */
    beforeToolCall: fromPromise<ToolCallDecision[], ToolCallInfo[]>(async ({ input }) => input.map(() => ({ action: 'allow' as const }))),
    /** The run's beforeDispatch hook (src provides it when the run has one). */
    beforeDispatch: fromPromise<DispatchDecision, DispatchInfo>(async () => ({ action: 'allow' })),
  },
  actions: {
    /** Where run events go: `src/` provides it. */
    report: (_, _event: RunEvent) => {},

    /** Applies a hook's decision (a rewrite holds for this call only) and records it as an event. */
    recordDecision: enqueueActions(({ context, event, enqueue }, params?: DispatchDecision) => {
      const decision = params ?? (event as unknown as { output: DispatchDecision }).output;
      const from = targetOf(context);
      if (decision.action === 'rewrite') {
        const override: NonNullable<AgentContext['override']> = {};
        if (decision.target) override.target = decision.target;
        if (decision.maxTokens !== undefined) override.maxTokens = decision.maxTokens;
        if (decision.messages) override.messages = decision.messages;
        enqueue.assign({ override });
      }
      enqueueReport(enqueue, {
        type: 'dispatch:decision',
        taskId: context.input.taskId,
        attempt: context.input.attempt,
        turn: context.turn,
        model: from.modelName ?? routeOf(from),
        decision: decision.action,
        ...(decision.action !== 'allow' && decision.reason ? { reason: decision.reason } : {}),
        ...(decision.action === 'rewrite' && decision.target ? { to: decision.target.modelName ?? routeOf(decision.target) } : {}),
        ...(decision.action === 'rewrite' && decision.maxTokens !== undefined ? { maxTokens: decision.maxTokens } : {}),
        ...(decision.action === 'rewrite' && decision.messages ? { messages: decision.messages.length } : {}),
      });
    }),

    requestReservation: enqueueActions(({ context, enqueue, self, system }) => {
      const seq = context.seq + 1;
      const reservationId = requestIdOf(context, seq);
      enqueue.assign({ seq, pending: { kind: 'reservation', requestId: reservationId } });
      const ledger = system.get('ledger');
      if (!ledger) {
        enqueue.raise({ type: 'LEDGER.DENIED', reservationId, error: errorInfo('internal', 'the run has a budget but no ledger') });
        return;
      }
      const target = targetOf(context);
      const event: LedgerEvent = {
        type: 'LEDGER.RESERVE',
        reservationId,
        taskId: context.input.taskId,
        model: target.modelName ?? target.model,
        amountUsd: reservationUsd(target.price!, requestTokenBoundOf(context), target.maxTokens),
        replyTo: self,
      };
      enqueue.sendTo(ledger, event);
    }),

    requestAdmission: enqueueActions(({ context, enqueue, self, system }) => {
      const seq = context.seq + 1;
      const requestId = requestIdOf(context, seq);
      enqueue.assign({ seq, pending: { kind: 'admission', requestId } });
      let breaker = breakerOf(system, context);
      // The route is down (its breaker open): move to the first fallback whose breaker is not.
      // (A call a hook sent to another model keeps that model: the hook chose it.)
      if (context.call === 'turn' && !context.override?.target && isOpen(breaker)) {
        const fallbacks = context.input.fallbacks ?? [];
        for (let i = context.routeIndex; i < fallbacks.length; i++) {
          const candidate = system.get(`breaker:${routeOf(fallbacks[i]!)}`);
          if (isOpen(candidate)) continue;
          const from = targetOf(context);
          enqueue.assign({ routeIndex: i + 1, overloads: 0 });
          enqueueReport(enqueue, fallbackEvent(context, from, fallbacks[i]!, 'breaker open'));
          // Whatever was checked was for the route left behind: give back its reservation and check
          // again (hook, budget) for the new one.
          if (context.reservation) {
            const release: LedgerEvent = { type: 'LEDGER.RELEASE', reservationId: context.reservation };
            enqueue.sendTo(system.get('ledger')!, release);
          }
          enqueue.assign({ reservation: null, pending: null });
          enqueue.raise({ type: 'AGENT.REROUTED' });
          return;
        }
      }
      // Closed (again) or no breaker: admitted without a round trip.
      if (!breaker || (breaker.getSnapshot() as { value?: unknown }).value === 'closed') {
        enqueue.raise({ type: 'BREAKER.ADMITTED', requestId, probe: false });
        return;
      }
      const event: BreakerEvent = { type: 'BREAKER.ADMIT', requestId, replyTo: self };
      enqueue.sendTo(breaker, event);
    }),

    requestLease: enqueueActions(({ context, enqueue, self, system }) => {
      // A closed breaker admits everyone and keeps no record of it, so the common case asks it
      // nothing (a route without a breaker is not guarded at all). Any other breaker state is
      // asked first: raise to the admission step, which also moves to a fallback if it is open.
      const breaker = context.admission ? undefined : breakerOf(system, context);
      if (breaker && (breaker.getSnapshot() as { value?: unknown }).value !== 'closed') {
        enqueue.raise({ type: 'AGENT.NEEDS_ADMISSION' });
        return;
      }
      const seq = context.seq + 1;
      const requestId = requestIdOf(context, seq);
      // Admitted by a closed breaker: the call's outcome is still reported to it (that is how it
      // counts failures and opens). One assign: each one copies the whole context.
      enqueue.assign(breaker ? { seq, pending: { kind: 'lease', requestId }, admission: { requestId, probe: false } } : { seq, pending: { kind: 'lease', requestId } });
      const pool = poolOf(system, context);
      if (!pool) {
        // Nobody to lease a key from: fail now rather than wait for the deadline.
        const error = errorInfo('internal', `no key pool "pool:${context.input.provider}" in the actor system`);
        enqueue.raise({ type: 'LEASE.DENIED', requestId, error });
        return;
      }
      const event: LeaseEvent = {
        type: 'LEASE.REQUEST',
        requestId,
        priority: context.input.priority,
        inputTokens: requestTokensOf(context),
        outputTokens: targetOf(context).maxTokens,
        deadline: context.startedAt + context.input.timeoutMs,
        replyTo: self,
      };
      enqueue.sendTo(pool, event);
    }),

    /** A key is leased: the call starts now (one assign for both: each one copies the whole context). */
    leaseGranted: enqueueActions(({ context, event, enqueue, self }) => {
      const { leaseId, keyId } = event as Extract<AgentEvent, { type: 'LEASE.GRANTED' }>;
      enqueue.assign({ lease: { leaseId, keyId }, pending: null, requests: context.requests + 1, callStartedAt: nowOf(self) });
      enqueueReport(enqueue, { type: 'model:request', ...callFacts(context, keyId) });
    }),

    /** A successful reply: release the lease with its usage, tell the breaker, keep the reply. */
    settleSuccess: enqueueActions(({ context, event, enqueue, system, self }) => {
      const out = outputOf(event);
      const lease = context.lease!;
      const release: LeaseEvent = {
        type: 'LEASE.RELEASE',
        leaseId: lease.leaseId,
        keyId: lease.keyId,
        outcome: {
          kind: 'ok',
          usage: out.usage,
          ...(out.rateLimit ? { rateLimit: out.rateLimit } : {}),
          ...(out.sentAt !== undefined ? { sentAt: out.sentAt } : {}),
        },
      };
      enqueue.sendTo(poolOf(system, context)!, release);
      const breaker = context.admission ? breakerOf(system, context) : undefined;
      // A success tells a closed breaker with no failures counted nothing new: skip the message
      // (one less per call on the hot path). A probe, or a breaker counting failures, hears it.
      if (breaker && (context.admission!.probe || !isQuietlyClosed(breaker))) {
        const report: BreakerEvent = { type: 'BREAKER.REPORT', requestId: context.admission!.requestId, verdict: 'success' };
        enqueue.sendTo(breaker, report);
      }
      if (context.reservation) {
        // The reservation becomes what the call actually cost.
        const price = targetOf(context).price;
        const settle: LedgerEvent = { type: 'LEDGER.SETTLE', reservationId: context.reservation, actualUsd: price ? costOfUsage(out.usage, price) : Number.NaN };
        enqueue.sendTo(system.get('ledger')!, settle);
      }
      const target = targetOf(context);
      const price = target.price;
      const callCost = price ? costOfUsage(out.usage, price) : undefined;
      enqueueReport(enqueue, {
        type: 'model:response',
        ...callFacts(context, lease.keyId),
        usage: out.usage,
        ...(callCost !== undefined ? { costUsd: callCost, modelName: target.modelName ?? target.model } : {}),
      });
      const record: CallRecord = { route: routeOf(targetOf(context)), ms: Math.max(0, nowOf(self) - context.callStartedAt), ok: true };
      if (callCost !== undefined) record.costUsd = callCost;
      enqueue.assign({
        calls: [...context.calls, record],
        lease: null,
        admission: null,
        reservation: null,
        override: null,
        overloads: 0,
        usage: addUsage(context.usage, out.usage),
        ...(callCost !== undefined ? { costUsd: context.costUsd + callCost } : { unpricedCalls: context.unpricedCalls + 1 }),
      });
    }),

    /** The model's reply joins the conversation: the turn is done. */
    appendReply: assign(({ context, event }) => withReply(context, outputOf(event).content)),

    /** The final reply: it joins the conversation and is the attempt's output (one assign). */
    finishReply: assign(({ context, event }) => {
      const { content, verdict } = outputOf(event);
      // A checked answer is kept as the checks read it (a structured one as compact JSON).
      return { ...withReply(context, content), output: verdict?.ok ? verdict.text : textOf(content), status: 'completed' as const };
    }),

    /**
     * The final answer failed its output checks: the attempt fails (retryable, so the task runs
     * again with the problems in its prompt), and its answer is kept for inspection.
     */
    rejectOutput: assign(({ context, event }) => {
      const verdict = outputOf(event).verdict as Extract<NonNullable<ModelCallOutput['verdict']>, { ok: false }>;
      const what = verdict.code === 'invalid_output' ? 'does not meet its output schema' : 'was rejected by its quality gate';
      return { error: outputError(context, verdict.code, what, verdict.problems) };
    }),

    /** The judge scored the answer below the threshold (or gave no readable score). */
    rejectByJudge: assign(({ context, event }) => {
      const { score, reason } = scoreOf(textOf(outputOf(event).content));
      const threshold = context.input.judge!.threshold;
      const problem =
        score === undefined
          ? `the judge gave no score from 0 to 1`
          : `the judge scored it ${score}, below the threshold of ${threshold}${reason ? `: ${reason}` : ''}`;
      return { call: 'turn' as const, error: outputError(context, 'rejected_output', 'was rejected by its quality gate', [problem]) };
    }),

    /** Replaces the middle of the conversation with the summary just written, or a marker. */
    compactNow: enqueueActions(({ context, event, enqueue }) => {
      const summary = context.call === 'summary' ? textOf(outputOf(event).content) : null;
      const before = estimateRequestTokens(context.input.system, context.messages);
      const { messages, removed } = compact(context.messages, keepLastOf(context), summary);
      enqueue.assign({ messages, call: 'turn' });
      enqueueReport(enqueue, {
        type: 'task:compacted',
        taskId: context.input.taskId,
        attempt: context.input.attempt,
        mode: summary === null ? 'truncation' : 'summary',
        removed,
        tokensBefore: before,
        tokensAfter: estimateRequestTokens(context.input.system, messages),
      });
    }),

    /** A failed call: the outcome goes to the key (429, 401) and to the breaker (5xx and kin). */
    settleFailure: enqueueActions(({ context, event, enqueue, system, self }) => {
      const error = errorOf(event);
      enqueue.assign({ calls: [...context.calls, { route: routeOf(targetOf(context)), ms: Math.max(0, nowOf(self) - context.callStartedAt), ok: false }] });
      const lease = context.lease!;
      const release: LeaseEvent = { type: 'LEASE.RELEASE', leaseId: lease.leaseId, keyId: lease.keyId, outcome: leaseOutcomeOf(error) };
      enqueue.sendTo(poolOf(system, context)!, release);
      if (context.admission) {
        const report: BreakerEvent = { type: 'BREAKER.REPORT', requestId: context.admission.requestId, verdict: breakerVerdictOf(error) };
        enqueue.sendTo(breakerOf(system, context)!, report);
      }
      if (context.reservation) {
        // Refused before processing (429, 401, 4xx, a 5xx status): not billed, the reservation goes
        // back. Cut off after the server began (timeout, reset, an error mid-stream): it may have
        // been billed, so the worst case it held counts as spent (NaN: the whole reservation).
        const midStream = (error.code === 'overloaded' || error.code === 'server_error') && error.status === undefined;
        const mayBeBilled = error.code === 'timeout' || error.code === 'network' || midStream;
        const msg: LedgerEvent = mayBeBilled
          ? { type: 'LEDGER.SETTLE', reservationId: context.reservation, actualUsd: Number.NaN }
          : { type: 'LEDGER.RELEASE', reservationId: context.reservation };
        enqueue.sendTo(system.get('ledger')!, msg);
      }
      enqueueReport(enqueue, { type: 'model:error', ...callFacts(context, lease.keyId), error });
      enqueue.assign({ lease: null, admission: null, reservation: null, override: null });
    }),

    /** A 429 waited out: counted (for maxRateLimitWaits and the report), never as a retry. */
    noteRateLimitWait: assign({ rateLimitWaits: ({ context }) => context.rateLimitWaits + 1 }),

    /** Full-jitter exponential backoff; a route-level Retry-After is a floor, a key-level one is the key's. */
    planRetry: enqueueActions(({ context, event, enqueue }) => {
      const error = errorOf(event);
      const [r, rng] = nextRandom(context.rng);
      const floorMs = isKeyScoped(error) ? 0 : (error.retryAfterMs ?? 0);
      // A revoked key is nobody's fault: the next key can be tried at once.
      const delayMs = error.code === 'auth' ? 0 : backoffDelay(context.retries, r, { ...context.input.backoff, floorMs });
      enqueue.assign({ rng, backoffMs: delayMs, retries: context.retries + 1 });
      // Overloaded again and again: the next try goes to the model's next fallback, if any.
      const overloads = error.code === 'overloaded' && context.call === 'turn' ? context.overloads + 1 : 0;
      const fallbacks = context.input.fallbacks ?? [];
      if (overloads >= OVERLOADS_BEFORE_FALLBACK && context.routeIndex < fallbacks.length) {
        enqueue.assign({ routeIndex: context.routeIndex + 1, overloads: 0 });
        enqueueReport(enqueue, fallbackEvent(context, targetOf(context), fallbacks[context.routeIndex]!, `${overloads} overload errors in a row`));
      } else enqueue.assign({ overloads });
      enqueueReport(enqueue, {
        type: 'task:retry',
        taskId: context.input.taskId,
        attempt: context.input.attempt,
        retry: context.retries + 1,
        delayMs,
        error,
      });
    }),

    /** One bus request per tool call; calls to tools the task may not use get an error result. */
    callTools: enqueueActions(({ context, enqueue, self, system }) => {
      const calls = toolCallsOf(context);
      const wait: ToolWait = { order: calls.map((c) => c.id), results: {}, left: calls.length };
      const allowed = new Set(context.input.tools);
      const bus = system.get('toolBus');
      for (const call of calls) {
        if (!allowed.has(call.name) || !bus) {
          const reason = !allowed.has(call.name) ? `task "${context.input.taskId}" may not use tool "${call.name}"` : 'no tool bus in the run';
          wait.results[call.id] = { content: `tool "${call.name}" is not available: ${reason}`, isError: true };
          wait.left--;
          enqueueReport(enqueue, { type: 'tool:denied', taskId: context.input.taskId, name: call.name, reason });
          continue;
        }
        const decision = context.toolDecisions?.[call.id];
        if (decision?.action === 'deny') {
          wait.results[call.id] = { content: `tool "${call.name}" was denied: ${decision.reason}`, isError: true };
          wait.left--;
          enqueueReport(enqueue, { type: 'tool:denied', taskId: context.input.taskId, name: call.name, reason: decision.reason });
          continue;
        }
        const args = decision?.action === 'rewrite' ? decision.args : call.input;
        const event: ToolBusEvent = { type: 'TOOL.CALL', callId: call.id, taskId: context.input.taskId, name: call.name, args, replyTo: self };
        enqueue.sendTo(bus, event);
      }
      enqueue.assign({ tools: wait, toolDecisions: null });
    }),

    /** Keeps the tool hook's decisions for callTools, and records each (a hook that throws denies all). */
    recordToolDecisions: enqueueActions(({ context, event, enqueue }, params?: { error: string }) => {
      const infos = toolCallInfosOf(context);
      const output = params ? undefined : (event as unknown as { output?: ToolCallDecision[] }).output;
      const decisions: Record<string, ToolCallDecision> = {};
      infos.forEach((info, i) => {
        const d = output?.[i];
        const decision: ToolCallDecision = params
          ? { action: 'deny', reason: `the hook threw: ${params.error}` }
          : d && (d.action === 'allow' || d.action === 'deny' || d.action === 'rewrite')
            ? d
            : { action: 'deny', reason: 'the hook gave no decision for this call' };
        decisions[info.callId] = decision;
        enqueueReport(enqueue, {
          type: 'tool:decision',
          taskId: info.taskId,
          attempt: info.attempt,
          turn: info.turn,
          callId: info.callId,
          tool: info.tool,
          decision: decision.action,
          ...(decision.action !== 'allow' && decision.reason ? { reason: decision.reason } : {}),
        });
      });
      enqueue.assign({ toolDecisions: decisions });
    }),

    recordToolResult: assign({
      tools: ({ context, event }) => {
        const wait = context.tools;
        if (!wait || event.type !== 'TOOL.RESULT') return wait;
        if (event.callId in wait.results || !wait.order.includes(event.callId)) return wait;
        return {
          ...wait,
          results: { ...wait.results, [event.callId]: { content: event.content, isError: event.isError } },
          left: wait.left - 1,
        };
      },
    }),

    /** Tool results go back in the order the model asked for them, errors flagged as errors. */
    appendToolResults: assign(({ context }) => {
      const wait = context.tools!;
      const content: ContentBlock[] = wait.order.map((id) => {
        const r = wait.results[id]!;
        return r.isError
          ? { type: 'tool_result', toolUseId: id, content: r.content, isError: true }
          : { type: 'tool_result', toolUseId: id, content: r.content };
      });
      return { messages: [...context.messages, { role: 'user' as const, content }], tools: null };
    }),

    timedOut: assign({
      error: ({ context }) =>
        errorInfo('task_timeout', `task "${context.input.taskId}" attempt ${context.input.attempt} passed its deadline of ${context.input.timeoutMs} ms`, true),
    }),

    /** On the way out: withdraw what is requested, give back what is held. */
    giveBack: enqueueActions(({ context, enqueue, system }) => {
      for (const { to, event } of handBack(context)) {
        const target = system.get(to);
        if (target) enqueue.sendTo(target, event);
      }
      // Nothing held (the common way out): no context copy.
      if (context.pending || context.admission || context.lease || context.reservation) {
        enqueue.assign({ pending: null, admission: null, lease: null, reservation: null });
      }
    }),
  },
  delays: {
    backoff: ({ context }) => clampDelay(context.backoffMs),
  },
  guards: {
    isPending: ({ context, event }) => {
      const id = 'requestId' in event ? event.requestId : 'reservationId' in event ? event.reservationId : undefined;
      return id !== undefined && context.pending?.requestId === id;
    },
    overBudget: ({ context }) =>
      context.call === 'turn' && context.input.inputBudget !== undefined && requestTokensOf(context) > context.input.inputBudget,
    canCompact: ({ context }) => canCompact(context.messages, keepLastOf(context)),
    summarizes: ({ context }) => context.input.compaction !== undefined,
    unbudgeted: ({ context }) => !context.input.budgeted || targetOf(context).price === undefined,
    hooked: ({ context }) => context.input.hooked === true,
    toolHooked: ({ context }) => context.input.toolHooked === true,
    isSummary: ({ context }) => context.call === 'summary',
    isJudge: ({ context }) => context.call === 'judge',
    judgePasses: ({ context, event }) => {
      const { score } = scoreOf(textOf(outputOf(event).content));
      return score !== undefined && score >= context.input.judge!.threshold;
    },
    outputRejected: ({ event }) => outputOf(event).verdict?.ok === false,
    judged: ({ context }) => context.input.judge !== undefined,
    overflowOnce: ({ context, event }) => errorOf(event).code === 'context_overflow' && !context.overflowRetried && context.call === 'turn',
    wantsTools: ({ event }) => outputOf(event).content.some((b) => b.type === 'tool_use'),
    canRetry: ({ context, event }) => errorOf(event).retryable && context.retries < context.input.retries,
    rateLimitedOut: ({ event }) => errorOf(event).code === 'rate_limited',
    rateLimitWait: ({ context, event }) => {
      const error = errorOf(event);
      const cap = context.input.maxRateLimitWaits;
      return error.code === 'rate_limited' && error.retryable && (cap === undefined || context.rateLimitWaits < cap);
    },
    toolsDone: ({ context }) => context.tools !== null && context.tools.left === 0,
    turnsLeft: ({ context }) => context.turn < context.input.maxTurns,
  },
}).createMachine({
  id: 'agent',
  context: ({ input }) => ({
    input,
    route: `${input.provider}/${input.model}`,
    messages: [{ role: 'user', content: [{ type: 'text', text: input.prompt }] }],
    turn: 0,
    requests: 0,
    retries: 0,
    rateLimitWaits: 0,
    startedAt: 0,
    usage: ZERO_USAGE,
    rng: input.seed,
    seq: 0,
    pending: null,
    reservation: null,
    override: null,
    toolDecisions: null,
    routeIndex: 0,
    overloads: 0,
    costUsd: 0,
    unpricedCalls: 0,
    callStartedAt: 0,
    calls: [],
    admission: null,
    lease: null,
    tools: null,
    backoffMs: 0,
    call: 'turn',
    overflowRetried: false,
    status: null,
  }),
  initial: 'idle',
  output: ({ context }) => reportOf(context),
  on: {
    CANCEL: { target: '.cancelled', actions: assign({ error: ({ event }) => errorInfo('cancelled', event.reason ?? 'cancelled') }) },
  },
  states: {
    idle: {
      on: { START: { target: 'active', actions: assign({ startedAt: ({ self }) => nowOf(self) }) } },
    },
    active: {
      // The deadline runs from the attempt's start, across turns, waits and backoffs; the agent's
      // group keeps it (machines/supervisor/group.machine.ts) and sends AGENT.TIMEOUT when it passes.
      on: {
        'AGENT.TIMEOUT': { target: 'failed', actions: 'timedOut' },
      },
      initial: 'waiting',
      states: {
        waiting: {
          initial: 'checking',
          states: {
            /**
             * Before anything is sent: will the request fit the context window (if not, compact
             * first), and with a budget, its worst-case cost is reserved.
             */
            checking: {
              always: [
                { guard: 'overBudget', target: '#agent.active.compacting' },
                { guard: 'hooked', target: 'hook' },
                { guard: 'unbudgeted', target: 'lease' },
                { target: 'reserving' },
              ],
            },
            /** The dispatch contract: the run's hook allows, denies or rewrites the call. */
            hook: {
              invoke: {
                id: 'beforeDispatch',
                src: 'beforeDispatch',
                input: ({ context }) => dispatchInfoOf(context),
                onDone: [
                  {
                    guard: ({ event }) => event.output.action === 'deny',
                    target: '#agent.failed',
                    actions: ['recordDecision', assign({ error: ({ context, event }) => deniedError(context, event.output) })],
                  },
                  { target: 'decided', actions: 'recordDecision' },
                ],
                // A hook that throws denies.
                onError: {
                  target: '#agent.failed',
                  actions: [
                    { type: 'recordDecision', params: ({ event }) => ({ action: 'deny', reason: `the hook threw: ${toErrorInfo(event.error).message}` }) },
                    assign({ error: ({ context, event }) => deniedError(context, { action: 'deny', reason: `the hook threw: ${toErrorInfo(event.error).message}` }) }),
                  ],
                },
              },
            },
            decided: {
              always: [{ guard: 'unbudgeted', target: 'lease' }, { target: 'reserving' }],
            },
            reserving: {
              entry: 'requestReservation',
              on: {
                'LEDGER.RESERVED': {
                  guard: 'isPending',
                  target: 'lease',
                  actions: assign({ reservation: ({ event }) => event.reservationId, pending: null }),
                },
                'LEDGER.DENIED': {
                  guard: 'isPending',
                  target: '#agent.failed',
                  actions: assign({ pending: null, error: ({ event }) => event.error }),
                },
              },
            },
            admission: {
              entry: 'requestAdmission',
              on: {
                'AGENT.REROUTED': 'checking',
                'BREAKER.ADMITTED': {
                  guard: 'isPending',
                  target: 'lease',
                  actions: assign({
                    admission: ({ event }) => ({ requestId: event.requestId, probe: event.probe }),
                    pending: null,
                  }),
                },
              },
            },
            lease: {
              entry: 'requestLease',
              on: {
                'AGENT.NEEDS_ADMISSION': 'admission',
                'LEASE.GRANTED': {
                  guard: 'isPending',
                  target: '#agent.active.running',
                  actions: 'leaseGranted',
                },
                'LEASE.DENIED': {
                  guard: 'isPending',
                  target: '#agent.failed',
                  actions: assign({ pending: null, error: ({ event }) => event.error }),
                },
              },
            },
          },
        },
        /**
         * The conversation is too long for the next request: take out its middle, by a summary
         * from the compaction model (a model call of its own, through the same breaker, lease and
         * retries) or by a marked truncation. Nothing to take out: the task cannot fit.
         */
        compacting: {
          always: [
            {
              guard: not('canCompact'),
              target: '#agent.failed',
              actions: assign({
                error: ({ context }) =>
                  errorInfo(
                    'context_overflow',
                    context.overflowRetried
                      ? `task "${context.input.taskId}": the provider says the request is too long and there is nothing left to compact`
                      : `task "${context.input.taskId}": the brief and the last turns alone exceed the input budget of ${context.input.inputBudget} tokens`,
                  ),
              }),
            },
            { guard: 'summarizes', target: 'waiting', actions: assign({ call: 'summary' }) },
            { target: 'waiting', actions: 'compactNow' },
          ],
        },
        running: {
          invoke: {
            id: 'callModel',
            src: 'callModel',
            input: ({ context }) => callInputOf(context),
            onDone: [
              { guard: 'isSummary', target: 'waiting', actions: ['settleSuccess', 'compactNow'] },
              { guard: and(['isJudge', 'judgePasses']), target: '#agent.done', actions: ['settleSuccess', assign({ call: 'turn' })] },
              { guard: 'isJudge', target: '#agent.failed', actions: ['settleSuccess', 'rejectByJudge'] },
              { guard: 'wantsTools', target: 'tools', actions: ['settleSuccess', 'appendReply'] },
              { guard: 'outputRejected', target: '#agent.failed', actions: ['settleSuccess', 'finishReply', 'rejectOutput'] },
              // The answer passed its checks: the judge scores it before it counts.
              { guard: 'judged', target: 'waiting', actions: ['settleSuccess', 'finishReply', assign({ call: 'judge' })] },
              { target: '#agent.done', actions: ['settleSuccess', 'finishReply'] },
            ],
            onError: [
              // The provider says the request is too long: compact and try once more.
              { guard: 'overflowOnce', target: 'compacting', actions: ['settleFailure', assign({ overflowRetried: true })] },
              // A 429 says "wait", not "this task is broken": back to the pool, which hands the
              // call to the next key that can take it (this one backs off for its Retry-After).
              // It uses no retry; only the deadline (or maxRateLimitWaits) bounds such waits.
              { guard: 'rateLimitWait', target: 'waiting', actions: ['settleFailure', 'noteRateLimitWait'] },
              {
                guard: 'rateLimitedOut',
                target: '#agent.failed',
                actions: ['settleFailure', assign({ error: ({ context, event }) => rateLimitedOutError(context, toErrorInfo(event.error)) })],
              },
              { guard: 'canRetry', target: 'backoff', actions: ['settleFailure', 'planRetry'] },
              { target: '#agent.failed', actions: ['settleFailure', assign({ error: ({ event }) => toErrorInfo(event.error) })] },
            ],
          },
        },
        tools: {
          initial: 'checking',
          states: {
            checking: {
              always: [{ guard: 'toolHooked', target: 'hook' }, { target: 'calling' }],
            },
            /** Hooks also run before tool calls: each call is allowed, denied or given new arguments. */
            hook: {
              invoke: {
                id: 'beforeToolCall',
                src: 'beforeToolCall',
                input: ({ context }) => toolCallInfosOf(context),
                onDone: { target: 'calling', actions: 'recordToolDecisions' },
                onError: {
                  target: 'calling',
                  actions: { type: 'recordToolDecisions', params: ({ event }) => ({ error: toErrorInfo(event.error).message }) },
                },
              },
            },
            calling: {
              entry: 'callTools',
              always: { guard: 'toolsDone', target: '#agent.active.nextTurn' },
              on: {
                'TOOL.RESULT': { actions: 'recordToolResult' },
              },
            },
          },
        },
        nextTurn: {
          entry: 'appendToolResults',
          always: [
            { guard: 'turnsLeft', target: 'waiting' },
            {
              target: '#agent.failed',
              actions: assign({
                error: ({ context }) =>
                  errorInfo('max_turns', `task "${context.input.taskId}" reached maxTurns (${context.input.maxTurns}) without a final answer`),
              }),
            },
          ],
        },
        backoff: {
          after: { backoff: 'waiting' },
        },
      },
    },
    /** Reached only with the final reply, whose action set the status. */
    done: {
      type: 'final',
    },
    failed: {
      type: 'final',
      entry: [assign({ status: 'failed' }), 'giveBack'],
    },
    cancelled: {
      type: 'final',
      entry: [assign({ status: 'cancelled' }), 'giveBack'],
    },
  },
});
