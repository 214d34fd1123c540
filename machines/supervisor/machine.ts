/**
 * The supervisor owns one run: it spawns the run's infrastructure (a key pool per provider, a
 * breaker per route, the tool bus, and a ledger when the plan has budgets), then runs the DAG: ready tasks go out as agents, up to
 * `maxInFlight` at once, best first (priority, then critical path, then FIFO); each attempt's end
 * unlocks dependents, retries the task, or skips what depended on it.
 *
 *   running -all tasks final-> closing -the bus's counters-> finished
 *   running -CANCEL, or a failure under fail-fast-> draining -no agent in flight-> closing
 *   running -only approvals wait (nothing runs, nothing is ready)-> closing (paused)
 *
 * Agents run under group actors (group.machine.ts), at most a bounded number each, which report every
 * agent's end as AGENT.ENDED (a crash as a failed attempt) and keep the agents' deadlines: no
 * actor here has an unbounded number of children or of timers. Every child error is handled,
 * and every event costs O(its own work): the task table is a mutable RunTable held by
 * reference, never copied. The parts: dispatch.ts (starting tasks), settle.ts (an attempt's
 * end), expansion.ts (a planner's sub-tasks), group.machine.ts and crew.ts (the agents' groups).
 */
import { assign, enqueueActions, fromPromise, setup, type ErrorActorEvent } from 'xstate';
import { breakerMachine } from '../breaker.machine.js';
import { CacheGroups } from '../cacheGroups.js';
import { nowOf } from '../clock.js';
import { toErrorInfo } from '../errors.js';
import { childIdOf, enqueueReport } from '../kit.js';
import { ledgerMachine } from '../ledger.machine.js';
import { poolMachine } from '../pool.machine.js';
import type { RunEvent, ToolBusEvent } from '../protocol.js';
import { RunTable } from '../tasks/runTable.js';
import type { RunResult } from '../tasks/results.js';
import { toolBusMachine } from '../toolBus.machine.js';
import { AGENTS_PER_GROUP, Crew } from './crew.js';
import { dispatchReady } from './dispatch.js';
import { applyDecision, expireApproval } from '../kinds/approval.js';
import { applyExpansion } from './expansion.js';
import { groupMachine } from './group.machine.js';
import { releaseGroup, reportFlow, runStatusOf, settleAttempt } from './settle.js';
import type { AgentEndedEvent, Enqueue, PlanExpansion, PlanExpansionInput, SupervisorContext, SupervisorEvent, SupervisorInput } from './types.js';

export type { AgentEndedEvent, Enqueue, PlanExpansion, PlanExpansionInput, SupervisorContext, SupervisorEvent, SupervisorInput } from './types.js';

const isGroup = (id: string) => id.startsWith('group:');

