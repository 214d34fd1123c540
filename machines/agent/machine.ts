/**
 * One sub-agent: one attempt at one task, with a context of its own. The chart alone: its actions
 * are in dispatch.ts (before a call), settle.ts (after one) and tools.ts, its guards in guards.ts,
 * its data in context.ts.
 *
 *   (spawned) active.waiting.lease: nothing to check: the lease request at once; else
 *        -> checking -> (compacting) -> (hook) -> (reserving -RESERVED->) lease -GRANTED-> running
 *   lease: the lease request goes to the pool, which hands it to the route's breaker unless that one
 *          is clear; an open breaker holds it, or refuses a turn that has fallbacks -> rerouting -> checking
 *   running -reply with tool calls-> tools -all results-> waiting (next turn)
 *   running -final reply-> done
 *   running -retryable error-> backoff -> waiting          -fatal error-> failed
 *   running -429-> waiting (a wait for the next free key, not a retry)
 *   any -CANCEL-> cancelled          any -AGENT.TIMEOUT (its deadline)-> failed (task_timeout)
 *
 * The agent is active from its spawn: its deadline and its first request start with it.
 *
 * The machine decides; `src/` does: the model call is the `callModel` action (started on entering
 * `running`, aborted by `abortCall` on leaving it, its outcome back as MODEL.REPLY or MODEL.FAILED:
 * modelCall.ts); the breaker (`breaker:<provider>/<model>`), pool (`pool:<provider>`), tool bus
 * and the run's `ledger` are actors found in the system by id. Guards read only the context and
 * the event. What the agent holds (a reservation, a lease request, a lease) it gives
 * back on the way out, so a cancelled agent never wedges a key, a breaker or a budget.
 */
import { and, assign, enqueueActions, fromPromise, not, setup } from 'xstate';
import { clampDelay, nowOf } from '../clock.js';
import { errorInfo, toErrorInfo } from '../errors.js';
import type { AttemptReport, DispatchDecision, DispatchInfo, ModelCallInput, RunEvent, ToolCallDecision, ToolCallInfo } from '../protocol.js';
import { ZERO_USAGE } from '../protocol.js';
import { toolCallInfosOf, patchOf, type AgentContext, type AgentEvent, type AgentInput, type Patch, type PatchArgs } from './context.js';
import { callInputOf, reportOf } from './calls.js';
import {
  dispatchInfoOf,
  heardStatus,
  holdReservation,
  leaseGranted,
  moveToFallback,
  peekFallback,
  peekNext,
  recordDecision,
  refused,
  requestDenied,
  requestLease,
  requestPlainLease,
  requestReservation,
} from './dispatch.js';
import { agentGuards } from './guards.js';
import {
  cancelledBy,
  cannotCompact,
  compacted,
  compactNow,
  fatal,
  finalReply,
  giveBack,
  judgePassed,
  judgeRejected,
  outputRejected,
  overflowed,
  rateLimitedOut,
  rateLimitWaited,
  retryPlanned,
  settleFailure,
  settleSuccess,
  summarize,
  timedOut,
  toJudge,
  toolsAsked,
} from './settle.js';
import { appendToolResults, callTools, outOfTurns, recordToolDecisions, recordToolResult } from './tools.js';
import { modelCallActions } from './modelCall.js';

/** Without a provided call, every call fails at once (as a missing actor did). */
const unprovided = modelCallActions(async () => {
  throw errorInfo('internal', 'no callModel action provided');
});

/** An assign's function whose patch gives the sub-objects in part (see patchOf). */
const patched =
  (f: (args: PatchArgs) => Patch) =>
  (args: PatchArgs): Partial<AgentContext> =>
    patchOf(args.context, f(args));

