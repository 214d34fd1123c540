/**
 * What a run returns (`RunResult`: every task's outcome, the totals, the routes' stats) and how
 * the run table builds it: each attempt's spend tallied as it ends, the result once, at the end.
 */
import type { ToolBusStats } from '../toolBusBook.js';
import type { AttemptReport, ErrorInfo, Message, RunStatus, SkipCause, Usage } from '../protocol.js';
import { addUsage } from '../protocol.js';
import { CountBook, type RunCounts, type TaskTally } from './counts.js';
import { isFinal, type FinalTaskStatus } from './lifecycle.js';
import { isAggregator, type TaskRecord } from './types.js';

export type { FinalTaskStatus };

export interface TaskResult {
  id: string;
  /** A paused run (`paused`) leaves its approvals `waiting` and what waits behind them `pending`. */
  status: FinalTaskStatus | 'waiting' | 'pending';
  /**
   * The answer's text; for a task with `output.schema`, the parsed value (src: `parsedOutput`).
   * A map's is the array of its items' outputs in item order (each parsed when it is JSON, else
   * its text); a reduce's is its root's output. A task that failed with `invalid_output` or
   * `rejected_output` keeps its last answer here. Typed per task id by `TypedRunResult` (src/plan/typed.ts).
   */
  output?: unknown;
  error?: ErrorInfo;
  /** Agents started for it, over every life of the run (a resume, a retry); 0 for a container. */
  attempts: number;
  /** The plan's model name. */
  model: string;
  /** Over all its attempts, every life of the run. */
  usage: Usage;
  /** Model calls sent, failed ones and 429s included, over all its attempts, every life of the run. */
  requests: number;
  /** Calls sent again within an attempt, and new attempts after a retryable failure. */
  retries: number;
  /**
   * A map, or a reduce that split its inputs into groups: its items or groups are the tasks, it
   * runs no attempt of its own (attempts, requests and cost 0) and is counted in `totals.containers`.
   */
  container?: true;
  /** The conversation of the last attempt, kept when the task failed. */
  transcript?: Message[];
  /** The fallback model that served it, when its own model's route was down or overloaded. */
  servedBy?: string;
  /** What its calls cost in USD; null when the model has no price. Filled in by the runtime. */
  costUsd?: number | null;
  /** A planner's sub-tasks, as they ran (`<planner>/<id>`). */
  subtasks?: string[];
  /** The planner task that made this one. */
  parent?: string;
  /** A review task: how many reviews it made, and whether the last one approved. */
  review?: { target: string; rounds: number; approved: boolean };
  /** A reviewed task: how many times a reviewer sent it back. */
  revisions?: number;
  /** A map with `dedupe`: item outputs dropped as duplicates (not in its output, not read by a reduce). */
  dropped?: number;
  /**
   * A skipped task: why. `condition`: its `when` was false; `dependency`: a task it needs failed or
   * was skipped (for a join, none of its deps completed). `error.message` says it in words.
   */
  cause?: SkipCause;
}

/** The run's counts (machines/tasks/counts.ts adds them up, for every surface alike). */
export interface RunTotals {
  /** Tasks, containers left out: completed + failed + skipped + cancelled. */
  tasks: number;
  completed: number;
  failed: number;
  skipped: number;
  cancelled: number;
  /** Maps and reduces that expanded (their items and groups are among the tasks). */
  containers: number;
  /** Agents started, over every life of the run. */
  attempts: number;
  requests: number;
  retries: number;
  usage: Usage;
  durationMs: number;
  /** USD over the tasks with a known price; null when none has one. Filled in by the runtime. */
  costUsd?: number | null;
}

export interface RunResult {
  runId: string;
  status: RunStatus;
  tasks: Record<string, TaskResult>;
  totals: RunTotals;
  /** The tool bus's counters: requested, executed, deduplicated, cached, failed, timed out, per tool. */
  tools?: ToolBusStats;
  /** Per route (`<provider>/<model>`): calls, errors, latency percentiles and cost. */
  routes?: Record<string, RouteStats>;
}

export interface RouteStats {
  requests: number;
  errors: number;
  errorRate: number;
  p50Ms: number;
  p99Ms: number;
  /** USD of its priced calls. */
  costUsd: number;
}

/** An answer that failed its checks: the code, when the error is one. */
export const rejectedCode = (error: ErrorInfo | undefined) =>
  error?.code === 'invalid_output' || error?.code === 'rejected_output' ? error.code : undefined;

/** What attempts spent: per task (on its record) and per route (every call's latency and outcome, summed up in the result). */
export class SpendTally {
  private readonly routes = new Map<string, { ms: number[]; errors: number; costUsd: number }>();

  /** An attempt's spend and counters onto its task, and its calls onto their routes. */
  tally(record: TaskRecord, report: AttemptReport): void {
    record.usage = addUsage(record.usage, report.usage);
    if (report.calls) this.add(report.calls);
    if (report.costUsd !== undefined) record.costUsd += report.costUsd;
    if (report.unpricedCalls) record.unpricedCalls += report.unpricedCalls;
    record.requests += report.requests;
    record.retries += report.retries;
    // Retries within an attempt take from the task's one budget, as new attempts do.
    record.retriesCounted += report.retries;
    // Only the last attempt's route counts: a retry on the task's own model clears it.
    if (report.servedBy !== undefined) record.servedBy = report.servedBy;
    else delete record.servedBy;
  }

  private add(calls: NonNullable<AttemptReport['calls']>): void {
    for (const call of calls) {
      const r = this.routes.get(call.route) ?? this.routes.set(call.route, { ms: [], errors: 0, costUsd: 0 }).get(call.route)!;
      r.ms.push(call.ms);
      if (!call.ok) r.errors += 1;
      if (call.costUsd !== undefined) r.costUsd += call.costUsd;
    }
  }

