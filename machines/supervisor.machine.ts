/**
 * The supervisor owns one run: it spawns the run's infrastructure (a key pool per provider, a
 * breaker per route, the tool bus, and a ledger when the plan has budgets), then runs the DAG: ready tasks go out as agents, up to
 * `maxInFlight` at once, best first (priority, then critical path, then FIFO); each attempt's end
 * unlocks dependents, retries the task, or skips what depended on it.
 *
 *   running -all tasks final-> finished
 *   running -CANCEL, or a failure under fail-fast-> draining -no agent in flight-> finished
 *
 * Every child error is handled (an agent that crashes is a failed attempt), only in-flight agents
 * stay alive, and every event costs O(its own work): the task table is a mutable RunTable held by
 * reference, never copied.
 */
import {
  assign,
  enqueueActions,
  fromPromise,
  setup,
  stopChild,
  type AnyActorRef,
  type DoneActorEvent,
  type ErrorActorEvent,
} from 'xstate';
import { agentMachine, type AgentContext, type AgentInput } from './agent/index.js';
import { handBack } from './agent/index.js';
import { breakerMachine, type BreakerInput } from './breaker.machine.js';
import { nowOf } from './clock.js';
import { toErrorInfo } from './errors.js';
import { poolMachine } from './pool.machine.js';
import { childIdOf, enqueueReport } from './kit.js';
import { fillPlaceholders, renderPrompt } from './prompt.js';
import type { AttemptReport, KeyLimits, RunEvent, RunStatus } from './protocol.js';
import { deriveSeed, nextRandom } from './random.js';
import { RunTable, type Feedback, type ReviewOutcome, type RunRestore, type RunResult, type Settlement, type SupervisedTask } from './runTable.js';
import { revisionPrompt } from './review.js';
import { CacheGroups, cacheGroupKey, MIN_CACHE_PREFIX_TOKENS } from './cacheGroups.js';
import { estimateTextTokens } from './tokens.js';
import { errorInfo } from './errors.js';
import { ZERO_USAGE, type CacheWarmEvent, type ErrorInfo, type Usage } from './protocol.js';
import { AgentSlots } from './slots.js';
import { toolBusMachine, type ToolBusInput, type ToolBusStats } from './toolBus.machine.js';
import { ledgerMachine, type LedgerBudgets } from './ledger.machine.js';
import { aggregateStep, reducePrompt, type Group } from './mapReduceSteps.js';
import type { CallTarget } from './agent/index.js';

export interface SupervisorInput {
  runId: string;
  tasks: SupervisedTask[];
  providers: { name: string; keys: { keyId: string; limits: KeyLimits; probation?: boolean }[] }[];
  /** One breaker per route `<provider>/<model>`. */
  routes: BreakerInput[];
  /** The tool bus: its tools and its batching, caching and timeout settings. */
  toolBus: ToolBusInput;
  maxInFlight: number;
  /** Caps per model (the plan's model names) on tasks running at once, beside maxInFlight. */
  modelMaxInFlight?: Record<string, number>;
  onFailure: 'continue' | 'fail-fast';
  backoff: { baseMs: number; maxMs: number };
  /** 429s one attempt may wait out before it fails; unset: only its deadline bounds them. */
  maxRateLimitWaits?: number;
  seed: number;
  /** The model that writes compaction summaries, if the plan names one. */
  compaction?: CallTarget;
  /** Budgets: with any, a ledger joins the run and every priced call reserves its worst case. */
  budgets?: LedgerBudgets;
  /** The run has a beforeDispatch hook: every model call asks it first. */
  hooked?: boolean;
  /** The run has a beforeToolCall hook: every tool call asks it first. */
  toolHooked?: boolean;
  /** Messages an agent keeps at the end when it compacts. */
  keepLast?: number;
  /** Cache-aware fan-out: how long a written prefix stays readable (ms). Default 300000. */
  cacheTtlMs?: number;
  /** A resumed run: what its earlier life had done (finished tasks are not run again). */
  restore?: RunRestore;
}