export const agentMachine = setup({
  types: {} as {
    context: AgentContext;
    events: AgentEvent;
    input: AgentInput;
    output: AttemptReport;
  },
  actors: {
    /** The run's beforeToolCall hook: one decision per call, in order (src provides it). */
    beforeToolCall: fromPromise<ToolCallDecision[], ToolCallInfo[]>(async ({ input }) => input.map(() => ({ action: 'allow' as const }))),
    /** The run's beforeDispatch hook (src provides it when the run has one). */
    beforeDispatch: fromPromise<DispatchDecision, DispatchInfo>(async () => ({ action: 'allow' })),
  },
  actions: {
    /** Where run events go: `src/` provides it. */
    report: (_, _event: RunEvent) => {},
    /** The model call (src provides both with modelCallActions). */
    callModel: (args, call: ModelCallInput) => unprovided.callModel(args, call),
    abortCall: (args) => unprovided.abortCall(args),
    recordDecision: enqueueActions(recordDecision),
    requestReservation: enqueueActions(requestReservation),
    holdReservation: assign(patched(holdReservation)),
    requestDenied: assign(patched(requestDenied)),
    requestLease: enqueueActions(requestLease),
    requestPlainLease: enqueueActions(requestPlainLease),
    leaseGranted: enqueueActions(leaseGranted),
    refused: assign(patched(refused)),
    peekFallback: enqueueActions(peekFallback),
    heardStatus: assign(patched(heardStatus)),
    peekNext: assign(patched(peekNext)),
    moveToFallback: enqueueActions(moveToFallback),
    settleSuccess: enqueueActions(settleSuccess),
    settleFailure: enqueueActions(settleFailure),
    summarize: assign(patched(summarize)),
    compactNow: enqueueActions(compactNow),
    cannotCompact: assign(patched(cannotCompact)),
    callTools: enqueueActions(callTools),
    recordToolDecisions: enqueueActions(recordToolDecisions),
    recordToolResult: assign(recordToolResult),
    appendToolResults: assign(appendToolResults),
    outOfTurns: assign(outOfTurns),
    timedOut: assign(patched(timedOut)),
    cancelledBy: assign(patched(cancelledBy)),
    giveBack: enqueueActions(giveBack),
  },
  delays: {
    backoff: ({ context }) => clampDelay(context.backoffMs),
  },
  guards: agentGuards,
}).createMachine({
  id: 'agent',
  context: ({ input, self }) => ({
    input,
    messages: [{ role: 'user', content: [{ type: 'text', text: input.prompt }] }],
    counts: { turn: 0, requests: 0, retries: 0, rateLimitWaits: 0, overloads: 0, seq: 0 },
    spend: { usage: ZERO_USAGE, costUsd: 0, unpricedCalls: 0, calls: [], callStartedAt: 0 },
    held: { pending: null, reservation: null, lease: null, reroute: null },
    // The attempt starts with its spawn: its deadline runs from now (the lease requests carry it to the pool).
    startedAt: nowOf(self),
    rng: input.seed,
    override: null,
    toolDecisions: null,
    routeIndex: 0,
    tools: null,
    backoffMs: 0,
    call: 'turn',
    overflowRetried: false,
    status: null,
  }),
  initial: 'active',
  output: ({ context }) => reportOf(context),
  on: {
    CANCEL: { target: '.cancelled', actions: 'cancelledBy' },
  },
  states: {
    active: {
      // The deadline runs from the attempt's start, across turns, waits and backoffs; the agent's
      // group keeps it (machines/supervisor/group.machine.ts) and sends AGENT.TIMEOUT when it passes.
      on: {
        'AGENT.TIMEOUT': { target: 'failed', actions: 'timedOut' },
      },
      initial: 'waiting',
      states: {
        waiting: {
          // A call with nothing to check (no hook, no budget, within its input budget) asks for
          // its lease on entering `lease`, with no transient step before it; any other goes
          // from there to `checking` before asking.
          initial: 'lease',
          states: {
            /**
             * The route of the next call, first match: a request too long for the input budget is
             * compacted first; with hooks the hook decides; with a budget and a price its worst
             * case is reserved; then the lease.
             */
            checking: {
              always: [
                { guard: 'overBudget', target: '#agent.active.compacting' },
                { guard: 'hooked', target: 'hook' },
                { guard: 'unbudgeted', target: 'lease', actions: 'requestLease' },
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
                  { guard: 'denied', target: '#agent.failed', actions: 'recordDecision' },
                  // A rewrite may name another model: whether to reserve is asked of the call as rewritten.
                  { guard: 'unbudgetedAsDecided', target: 'lease', actions: ['recordDecision', 'requestLease'] },
                  { target: 'reserving', actions: 'recordDecision' },
                ],
                // A hook that throws denies.
                onError: {
                  target: '#agent.failed',
                  actions: { type: 'recordDecision', params: ({ event }) => ({ action: 'deny', reason: `the hook threw: ${toErrorInfo(event.error).message}` }) },
                },
              },
            },
            reserving: {
              entry: 'requestReservation',
              always: { guard: 'blocked', target: '#agent.failed' },
              on: {
                'LEDGER.RESERVED': {
                  guard: 'isPending',
                  target: 'lease',
                  actions: ['holdReservation', 'requestLease'],
                },
                'LEDGER.DENIED': { guard: 'isPending', target: '#agent.failed', actions: 'requestDenied' },
              },
            },
            /**
             * The lease request, to the pool (see requestLease): made on the way
             * in by `checking`, `hook`, `reserving` and `rerouting`, or on entry for a call with
             * nothing to check; one that needs checking and has not asked goes to `checking`.
             */
            lease: {
              entry: 'requestPlainLease',
              always: [
                { guard: 'blocked', target: '#agent.failed' },
                { guard: 'unrequested', target: 'checking' },
              ],
              on: {
                'LEASE.GRANTED': { guard: 'isPending', target: '#agent.active.running', actions: 'leaseGranted' },
                'LEASE.DENIED': [
                  // Denied for 429s: the fallbacks take over, as at an open breaker.
                  { guard: and(['isPending', 'canReroute', 'deniedForRateLimits']), target: 'rerouting', actions: 'refused' },
                  { guard: 'isPending', target: '#agent.failed', actions: 'requestDenied' },
                ],
                // Only a request that asked to be refused rather than held (canReroute) is refused.
                'BREAKER.REFUSED': { guard: and(['isPending', 'canReroute']), target: 'rerouting', actions: 'refused' },
              },
            },
            /**
             * The route's breaker is open (or its pool denied the turn for 429s): ask the later
             * fallbacks' breakers, in order, and move to
             * the first that is not open (task:fallback; back to checking, so the hook and the
             * budget see the new route). All open: wait on the route's own breaker.
             */
            rerouting: {
              entry: 'peekFallback',
              always: [
                { guard: 'fallbackUp', target: 'checking', actions: 'moveToFallback' },
                { guard: 'fallbackDownNextLeft', target: 'rerouting', reenter: true, actions: 'peekNext' },
                { guard: 'fallbacksDown', target: 'lease', actions: 'requestLease' },
              ],
              on: {
                'BREAKER.STATUS': { guard: 'isPending', actions: 'heardStatus' },
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
            { guard: not('canCompact'), target: '#agent.failed', actions: 'cannotCompact' },
            { guard: 'summarizes', target: 'waiting', actions: 'summarize' },
            { target: 'waiting', actions: 'compactNow' },
          ],
        },
        running: {
          entry: { type: 'callModel', params: ({ context }) => callInputOf(context) },
          // Left before the reply (cancel, deadline): the call's signal fires, its late reply is dropped.
          exit: 'abortCall',
          on: {
            // Each outcome settles the call and says what the reply means, in one action.
            'MODEL.REPLY': [
              { guard: 'isSummary', target: 'waiting', actions: { type: 'settleSuccess', params: { then: compacted } } },
              { guard: and(['isJudge', 'judgePasses']), target: '#agent.done', actions: { type: 'settleSuccess', params: { then: judgePassed } } },
              { guard: 'isJudge', target: '#agent.failed', actions: { type: 'settleSuccess', params: { then: judgeRejected } } },
              { guard: 'wantsTools', target: 'tools', actions: { type: 'settleSuccess', params: { then: toolsAsked } } },
              { guard: 'outputRejected', target: '#agent.failed', actions: { type: 'settleSuccess', params: { then: outputRejected } } },
              // The answer passed its checks: the judge scores it before it counts.
              { guard: 'judged', target: 'waiting', actions: { type: 'settleSuccess', params: { then: toJudge } } },
              { target: '#agent.done', actions: { type: 'settleSuccess', params: { then: finalReply } } },
            ],
            'MODEL.FAILED': [
              // The provider says the request is too long: compact and try once more.
              { guard: 'overflowOnce', target: 'compacting', actions: { type: 'settleFailure', params: { then: overflowed } } },
              // A 429 says "wait", not "this task is broken": back to the pool, which hands the
              // call to the next key that can take it (this one backs off for its Retry-After).
              // It uses no retry; only the deadline (or maxRateLimitWaits) bounds such waits.
              { guard: 'rateLimitWait', target: 'waiting', actions: { type: 'settleFailure', params: { then: rateLimitWaited } } },
              { guard: 'rateLimitedOut', target: '#agent.failed', actions: { type: 'settleFailure', params: { then: rateLimitedOut } } },
              { guard: 'canRetry', target: 'backoff', actions: { type: 'settleFailure', params: { then: retryPlanned } } },
              { target: '#agent.failed', actions: { type: 'settleFailure', params: { then: fatal } } },
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
              // Every result is in: the next turn, or none left.
              always: [
                { guard: and(['toolsDone', 'turnsLeft']), target: '#agent.active.waiting', actions: 'appendToolResults' },
                { guard: 'toolsDone', target: '#agent.failed', actions: 'outOfTurns' },
              ],
              on: {
                'TOOL.RESULT': { actions: 'recordToolResult' },
              },
            },
          },
        },
        backoff: {
          after: { backoff: 'waiting' },
        },
      },
    },
    /** Reached only with the final reply, whose outcome set the status. */
    done: {
      type: 'final',
    },
    failed: {
      type: 'final',
      entry: { type: 'giveBack', params: { status: 'failed' } },
    },
    cancelled: {
      type: 'final',
      entry: { type: 'giveBack', params: { status: 'cancelled' } },
    },
  },
});