export const supervisorMachine = setup({
  types: {} as {
    context: SupervisorContext;
    events: SupervisorEvent;
    input: SupervisorInput;
    output: RunResult;
  },
  actors: {
    /** The agents' group; src/ (and a test) provides it with its agent: `groupMachine.provide({ actors: { agent } })`. */
    group: groupMachine,
    pool: poolMachine,
    breaker: breakerMachine,
    toolBus: toolBusMachine,
    ledger: ledgerMachine,
    /** Checks a planner's output like a plan and resolves its sub-tasks (src provides it). */
    expandPlan: fromPromise<PlanExpansion, PlanExpansionInput>(async () => ({ ok: false, issues: ['planner tasks need the runtime (no expandPlan actor provided)'] })),
  },
  actions: {
    /** Where run events go: `src/` provides it. */
    report: (_, _event: RunEvent) => {},

    spawnInfrastructure: enqueueActions(({ context, enqueue, self }) => {
      const input = context.infra;
      for (const p of input.providers) {
        enqueue.spawnChild('pool', { id: `pool:${p.name}`, systemId: `pool:${p.name}`, input: { provider: p.name, keys: p.keys } });
      }
      for (const r of input.routes) {
        enqueue.spawnChild('breaker', { id: `breaker:${r.route}`, systemId: `breaker:${r.route}`, input: r });
      }
      enqueue.spawnChild('toolBus', { id: 'toolBus', systemId: 'toolBus', input: input.toolBus });
      if (input.budgets) enqueue.spawnChild('ledger', { id: 'ledger', systemId: 'ledger', input: { budgets: input.budgets, notify: self } });
    }),

    /** The first ready tasks. (`run:started` is the runtime's to say, before the actor starts.) */
    announce: enqueueActions(({ context, enqueue }) => {
      reportFlow(enqueue as unknown as Enqueue, context.table, { skipped: context.table.initiallySkipped, unlocked: context.table.initiallyReady });
    }),

    /** Starts ready tasks, best first, while there is room in flight. */
    dispatch: enqueueActions(({ context, enqueue, self }) => {
      dispatchReady(context, enqueue as unknown as Enqueue, nowOf(self));
    }),

    /** An agent ended (its group stopped it): its task completes, retries, fails or is cancelled. */
    settle: enqueueActions(({ context, event, enqueue, self }) => {
      const { report, group } = event as AgentEndedEvent;
      settleAttempt(context, enqueue as unknown as Enqueue, report, group, nowOf(self));
    }),

    /**
     * The same, then the ready tasks start, in one action (one action list per task, not two).
     * A settlement that stops the run is assigned after this action, so nothing starts then.
     */
    settleAndDispatch: enqueueActions(({ context, event, enqueue, self }) => {
      const { report, group } = event as AgentEndedEvent;
      const now = nowOf(self);
      if (settleAttempt(context, enqueue as unknown as Enqueue, report, group, now)) return;
      dispatchReady(context, enqueue as unknown as Enqueue, now);
    }),

    /** A decision on a waiting approval (or its timeout): it completes, sends the draft back, or fails; then ready tasks start. */
    decide: enqueueActions(({ context, event, enqueue, self }) => {
      if (event.type === 'APPROVAL.DECIDE') applyDecision(context, enqueue as unknown as Enqueue, event.taskId, event.decision);
      if (event.type === 'APPROVAL.TIMEOUT') expireApproval(context, enqueue as unknown as Enqueue, event.taskId, event.round, nowOf(self));
      if (context.stop === null) dispatchReady(context, enqueue as unknown as Enqueue, nowOf(self));
    }),

    pause: assign(({ context }) => ({ approvals: { ...context.approvals, paused: true } })),

    /** A cache leader's response started: its group is warm, the tasks held behind it go out. */
    warmGroup: enqueueActions(({ context, event, enqueue, self }) => {
      if (event.type !== 'CACHE.WARM') return;
      releaseGroup(context, enqueue as unknown as Enqueue, event.taskId, event.attempt, true, nowOf(self));
    }),

    /** A planner's output was checked: its sub-tasks join the run, or the attempt fails with the problems. */
    applyExpansion: enqueueActions(({ context, event, enqueue }) => {
      applyExpansion(context, enqueue as unknown as Enqueue, event);
    }),

    /**
     * A group crashed (a bug in swarmstate): its agents went with it, and the run stops. Their
     * attempts are not settled; they no longer count in flight, so the run can drain.
     */
    dropGroup: enqueueActions(({ context, event }) => {
      context.crew.inFlight -= context.crew.drop(Number(childIdOf(event).slice('group:'.length)));
    }),

    stopOnCrash: assign({
      stop: ({ event }) => ({ status: 'failed' as const, reason: `${childIdOf(event)} crashed: ${toErrorInfo((event as ErrorActorEvent).error).message}` }),
    }),

    /** Stops the run early: nothing new starts, agents in flight are cancelled (through their groups) and drain. */
    halt: enqueueActions(({ context, enqueue }) => {
      const reason = context.stop?.reason ?? 'cancelled';
      context.groups.drainHeld();
      for (const id of context.table.cancelNotStarted()) enqueueReport(enqueue, { type: 'task:cancelled', taskId: id });
      for (const group of context.crew.busy()) enqueue.sendTo(Crew.idOf(group), { type: 'CANCEL', reason });
      enqueueReport(enqueue, { type: 'run:cancelled', reason });
    }),

    /** The ledger's news: the run budget refused a reservation (the run is then over budget unless all completed). */
    noteRunDenied: assign({ told: ({ context }) => ({ ...context.told, runBudgetDenied: true }) }),
    /** The ledger's news: a call cost more than it reserved and took the run's spend over its budget. */
    noteRunOverspent: assign({ told: ({ context }) => ({ ...context.told, runOverspent: true }) }),

    /** The run closes: the bus is asked for its counters (a bus that crashed is gone: then none). */
    askBusStats: enqueueActions(({ enqueue, self, system }) => {
      const bus = system.get('toolBus');
      const ask: ToolBusEvent = { type: 'TOOL.STATS.ASK', replyTo: self };
      if (bus) enqueue.sendTo(bus, ask);
      else enqueue.raise({ type: 'TOOL.STATS' });
    }),

    noteBusStats: assign({
      told: ({ context, event }) => ({ ...context.told, tools: (event as Extract<SupervisorEvent, { type: 'TOOL.STATS' }>).stats }),
    }),

    finish: enqueueActions(({ context, enqueue, self }) => {
      const status = runStatusOf(context, context.told);
      const result = context.table.result(context.runId, status, Math.max(0, nowOf(self) - context.startedAt));
      if (context.told.tools) result.tools = context.told.tools;
      enqueue.assign({ result });
      enqueueReport(enqueue, { type: 'run:completed', status });
    }),
  },
  guards: {
    allFinal: ({ context }) => context.table.openTasks === 0 && context.crew.inFlight === 0,
    /** Nothing runs, nothing is ready, only approvals wait (and the run does not hold for them). */
    onlyApprovalsWait: ({ context }) =>
      !context.approvals.hold && context.table.counts.waiting > 0 && context.crew.inFlight === 0 && context.expanding.size === 0 && context.table.readyCount === 0,
    noneInFlight: ({ context }) => context.crew.inFlight === 0 && context.expanding.size === 0,
    stopping: ({ context }) => context.stop !== null,
    isGroup: ({ event }) => isGroup(childIdOf(event)),
    isExpansion: ({ event }) => childIdOf(event).startsWith('expand:'),
    isBus: ({ event }) => childIdOf(event) === 'toolBus',
  },
}).createMachine({
  id: 'supervisor',
  context: ({ input, self }) => ({
    runId: input.runId,
    table: new RunTable(input.tasks, input.modelMaxInFlight, input.restore),
    crew: new Crew(input.agentsPerGroup ?? AGENTS_PER_GROUP),
    maxInFlight: input.maxInFlight,
    onFailure: input.onFailure,
    backoff: input.backoff,
    maxRateLimitWaits: input.maxRateLimitWaits,
    seed: input.seed,
    compaction: input.compaction,
    hooks: { dispatch: input.hooked === true, tool: input.toolHooked === true },
    keepLast: input.keepLast,
    groups: new CacheGroups(input.cacheTtlMs),
    expanding: new Map(),
    startedAt: nowOf(self),
    infra: { providers: input.providers, routes: input.routes, toolBus: input.toolBus, budgets: input.budgets, routeNames: new Map() },
    stop: null,
    told: { runBudgetDenied: false, runOverspent: false, tools: undefined },
    result: null,
    approvals: { early: new Map(Object.entries(input.decisions ?? {})), hold: input.holdApprovals === true, paused: false },
  }),
  entry: ['announce', 'spawnInfrastructure'],
  initial: 'running',
  output: ({ context }) => context.result!,
  // The ledger's news may come while the run runs or drains (never once it has finished).
  on: { 'LEDGER.RUN_DENIED': { actions: 'noteRunDenied' }, 'LEDGER.RUN_OVERSPENT': { actions: 'noteRunOverspent' } },
  states: {
    running: {
      entry: 'dispatch',
      always: [
        { guard: 'stopping', target: 'draining' },
        { guard: 'allFinal', target: 'closing' },
        { guard: 'onlyApprovalsWait', target: 'closing', actions: 'pause' },
      ],
      on: {
        CANCEL: {
          target: 'draining',
          actions: assign({ stop: ({ event }) => ({ status: 'cancelled' as const, reason: event.reason ?? 'cancelled by the caller' }) }),
        },
        'CACHE.WARM': { actions: ['warmGroup', 'dispatch'] },
        'APPROVAL.DECIDE': { actions: 'decide' },
        'APPROVAL.TIMEOUT': { actions: 'decide' },
        'AGENT.ENDED': { actions: 'settleAndDispatch' },
        'xstate.done.actor.*': { guard: 'isExpansion', actions: ['applyExpansion', 'dispatch'] },
        'xstate.error.actor.*': [
          { guard: 'isExpansion', actions: ['applyExpansion', 'dispatch'] },
          // A group, pool, breaker or the bus failing is a bug in swarmstate: stop cleanly, keep results.
          { guard: 'isGroup', target: 'draining', actions: ['dropGroup', 'stopOnCrash'] },
          { target: 'draining', actions: 'stopOnCrash' },
        ],
      },
    },
    draining: {
      entry: 'halt',
      always: { guard: 'noneInFlight', target: 'closing' },
      on: {
        'AGENT.ENDED': { actions: 'settle' },
        'xstate.done.actor.*': { guard: 'isExpansion', actions: 'applyExpansion' },
        'xstate.error.actor.*': [
          { guard: 'isExpansion', actions: 'applyExpansion' },
          { guard: 'isGroup', actions: 'dropGroup' },
          // Infrastructure failing while the run drains: already stopping; the error is handled.
          {},
        ],
      },
    },
    /** Nothing runs any more: the bus's counters are asked for, by event, for the result. */
    closing: {
      entry: 'askBusStats',
      on: {
        'TOOL.STATS': { target: 'finished', actions: 'noteBusStats' },
        'xstate.error.actor.*': [
          // The bus failing before it answers: the result goes without its counters.
          { guard: 'isBus', target: 'finished' },
          // Anything else failing now: nothing runs that it could stop.
          {},
        ],
      },
    },
    finished: {
      type: 'final',
      entry: 'finish',
    },
  },
});