/** A planner's output, to be checked and turned into sub-tasks by the `expandPlan` actor. */
export interface PlanExpansionInput {
  taskId: string;
  attempt: number;
  output: string;
  /** The planner's depth (its sub-tasks are one deeper). */
  depth: number;
  /** A map: its prompt and system with its deps' outputs placed, and the `from` task's output. */
  map?: { prompt: string; system?: string; itemsText?: string };
  /** A reduce, or a group of one that splits: the groups of its tree (the root last). */
  reduce?: { groups: Group[] };
}

/** The sub-tasks, ready to join the run, or every problem with the output (it is then rejected). */
export type PlanExpansion = { ok: true; tasks: SupervisedTask[] } | { ok: false; issues: string[] };

export interface SupervisorContext {
  runId: string;
  table: RunTable;
  /** Which attempt each agent actor id stands for. */
  slots: AgentSlots;
  inFlight: number;
  maxInFlight: number;
  onFailure: 'continue' | 'fail-fast';
  backoff: { baseMs: number; maxMs: number };
  maxRateLimitWaits: number | undefined;
  seed: number;
  compaction: SupervisorInput['compaction'];
  hooked: boolean;
  toolHooked: boolean;
  keepLast: number | undefined;
  startedAt: number;
  /** What the run's infrastructure is made of (spawned once, at the start). */
  infra: Pick<SupervisorInput, 'providers' | 'routes' | 'toolBus' | 'budgets'>;
  /** Cache-aware fan-out: groups of tasks sharing a prompt prefix. */
  groups: CacheGroups;
  /** Planner outputs being expanded: actor id -> the attempt it came from. */
  expanding: Map<string, { taskId: string; attempt: number; output: string; usage: Usage }>;
  /** Why the run stopped early, if it did. */
  stop: { status: Extract<RunStatus, 'failed' | 'cancelled'>; reason: string } | null;
  result: RunResult | null;
}

export type SupervisorEvent =
  | { type: 'CANCEL'; reason?: string }
  | CacheWarmEvent
  | DoneActorEvent<AttemptReport, string>
  | ErrorActorEvent<unknown, string>;


/** The report of an agent actor that crashed: a failed attempt of whichever task held its slot. */
function crashReport(slots: AgentSlots, actorId: string, error: unknown, last: AgentContext | undefined): AttemptReport {
  const holder = slots.holder(actorId) ?? { taskId: '', attempt: 0 };
  const info = toErrorInfo(error);
  return {
    taskId: holder.taskId,
    attempt: holder.attempt,
    status: 'failed',
    error: { ...info, message: `agent crashed: ${info.message}` },
    // What the agent had done before it crashed still counts (calls sent are paid for).
    usage: last?.usage ?? { inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0 },
    requests: last?.requests ?? 0,
    retries: last?.retries ?? 0,
    turns: last?.turn ?? 0,
    messages: last?.messages ?? [],
    ...(last ? { costUsd: last.costUsd, ...(last.unpricedCalls > 0 ? { unpricedCalls: last.unpricedCalls } : {}) } : {}),
  };
}

/** The last context of a child agent (one that crashed keeps its last snapshot). */
function lastContextOf(self: AnyActorRef, actorId: string): AgentContext | undefined {
  return (self.getSnapshot().children[actorId]?.getSnapshot() as { context?: AgentContext } | undefined)?.context;
}

function runStatusOf(ctx: SupervisorContext, runBudgetDenied: boolean): RunStatus {
  if (ctx.stop) return ctx.stop.status;
  // The run budget ran out: what completed is kept, the rest could not be paid for.
  if (runBudgetDenied && ctx.table.counts.completed < ctx.table.size) return 'budget_exceeded';
  const c = ctx.table.counts;
  if (c.completed === ctx.table.size) return 'completed';
  return c.completed === 0 && ctx.table.size > 0 ? 'failed' : 'partial';
}


/** What settleAttempt needs of enqueueActions' `enqueue`: run an action, assign context. */
export type Enqueue = ((action: unknown) => void) & {
  assign(values: Partial<SupervisorContext>): void;
  spawnChild(src: 'expandPlan', options: { id: string; input: PlanExpansionInput }): void;
};