  /** Latency percentiles and error rates; undefined when no call was made. */
  routeStats(): Record<string, RouteStats> | undefined {
    if (this.routes.size === 0) return undefined;
    const out: Record<string, RouteStats> = {};
    for (const [route, r] of this.routes) {
      const sorted = [...r.ms].sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
      out[route] = {
        requests: sorted.length,
        errors: r.errors,
        errorRate: Math.round((r.errors / sorted.length) * 1e4) / 1e4,
        p50Ms: at(0.5),
        p99Ms: at(0.99),
        costUsd: Math.round(r.costUsd * 1e8) / 1e8,
      };
    }
    return out;
  }
}

/**
 * One task's outcome. A task that never got a final status reads `cancelled` (the run was
 * stopped), or in a paused run `waiting` (an approval) or `pending` (behind one).
 */
function taskResultOf(r: TaskRecord, paused: boolean): TaskResult {
  const status = isFinal(r.status) ? (r.status as FinalTaskStatus) : paused && (r.status === 'waiting' || r.status === 'pending') ? r.status : 'cancelled';
  const task: TaskResult = {
    id: r.spec.id,
    status,
    attempts: r.started,
    model: r.spec.modelName,
    usage: r.usage,
    requests: r.requests,
    retries: r.retries,
  };
  if (isContainer(r)) task.container = true;
  if (r.output !== undefined && (status === 'completed' || (status === 'failed' && rejectedCode(r.error)))) task.output = r.output;
  if (r.error !== undefined && status !== 'completed') task.error = r.error;
  if (status === 'skipped') task.cause = r.skip?.cause ?? 'dependency';
  if (r.transcript !== undefined && status === 'failed') task.transcript = r.transcript;
  if (r.servedBy !== undefined) task.servedBy = r.servedBy;
  if (r.subtasks) task.subtasks = r.subtasks;
  if (r.dropped !== undefined) task.dropped = r.dropped;
  if (r.spec.parent !== undefined) task.parent = r.spec.parent;
  if (r.spec.kind === 'review' || r.spec.kind === 'approval') task.review = { target: r.spec.reviews ?? '', rounds: r.rounds, approved: r.approved === true };
  else if (r.rounds > 0) task.revisions = r.rounds;
  // Known only when every call was priced (a partly unknown total would mislead).
  if (r.unpricedCalls === 0 && r.requests > 0) task.costUsd = Math.round(r.costUsd * 1e8) / 1e8;
  return task;
}

/** An aggregator that expanded: a container. */
const isContainer = (r: TaskRecord) => r.collect !== undefined && isAggregator(r.spec);

/**
 * What a task of a result adds to the counts (its cost as the result has it: null is unknown).
 * `rateLimited`: its 429s, which only the event stream knows.
 */
export function tallyOfResult(task: TaskResult, rateLimited = 0): TaskTally {
  const cost = task.costUsd;
  return {
    status: task.status,
    container: task.container === true,
    attempts: task.attempts,
    requests: task.requests,
    retries: task.retries,
    rateLimited,
    // A result read from a file may lack a field: counted as 0, not NaN.
    usage: { inputTokens: task.usage?.inputTokens ?? 0, outputTokens: task.usage?.outputTokens ?? 0, cacheReadTokens: task.usage?.cacheReadTokens ?? 0, cacheWriteTokens: task.usage?.cacheWriteTokens ?? 0 },
    costUsd: cost ?? 0,
    // A result from elsewhere may carry no cost: a task that sent nothing cost nothing.
    unpriced: cost === null || (cost === undefined && task.requests > 0) ? 1 : 0,
  };
}

/** A result's counts: its tasks' tallies added up (`rateLimited`: 429s per task, from the events). */
export function countsOfResult(result: Pick<RunResult, 'tasks'>, rateLimited: ReadonlyMap<string, number> = new Map()): RunCounts {
  // Task by task into one book (no list of pairs first: a result may hold 10,000 tasks, counted twice per run).
  const book = new CountBook();
  for (const t of Object.values(result.tasks)) book.set(t.id, tallyOfResult(t, rateLimited.get(t.id) ?? 0));
  return book.counts;
}

/** The totals of a result from its counts. */
export function totalsOf(counts: RunCounts, durationMs: number): RunTotals {
  const totals: RunTotals = {
    tasks: counts.tasks,
    completed: counts.byStatus.completed,
    failed: counts.byStatus.failed,
    skipped: counts.byStatus.skipped,
    cancelled: counts.byStatus.cancelled,
    containers: counts.containers,
    attempts: counts.attempts,
    requests: counts.requests,
    retries: counts.retries,
    usage: { ...counts.usage },
    durationMs,
  };
  return totals;
}

/** The run's result from its records: O(tasks), built once at the end. */
export function resultOf(run: { runId: string; status: RunStatus; durationMs: number }, records: Iterable<TaskRecord>, spend: SpendTally): RunResult {
  // Keyed by the plan's task ids: `__proto__` or `constructor` must be a task like any other.
  const tasks = Object.create(null) as Record<string, TaskResult>;
  for (const r of records) tasks[r.spec.id] = taskResultOf(r, run.status === 'paused');
  // The cost is priced by src (src/run/result.ts), which adds the totals' costUsd with the same counts.
  const totals = totalsOf(countsOfResult({ tasks }), run.durationMs);
  const result: RunResult = { runId: run.runId, status: run.status, tasks, totals };
  const stats = spend.routeStats();
  if (stats) result.routes = stats;
  return result;
}
