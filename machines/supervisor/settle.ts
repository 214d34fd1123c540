/** How an attempt's end moves the run: its task completes, retries, fails (skipping dependents) or is cancelled. */
import type { AttemptReport, ErrorInfo, RunStatus } from '../protocol.js';
import { enqueueReport } from '../kit.js';
import { rejectedCode } from '../tasks/results.js';
import type { ReviewOutcome, Settlement } from '../tasks/types.js';
import type { Enqueue, PlanExpansionInput, SupervisorContext } from './types.js';

// Made once: an options object per settle was garbage on every task.
const RETRY = Object.freeze({ retry: true });
const NO_RETRY = Object.freeze({ retry: false });

/**
 * Records an agent's end (the group it ran in has stopped it and freed its place). Returns true
 * when it stops the run (fail-fast): that `stop` is assigned only after the action that called it.
 */
export function settleAttempt(context: SupervisorContext, enqueue: Enqueue, report: AttemptReport, group: number, now: number): boolean {
  context.crew.release(group);
  const table = context.table;
  // A cache leader that ends releases the tasks held behind it (warm if it completed: the prefix was written).
  releaseGroup(context, enqueue, report.taskId, report.attempt, report.status === 'completed' && report.servedBy === undefined, now);
  const settlement = table.settle(report, context.stop === null ? RETRY : NO_RETRY);
  if (settlement.kind === 'stale') return false;
  context.crew.inFlight -= 1;
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
      // The reviewer's attempt ends here (it waits for the new draft): its counters go with the verdict.
      reportReview(enqueue, report.taskId, report.attempt, settlement.review, table);
      enqueueReport(enqueue, { type: 'task:queued', taskId: settlement.review.target });
      break;
    case 'completed':
      if (settlement.review) reportReview(enqueue, report.taskId, report.attempt, settlement.review);
      // usage: this attempt's; requests, retries and taskUsage: the task's, over all its attempts (what the journal keeps).
      const { requests, retries, usage } = table.countersNow(report.taskId);
      enqueueReport(enqueue, { type: 'task:completed', taskId: report.taskId, attempt: report.attempt, output: report.output ?? '', usage: report.usage, requests, retries, taskUsage: usage });
      reportFlow(enqueue, table, settlement);
      break;
    case 'cancelled':
      // Its requests so far count: the journal keeps them for a resume.
      enqueueReport(enqueue, { type: 'task:cancelled', taskId: report.taskId, ...table.countersOf(report.taskId) });
      break;
    case 'retry':
    case 'failed':
      return reportFailure(
        context,
        enqueue,
        report.taskId,
        report.attempt,
        report.error ?? { code: 'internal', message: 'failed', retryable: false },
        settlement,
        // A rejected answer rides on the event so the journal keeps it (the retry's feedback, a failed task's output).
        report.output !== undefined && rejectedCode(report.error) ? report.output : undefined,
      );
  }
  return false;
}

/** A failed attempt: retried (queued again), or final (its dependents skipped, fail-fast stops the run: returns true then). */
export function reportFailure(
  context: SupervisorContext,
  enqueue: Enqueue,
  taskId: string,
  attempt: number,
  error: ErrorInfo,
  settlement: Extract<Settlement, { kind: 'retry' | 'failed' }>,
  output?: string,
): boolean {
  const willRetry = settlement.kind === 'retry';
  // The task's counters so far ride on every failed attempt: the journal keeps them for a retry or a resume.
  const counters = context.table.countersOf(taskId);
  enqueueReport(enqueue, output === undefined ? { type: 'task:failed', taskId, attempt, error, willRetry, ...counters } : { type: 'task:failed', taskId, attempt, error, willRetry, output, ...counters });
  if (settlement.kind === 'retry') {
    enqueueReport(enqueue, { type: 'task:queued', taskId });
    return false;
  }
  reportFlow(enqueue, context.table, settlement);
  if (context.onFailure === 'fail-fast' && context.stop === null) {
    enqueue.assign({ stop: { status: 'failed', reason: `task "${taskId}" failed (fail-fast)` } });
    return true;
  }
  return false;
}

/** What a task's end did to those waiting on it: each skipped one with its cause and reason, then each made ready. */
export function reportFlow(enqueue: Enqueue, table: SupervisorContext['table'], flow: { unlocked?: readonly string[]; skipped?: readonly string[] }): void {
  for (const id of flow.skipped ?? []) enqueueReport(enqueue, { type: 'task:skipped', taskId: id, ...table.skipOf(id) });
  for (const id of flow.unlocked ?? []) enqueueReport(enqueue, { type: 'task:queued', taskId: id });
}

/** An aggregator that cannot expand or merge fails (not retried: its inputs would not change). */
export function failAggregate(context: SupervisorContext, enqueue: Enqueue, taskId: string, attempt: number, error: ErrorInfo): void {
  const settlement = context.table.rejectPlan(taskId, attempt, error, [], { retry: false });
  if (settlement.kind === 'failed') reportFailure(context, enqueue, taskId, attempt, error, settlement);
}

/** A reviewer's verdict; with the table, its counters too (a verdict that ends its attempt but not its task). */
export function reportReview(enqueue: Enqueue, taskId: string, attempt: number, review: ReviewOutcome, table?: SupervisorContext['table']): void {
  enqueueReport(enqueue, table ? { type: 'task:reviewed', taskId, attempt, ...review, ...table.countersOf(taskId) } : { type: 'task:reviewed', taskId, attempt, ...review });
}

/** Releases the tasks held behind a cache leader, if `taskId` leads a group. */
export function releaseGroup(context: SupervisorContext, enqueue: Enqueue, taskId: string, attempt: number | undefined, warm: boolean, now: number): void {
  const released = context.groups.release(taskId, attempt, warm, now);
  if (!released) return;
  context.table.release(released.released);
  enqueueReport(enqueue, { type: 'cache:release', taskId, group: released.key, released: released.released.length, warm });
}

export function runStatusOf(ctx: SupervisorContext, told: Pick<SupervisorContext['told'], 'runBudgetDenied' | 'runOverspent'>): RunStatus {
  if (ctx.stop) return ctx.stop.status;
  if (ctx.approvals.paused) return 'paused';
  // The run budget ran out: what completed is kept, the rest could not be paid for.
  if (told.runBudgetDenied && ctx.table.counts.completed < ctx.table.size) return 'budget_exceeded';
  // A call cost more than it reserved and spend passed the budget: never `completed` over budget.
  if (told.runOverspent) return 'budget_exceeded';
  const c = ctx.table.counts;
  if (c.completed === ctx.table.size) return 'completed';
  return c.completed === 0 && ctx.table.size > 0 ? 'failed' : 'partial';
}