/** Records an agent's end: its task completes, retries, fails (skipping dependents) or is cancelled. */
function settleAttempt(context: SupervisorContext, enqueue: Enqueue, report: AttemptReport, actorId: string, now: number): void {
  enqueue(stopChild(actorId));
  context.slots.release(actorId);
  const table = context.table;
  // A cache leader that ends releases the tasks held behind it (warm if it completed: the prefix was written).
  releaseGroup(context, enqueue, report.taskId, report.attempt, report.status === 'completed' && report.servedBy === undefined, now);
  const settlement = table.settle(report, { retry: context.stop === null });
  if (settlement.kind === 'stale') return;
  enqueue.assign({ inFlight: context.inFlight - 1 });
  switch (settlement.kind) {
    case 'plan': {
      // The output becomes sub-tasks (checked like a plan by the `expandPlan` actor `src/` provides).
      const id = `expand:${report.taskId}`;
      context.expanding.set(id, { taskId: report.taskId, attempt: report.attempt, output: settlement.output, usage: report.usage });
      const input: PlanExpansionInput = { taskId: report.taskId, attempt: report.attempt, output: settlement.output, depth: table.spec(report.taskId).depth ?? 0 };
      enqueue.spawnChild('expandPlan', { id, input });
      break;
    }
    case 'revise':
      reportReview(enqueue, report.taskId, report.attempt, settlement.review);
      enqueueReport(enqueue, { type: 'task:queued', taskId: settlement.review.target });
      break;
    case 'completed':
      if (settlement.review) reportReview(enqueue, report.taskId, report.attempt, settlement.review);
      // usage: this attempt's; requests and retries: the task's, over all its attempts (what the journal keeps).
      enqueueReport(enqueue, { type: 'task:completed', taskId: report.taskId, attempt: report.attempt, output: report.output ?? '', usage: report.usage, ...table.countersOf(report.taskId) });
      for (const id of settlement.unlocked) enqueueReport(enqueue, { type: 'task:queued', taskId: id });
      break;
    case 'cancelled':
      enqueueReport(enqueue, { type: 'task:cancelled', taskId: report.taskId });
      break;
    case 'retry':
    case 'failed':
      reportFailure(context, enqueue, report.taskId, report.attempt, report.error ?? { code: 'internal', message: 'failed', retryable: false }, settlement);
      break;
  }
}

/** A failed attempt: retried (queued again), or final (its dependents skipped, fail-fast stops the run). */
function reportFailure(
  context: SupervisorContext,
  enqueue: Enqueue,
  taskId: string,
  attempt: number,
  error: ErrorInfo,
  settlement: Extract<Settlement, { kind: 'retry' | 'failed' }>,
): void {
  enqueueReport(enqueue, { type: 'task:failed', taskId, attempt, error, willRetry: settlement.kind === 'retry' });
  if (settlement.kind === 'retry') {
    enqueueReport(enqueue, { type: 'task:queued', taskId });
    return;
  }
  for (const id of settlement.skipped) enqueueReport(enqueue, { type: 'task:skipped', taskId: id, reason: `depends on "${taskId}", which failed` });
  if (context.onFailure === 'fail-fast' && context.stop === null) {
    enqueue.assign({ stop: { status: 'failed', reason: `task "${taskId}" failed (fail-fast)` } });
  }
}

/** An aggregator that cannot expand or merge fails (not retried: its inputs would not change). */
function failAggregate(context: SupervisorContext, enqueue: Enqueue, taskId: string, attempt: number, error: ErrorInfo): void {
  const settlement = context.table.rejectPlan(taskId, attempt, error, [], { retry: false });
  if (settlement.kind === 'failed') reportFailure(context, enqueue, taskId, attempt, error, settlement);
}

function reportReview(enqueue: Enqueue, taskId: string, attempt: number, review: ReviewOutcome): void {
  enqueueReport(enqueue, { type: 'task:reviewed', taskId, attempt, ...review });
}

/** Releases the tasks held behind a cache leader, if `taskId` leads a group. */
function releaseGroup(context: SupervisorContext, enqueue: Enqueue, taskId: string, attempt: number | undefined, warm: boolean, now: number): void {
  const released = context.groups.release(taskId, attempt, warm, now);
  if (!released) return;
  context.table.release(released.released);
  enqueueReport(enqueue, { type: 'cache:release', taskId, group: released.key, released: released.released.length, warm });
}

