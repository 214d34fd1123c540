/**
 * A resumed run's table: its tasks as an earlier life of the run left them (src/durable.ts reads
 * them from the journal), planners' and aggregators' sub-tasks joined again, then wired, with
 * only what had not finished left to run.
 */
import type { ErrorInfo, SkipCause, TaskStatus, Usage } from '../protocol.js';
import type { TaskEvent } from './lifecycle.js';
import type { Flow, GraphMoves, TaskGraph } from './graph.js';
import { isAggregator, type Feedback, type SupervisedTask, type TaskRecord } from './types.js';

/** The lifecycle event that puts a fresh (pending) record back in the status the journal kept. */
const RESTORE_EVENTS = {
  completed: 'RESTORE_COMPLETED',
  failed: 'RESTORE_FAILED',
  skipped: 'RESTORE_SKIPPED',
} as const satisfies Partial<Record<TaskStatus, TaskEvent>>;

/** The statuses a task comes back in: final ones as they were, anything unfinished pending. */
export type RestoredStatus = 'pending' | keyof typeof RESTORE_EVENTS;

/** The status a task comes back in from the one the journal kept (running, queued, cancelled: pending). */
export function restoredStatus(status: TaskStatus): RestoredStatus {
  return Object.prototype.hasOwnProperty.call(RESTORE_EVENTS, status) ? (status as RestoredStatus) : 'pending';
}

/** A task as an earlier life of the run left it (see RunTable's `restore`). */
export interface RestoredTask {
  id: string;
  /** Anything unfinished (running, queued, cancelled) comes back pending. */
  status: RestoredStatus;
  /** Attempt numbers taken: the next attempt is numbered after them. */
  attempts: number;
  /** Agents started for it (default `attempts`): the attempts it reports. */
  started?: number;
  /** Every retry it took (what it reports). */
  retries: number;
  /** The retries that count against its `maxRetries` (default `retries`): see TaskRecord. */
  retriesCounted?: number;
  requests: number;
  usage: Usage;
  costUsd: number;
  output?: string;
  error?: ErrorInfo;
  /** Review task: reviews made. Reviewed task: times sent back. */
  rounds?: number;
  approved?: boolean;
  feedback?: Feedback;
  /** A skipped task: why (absent: a dependency). */
  skip?: { cause: SkipCause; reason: string };
}

/** What a resumed run starts from: its tasks' states and the sub-tasks its planners made, in order. */
export interface RunRestore {
  tasks: RestoredTask[];
  expansions: { planner: string; tasks: SupervisedTask[] }[];
}

/**
 * Fills an empty graph from a restore: tasks keep their statuses, outputs and counters, planners
 * their sub-tasks, reviews their rounds; whatever had not finished starts again from pending.
 * Returns the tasks ready now (queued through `moves.ready`) and those found skipped (a
 * dependency had failed or been skipped before the crash, or a condition judged now is false).
 * A task skipped before stays so: its condition is not judged again.
 */
export function restoreGraph(graph: TaskGraph, moves: GraphMoves, tasks: readonly SupervisedTask[], restore: RunRestore): { ready: string[]; skipped: string[] } {
  const all = graph.create([...tasks, ...restore.expansions.flatMap((e) => e.tasks)]);
  for (const saved of restore.tasks) {
    const record = graph.get(saved.id);
    if (record) apply(record, saved, moves);
  }
  // An aggregator that had expanded waits for its sub-tasks again (whatever its status).
  for (const { planner, tasks: subtasks } of restore.expansions) {
    const record = graph.get(planner);
    if (record && isAggregator(record.spec)) graph.collectFrom(record, subtasks.map((t) => graph.get(t.id)!));
  }
  graph.wire(all);
  for (const record of all) {
    if (record.spec.kind !== 'map' || !record.collect) continue;
    graph.detachReduces(record);
    // What a completed map kept is not journaled: its items' outputs give it again.
    if (record.status === 'completed' && record.spec.map?.dedupe !== undefined) graph.dedupe(record);
  }
  for (const { planner, tasks: subtasks } of restore.expansions) {
    const record = graph.get(planner);
    if (!record || record.status !== 'completed' || isAggregator(record.spec)) continue;
    record.subtasks = subtasks.map((t) => t.id);
    graph.waitForLeaves(record, subtasks.map((t) => graph.get(t.id)!));
  }
  // What waited on a task that ended without completing: `wire` did not count it, so not counted.
  const flow: Flow = { unlocked: [], skipped: [] };
  for (const record of all) if (record.status === 'failed' || record.status === 'skipped') graph.skipDependentsOf(record, flow, false);
  for (const record of all) if (record.status === 'pending' && record.waitingOn === 0) graph.openOrSkip(record, flow);
  return { ready: flow.unlocked, skipped: flow.skipped };
}

/** A restored task's state (its record is still pending, fresh from `create`). */
function apply(record: TaskRecord, saved: RestoredTask, moves: GraphMoves): void {
  record.attempts = saved.attempts;
  record.started = saved.started ?? saved.attempts;
  record.retries = saved.retries;
  record.retriesCounted = saved.retriesCounted ?? saved.retries;
  record.requests = saved.requests;
  record.usage = saved.usage;
  record.costUsd = saved.costUsd;
  record.rounds = saved.rounds ?? 0;
  if (saved.approved !== undefined) record.approved = saved.approved;
  if (saved.feedback) record.feedback = saved.feedback;
  if (saved.output !== undefined) record.output = saved.output;
  if (saved.error) record.error = saved.error;
  if (saved.status === 'skipped') record.skip = saved.skip ?? { cause: 'dependency', reason: 'a task it depends on did not complete' };
  // Judged in an earlier life and waiting again (for its items, for a revised draft): not judged again.
  if (record.rounds > 0 && record.spec.kind === 'review') record.opened = true;
  if (saved.status !== 'pending') moves.move(record, RESTORE_EVENTS[saved.status]);
  else if (record.retriesCounted > record.spec.maxRetries) {
    // Interrupted by crashes more often than its retries allow: it is not dispatched yet again.
    record.error = { code: 'internal', message: `task "${saved.id}" was in flight at ${record.retriesCounted} crashes, more than its ${record.spec.maxRetries} retries allow`, retryable: false };
    moves.move(record, 'RESTORE_FAILED');
  }
}
