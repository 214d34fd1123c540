/**
 * A task's lifecycle as one table: each status, the events that leave it, and where each goes.
 * The run table changes a status only through `TaskStates.move`, which looks the move up here
 * and throws on any other: a bookkeeping bug stops the run with the task, the status and the
 * event named, instead of miscounting it (a count off by one would hang or end a run early).
 *
 * The same table drawn as a statechart is `taskLifecycleMachine` (task.machine.ts); a test
 * keeps the two equal. Adding a status: `TaskStatus` (machines/protocol.ts), a row here, a state
 * there; the compiler then names every per-status count that needs it.
 *
 * Cost: a move is two property reads and two counter updates, with no allocation: it runs on every
 * task event of a 10,000-task run.
 */
import type { TaskStatus } from '../protocol.js';
import type { TaskRecord } from './types.js';

interface Row {
  /** Counts as done for the run (the run finishes when every task is final). */
  final: boolean;
  /** Event -> the status it leads to. No entry: the move is a bug. */
  on: Readonly<Partial<Record<string, TaskStatus>>>;
}

export const LIFECYCLE = {
  pending: {
    final: false,
    on: {
      /** Every dependency completed (or it has none; a join: every one ended, one completed), its condition held: into the ready queue. */
      READY: 'queued',
      /** A task it depends on failed or was skipped (a join: none completed), or its condition (`when`) is false. */
      SKIP: 'skipped',
      /** The run stopped before it started. */
      CANCEL: 'cancelled',
      /** A resume: the status the journal kept. */
      RESTORE_COMPLETED: 'completed',
      /** A resume: failed before, or was in flight at more crashes than its retries allow. */
      RESTORE_FAILED: 'failed',
      RESTORE_SKIPPED: 'skipped',
    },
  },
  queued: {
    final: false,
    on: {
      /** Taken from the ready queue: a new attempt. */
      START: 'running',
      /** The run stopped before it started (waiting in the queue, set aside at its model's cap, or held). */
      CANCEL: 'cancelled',
    },
  },
  running: {
    final: false,
    on: {
      /** The attempt completed: an answer, a planner's plan expanded, a map or reduce collected, a review's last verdict. */
      COMPLETE: 'completed',
      /** Failed with no retry left (or not retryable, or the run is stopping). */
      FAIL: 'failed',
      /** Its agent was cancelled. */
      CANCEL: 'cancelled',
      /** Failed with a retryable error (or a planner's plan was rejected) and a retry is left. */
      RETRY: 'queued',
      /** The start is undone, the attempt not counted: no agent slot, or held back by cache-aware fan-out. */
      REQUEUE: 'queued',
      /** Waits on new dependencies: a map or reduce expanded into sub-tasks, a reviewer waits for the revised draft. */
      WAIT: 'pending',
      /** An approval asks a person: it waits for a decision, with no agent and no slot. */
      AWAIT: 'waiting',
    },
  },
  waiting: {
    final: false,
    on: {
      /** Approved (the decision may replace the approved task's output). */
      APPROVE: 'completed',
      /** Rejected with no note or no round left, or its timeoutMs passed. */
      REJECT: 'failed',
      /** Rejected with a note and a round left: the draft goes back, the approval waits for the new one. */
      WAIT: 'pending',
      /** The run was cancelled while it waited. */
      CANCEL: 'cancelled',
    },
  },
  completed: {
    final: true,
    on: {
      /** A reviewer sent it back with findings: it runs again once its reviewer's other deps allow. */
      REVISE: 'pending',
    },
  },
  failed: { final: true, on: {} },
  skipped: { final: true, on: {} },
  cancelled: { final: true, on: {} },
} as const satisfies Record<TaskStatus, Row>;

type Lifecycle = typeof LIFECYCLE;

/** Every event of the lifecycle. */
export type TaskEvent = { [S in TaskStatus]: keyof Lifecycle[S]['on'] }[TaskStatus];

/** The statuses a task ends a run in (what `TaskResult.status` can be). */
export type FinalTaskStatus = { [S in TaskStatus]: Lifecycle[S]['final'] extends true ? S : never }[TaskStatus];

/** Every status, in the table's order. */
export const TASK_STATUSES = Object.keys(LIFECYCLE) as TaskStatus[];

export const isFinal = (status: TaskStatus): boolean => LIFECYCLE[status].final;

/** A status change the table does not have: always a bug in swarmstate, never bad input. */
export class TaskLifecycleError extends Error {
  readonly code = 'internal';
  readonly retryable = false;

  constructor(
    readonly taskId: string,
    readonly from: TaskStatus,
    readonly event: string,
  ) {
    super(
      `internal error: task "${taskId}" cannot take ${event} while ${from} (no such move in machines/tasks/lifecycle.ts). ` +
        'This is a bug in swarmstate: please report it with the run\'s events (--events).',
    );
    this.name = 'TaskLifecycleError';
  }
}

/** Where `event` takes a task that is `from`; throws a TaskLifecycleError if the table has no such move. */
export function nextStatus(taskId: string, from: TaskStatus, event: TaskEvent): TaskStatus {
  const to: unknown = (LIFECYCLE[from].on as Partial<Record<string, TaskStatus>>)[event];
  // Not a string: no entry, or one Object.prototype lends (`constructor`), never a status.
  if (typeof to !== 'string') throw new TaskLifecycleError(taskId, from, event);
  return to as TaskStatus;
}

/** The status counts of a run's tasks, kept as each task moves. */
export class TaskStates {
  readonly counts = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
  private open = 0;

  /** Tasks without a final status. */
  get openTasks(): number {
    return this.open;
  }

  /** New records joined the table, pending (see `newRecord`). */
  added(count: number): void {
    this.counts.pending += count;
    this.open += count;
  }

  /** Moves a task by `event` (checked against the table) and returns the status it left. */
  move(record: TaskRecord, event: TaskEvent): TaskStatus {
    const from = record.status;
    const to = nextStatus(record.spec.id, from, event);
    this.counts[from] -= 1;
    this.counts[to] += 1;
    const wasFinal = LIFECYCLE[from].final;
    // A reviewed task sent back is open again.
    if (wasFinal !== LIFECYCLE[to].final) this.open += wasFinal ? 1 : -1;
    record.status = to;
    return from;
  }
}