/** The prompt of an attempt that runs again for a reason: a reviewer's findings, a rejected plan. */
function withFeedback(prompt: string, feedback: Feedback | undefined): string {
  if (!feedback) return prompt;
  if (feedback.kind === 'review') return revisionPrompt(prompt, feedback);
  if (feedback.kind === 'output') return rejectedOutputPrompt(prompt, feedback);
  return `${prompt}\n\n<rejected-plan>\nYour previous answer was not a valid list of sub-tasks:\n${feedback.issues.map((i) => `- ${i}`).join('\n')}\nAnswer again with a corrected JSON list.\n</rejected-plan>`;
}

/** The prompt of an attempt whose last answer failed its checks: the answer and what was wrong with it. */
function rejectedOutputPrompt(prompt: string, feedback: Extract<Feedback, { kind: 'output' }>): string {
  const what = feedback.code === 'invalid_output' ? 'did not meet the required output schema' : 'was rejected by a quality check';
  return (
    `${prompt}\n\n<rejected-answer>\nYour previous answer ${what}:\n${feedback.problems.map((p) => `- ${p}`).join('\n')}\n\n` +
    `<previous-answer>\n${feedback.draft}\n</previous-answer>\nAnswer the task again in full, fixing these problems.\n</rejected-answer>`
  );
}

/** The route whose cumulative weight first passes `r` (in [0, 1)) of the total. */
function pickRoute<T extends { weight: number }>(routes: readonly T[], r: number): T {
  const total = routes.reduce((sum, x) => sum + x.weight, 0);
  let at = r * total;
  for (const route of routes) {
    at -= route.weight;
    if (at < 0) return route;
  }
  return routes[routes.length - 1]!;
}

export const supervisorMachine = setup({
  types: {} as {
    context: SupervisorContext;
    events: SupervisorEvent;
    input: SupervisorInput;
    output: RunResult;
  },
  actors: {
    agent: agentMachine,
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

    spawnInfrastructure: enqueueActions(({ context, enqueue }) => {
      const input = context.infra;
      for (const p of input.providers) {
        enqueue.spawnChild('pool', { id: `pool:${p.name}`, systemId: `pool:${p.name}`, input: { provider: p.name, keys: p.keys } });
      }
      for (const r of input.routes) {
        enqueue.spawnChild('breaker', { id: `breaker:${r.route}`, systemId: `breaker:${r.route}`, input: r });
      }
      enqueue.spawnChild('toolBus', { id: 'toolBus', systemId: 'toolBus', input: input.toolBus });
      if (input.budgets) enqueue.spawnChild('ledger', { id: 'ledger', systemId: 'ledger', input: { budgets: input.budgets } });
    }),

    /** The first ready tasks. (`run:started` is the runtime's to say, before the actor starts.) */
    announce: enqueueActions(({ context, enqueue }) => {
      for (const id of context.table.initiallySkipped) enqueueReport(enqueue, { type: 'task:skipped', taskId: id, reason: 'a task it depends on failed' });
      for (const id of context.table.initiallyReady) enqueueReport(enqueue, { type: 'task:queued', taskId: id });
    }),

    /** Starts ready tasks, best first, while there is room in flight. */
    dispatch: enqueueActions(({ context, enqueue, self }) => {
      // A run that is stopping starts nothing new (fail-fast decided in this very step).
      if (context.stop !== null) return;
      let inFlight = context.inFlight;
      const table = context.table;
      while ((inFlight < context.maxInFlight || table.aggregateReady) && table.readyCount > 0) {
        const next = table.startNext();
        if (!next) break; // every ready task's model is at its cap
        const { spec, attempt } = next;
        // A map, or a reduce that does not fit one call, expands or collects: no agent, no slot.
        if ((spec.kind === 'map' || spec.kind === 'reduce') && aggregateStep(context, enqueue as unknown as Enqueue, spec, attempt, (id, n, error) => failAggregate(context, enqueue as unknown as Enqueue, id, n, error)) === 'done') continue;
        // Taken only for an aggregator (one whose model was at its cap, or a reduce that runs as
        // one call): a task that needs a slot waits for the next one.
        if (inFlight >= context.maxInFlight) {
          table.requeue(spec.id);
          break;
        }
        const input: AgentInput = {
          taskId: spec.id,
          attempt,
          provider: spec.provider,
          model: spec.model,
          maxTokens: spec.maxTokens,
          priority: spec.priority,
          prompt: withFeedback(spec.kind === 'reduce' ? reducePrompt(table, spec) : renderPrompt(spec.prompt, spec.deps, (id) => table.output(id) ?? ''), next.feedback),
          tools: spec.tools,
          maxTurns: spec.maxTurns,
          retries: next.retriesLeft,
          timeoutMs: spec.timeoutMs,
          backoff: context.backoff,
          seed: deriveSeed(context.seed, `${spec.id}:${attempt}`),
        };
        if (context.maxRateLimitWaits !== undefined) input.maxRateLimitWaits = context.maxRateLimitWaits;
        // A system prompt may place dependency outputs too; unplaced ones go only to the prompt.
        if (spec.inputBudget !== undefined) input.inputBudget = spec.inputBudget;
        input.modelName = spec.modelName;
        if (spec.fallbacks?.length) input.fallbacks = spec.fallbacks;
        if (context.hooked) input.hooked = true;
        if (context.toolHooked) input.toolHooked = true;
        if (spec.price) input.price = spec.price;
        if (context.infra.budgets) input.budgeted = true;
        if (spec.toolTokens) input.toolTokens = spec.toolTokens;
        if (context.compaction) input.compaction = context.compaction;
        if (context.keepLast !== undefined) input.keepLast = context.keepLast;
        if (spec.routes) {
          // A weighted route for this attempt, drawn from the run's seed (a retry may draw another).
          const route = pickRoute(spec.routes, nextRandom(deriveSeed(context.seed, `${spec.id}:${attempt}:route`))[0]);
          input.provider = route.provider;
          input.model = route.model;
          input.maxTokens = route.maxTokens;
          if (route.price) input.price = route.price;
          else delete input.price;
        }
        if (spec.system !== undefined) input.system = fillPlaceholders(spec.system, spec.deps, (id) => table.output(id) ?? '');
        if (spec.depth) input.depth = spec.depth;
        if (spec.output) input.output = spec.output;
        if (spec.judge) input.judge = spec.judge;
        if (spec.cacheFanOut) {
          // Cache-aware fan-out: one task of a cold prefix goes first, the others wait for its response.
          const system = input.system ?? '';
          if (estimateTextTokens(system) + (spec.toolTokens ?? 0) >= (spec.cacheMinTokens ?? MIN_CACHE_PREFIX_TOKENS)) {
            const group = cacheGroupKey(`${input.provider}/${input.model}`, spec.tools, system);
            const admission = context.groups.admit(group, spec.id, attempt, nowOf(self));
            if (admission === 'hold') {
              table.hold(spec.id);
              continue;
            }
            if (admission === 'lead') {
              input.cacheLead = true;
              enqueueReport(enqueue, { type: 'cache:lead', taskId: spec.id, group });
            }
          }
        }
        const id = context.slots.take(spec.id, attempt);
        enqueue.spawnChild('agent', { id, input });
        enqueue.sendTo(id, { type: 'START' });
        enqueueReport(enqueue, { type: 'task:started', taskId: spec.id, attempt, model: spec.modelName, route: `${input.provider}/${input.model}` });
        inFlight += 1;
      }
      if (inFlight !== context.inFlight) enqueue.assign({ inFlight });
    }),

    /** Records an agent's end: its task completes, retries, fails (skipping dependents) or is cancelled. */
    settle: enqueueActions(({ context, enqueue, self }, params: { report: AttemptReport; actorId: string }) => {
      settleAttempt(context, enqueue as unknown as Enqueue, params.report, params.actorId, nowOf(self));
    }),

    /** A cache leader's response started: its group is warm, the tasks held behind it go out. */
    warmGroup: enqueueActions(({ context, event, enqueue, self }) => {
      const { taskId, attempt } = event as CacheWarmEvent;
      releaseGroup(context, enqueue as unknown as Enqueue, taskId, attempt, true, nowOf(self));
    }),

    /** A planner's output was checked: its sub-tasks join the run, or the attempt fails with the problems. */
    applyExpansion: enqueueActions(({ context, event, enqueue }) => {
      const actorId = childIdOf(event);
      enqueue(stopChild(actorId));
      const pending = context.expanding.get(actorId);
      context.expanding.delete(actorId);
      if (!pending) return;
      const { taskId, attempt } = pending;
      const expansion: PlanExpansion = event.type.startsWith('xstate.done.')
        ? (event as unknown as DoneActorEvent<PlanExpansion>).output
        : { ok: false, issues: [`checking the plan failed: ${toErrorInfo((event as ErrorActorEvent).error).message}`] };
      const table = context.table;
      const q = enqueue as unknown as Enqueue;
      const spec = table.spec(taskId);
      const aggregator = spec.kind === 'map' || spec.kind === 'reduce';
      if (expansion.ok && context.stop === null && aggregator) {
        const settlement = table.expandInPlace(taskId, attempt, expansion.tasks);
        if (settlement.kind !== 'expanded') return;
        enqueueReport(q, { type: 'task:planned', taskId, attempt, subtasks: expansion.tasks.map((t) => t.id), depth: (spec.depth ?? 0) + 1 });
        for (const id of settlement.unlocked) enqueueReport(q, { type: 'task:queued', taskId: id });
        return;
      }
      if (expansion.ok && context.stop === null) {
        const settlement = table.expand(taskId, attempt, expansion.tasks);
        if (settlement.kind !== 'completed') return;
        enqueueReport(q, { type: 'task:planned', taskId, attempt, subtasks: expansion.tasks.map((t) => t.id), depth: (table.spec(taskId).depth ?? 0) + 1 });
        enqueueReport(q, { type: 'task:completed', taskId, attempt, output: pending.output, usage: pending.usage, ...table.countersOf(taskId) });
        for (const id of settlement.unlocked) enqueueReport(q, { type: 'task:queued', taskId: id });
        return;
      }
      if (context.stop !== null) {
        // The run is stopping: the planner's answer is not judged, the task is cancelled.
        const settlement = table.settle({ taskId, attempt, status: 'cancelled', usage: ZERO_USAGE, requests: 0, retries: 0, turns: 0, messages: [] }, { retry: false });
        if (settlement.kind === 'cancelled') enqueueReport(q, { type: 'task:cancelled', taskId });
        return;
      }
      const issues = expansion.ok ? [] : expansion.issues;
      if (aggregator) {
        // Items that are not a list, or a bad key: the same every time, so not retried.
        failAggregate(context, q, taskId, attempt, errorInfo('invalid_plan', `task "${taskId}": ${issues.join('; ')}`));
        return;
      }
      const error = errorInfo('invalid_plan', `task "${taskId}": its output is not a valid list of sub-tasks: ${issues.join('; ')}`, !expansion.ok);
      enqueueReport(q, { type: 'task:plan-rejected', taskId, attempt, issues });
      const settlement = table.rejectPlan(taskId, attempt, error, issues, { retry: context.stop === null });
      if (settlement.kind === 'retry' || settlement.kind === 'failed') reportFailure(context, q, taskId, attempt, error, settlement);
    }),

    /**
     * An agent that crashed never reached a final state, so it gave nothing back: hand back for
     * it what its last context says it held (lease, reservation, admission, pending requests),
     * and record a failed attempt that keeps what it had done.
     */
    settleCrash: enqueueActions(({ context, event, enqueue, self, system }) => {
      const actorId = childIdOf(event);
      const last = lastContextOf(self, actorId);
      for (const { to, event: message } of last ? handBack(last) : []) {
        const target = system.get(to);
        if (target) enqueue.sendTo(target, message);
      }
      settleAttempt(context, enqueue as unknown as Enqueue, crashReport(context.slots, actorId, (event as ErrorActorEvent).error, last), actorId, nowOf(self));
    }),

    /** Stops the run early: nothing new starts, agents in flight are cancelled and drain. */
    halt: enqueueActions(({ context, enqueue, self }) => {
      const reason = context.stop?.reason ?? 'cancelled';
      context.groups.drainHeld();
      for (const id of context.table.cancelNotStarted()) enqueueReport(enqueue, { type: 'task:cancelled', taskId: id });
      for (const [id, child] of Object.entries(self.getSnapshot().children)) {
        if (AgentSlots.isAgent(id) && child) enqueue.sendTo(child, { type: 'CANCEL', reason });
      }
      enqueueReport(enqueue, { type: 'run:cancelled', reason });
    }),

    finish: enqueueActions(({ context, enqueue, self }) => {
      const ledger = self.getSnapshot().children.ledger?.getSnapshot() as { context?: { runDenied?: boolean } } | undefined;
      const status = runStatusOf(context, ledger?.context?.runDenied === true);
      const result = context.table.result(context.runId, status, Math.max(0, nowOf(self) - context.startedAt));
      // The bus's counters, as they stand at the end (a copy: the bus updates its own in place).
      const bus = self.getSnapshot().children.toolBus?.getSnapshot() as { context?: { stats?: ToolBusStats } } | undefined;
      if (bus?.context?.stats) result.tools = structuredClone(bus.context.stats);
      enqueue.assign({ result });
      enqueueReport(enqueue, { type: 'run:completed', status });
    }),
  },
  guards: {
    allFinal: ({ context }) => context.table.openTasks === 0 && context.inFlight === 0,
    noneInFlight: ({ context }) => context.inFlight === 0 && context.expanding.size === 0,
    stopping: ({ context }) => context.stop !== null,
    isAgent: ({ event }) => AgentSlots.isAgent(childIdOf(event)),
    isExpansion: ({ event }) => childIdOf(event).startsWith('expand:'),
  },
}).createMachine({
  id: 'supervisor',
  context: ({ input, self }) => ({
    runId: input.runId,
    table: new RunTable(input.tasks, input.modelMaxInFlight, input.restore),
    slots: new AgentSlots(),
    inFlight: 0,
    maxInFlight: input.maxInFlight,
    onFailure: input.onFailure,
    backoff: input.backoff,
    maxRateLimitWaits: input.maxRateLimitWaits,
    seed: input.seed,
    compaction: input.compaction,
    hooked: input.hooked === true,
    toolHooked: input.toolHooked === true,
    keepLast: input.keepLast,
    groups: new CacheGroups(input.cacheTtlMs),
    expanding: new Map(),
    startedAt: nowOf(self),
    infra: { providers: input.providers, routes: input.routes, toolBus: input.toolBus, budgets: input.budgets },
    stop: null,
    result: null,
  }),
  entry: ['announce', 'spawnInfrastructure'],
  initial: 'running',
  output: ({ context }) => context.result!,
  states: {
    running: {
      entry: 'dispatch',
      always: [
        { guard: 'stopping', target: 'draining' },
        { guard: 'allFinal', target: 'finished' },
      ],
      on: {
        CANCEL: {
          target: 'draining',
          actions: assign({ stop: ({ event }) => ({ status: 'cancelled' as const, reason: event.reason ?? 'cancelled by the caller' }) }),
        },
        'CACHE.WARM': { actions: ['warmGroup', 'dispatch'] },
        'xstate.done.actor.*': [
          {
            guard: 'isAgent',
            actions: [
              { type: 'settle', params: ({ event }) => ({ report: (event as DoneActorEvent<AttemptReport>).output, actorId: childIdOf(event) }) },
              'dispatch',
            ],
          },
          { guard: 'isExpansion', actions: ['applyExpansion', 'dispatch'] },
        ],
        'xstate.error.actor.*': [
          {
            guard: 'isAgent',
            actions: [
              'settleCrash',
              'dispatch',
            ],
          },
          { guard: 'isExpansion', actions: ['applyExpansion', 'dispatch'] },
          {
            // A pool, breaker or the bus failing is a bug in swarmstate: stop cleanly, keep results.
            target: 'draining',
            actions: assign({
              stop: ({ event }) => ({ status: 'failed' as const, reason: `${childIdOf(event)} crashed: ${toErrorInfo((event as ErrorActorEvent).error).message}` }),
            }),
          },
        ],
      },
    },
    draining: {
      entry: 'halt',
      always: { guard: 'noneInFlight', target: 'finished' },
      on: {
        'xstate.done.actor.*': [
          {
            guard: 'isAgent',
            actions: { type: 'settle', params: ({ event }) => ({ report: (event as DoneActorEvent<AttemptReport>).output, actorId: childIdOf(event) }) },
          },
          { guard: 'isExpansion', actions: 'applyExpansion' },
        ],
        'xstate.error.actor.*': [
          {
            guard: 'isAgent',
            actions: 'settleCrash',
          },
          { guard: 'isExpansion', actions: 'applyExpansion' },
          // Infrastructure failing while the run drains: already stopping; the error is handled.
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
