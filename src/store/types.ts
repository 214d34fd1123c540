/**
 * The run journal's storage contract: the `Store` interface both stores implement (`SqliteStore`
 * on a file, `MemoryStore` for tests and `--store memory`), the rows they return, and `StoreError`.
 *
 * Why a journal: a run that dies (a crash, a kill, a full disk) can be resumed from what was
 * recorded: which tasks completed and with what output, what each attempt spent, which tool side
 * effects already happened. The store is storage only; the runtime decides what to write and when.
 *
 * Durability. Writes are grouped in batches: a batched write is kept, in order, and the batch
 * runs as one short transaction on `flush()`, or by itself on the next macrotask (`setImmediate`)
 * after its first write, or at once when it holds 512 writes (BATCH_MAX_WRITES, sqliteWrites.ts).
 * The runtime calls `flush()` before any network side effect. Some writes are "durable now":
 * they commit at once, together with anything pending, before they return.
 * Each method says which kind it is:
 *
 *   durable now: createRun, setRunStatus, reopenRun, taskFailed with final = true, addTasks, taskReopened,
 *                recordToolResult, acquireLock, heartbeat, releaseLock, pruneRuns (not a dry run)
 *   batched:     taskStarted, taskCompleted, taskFailed with final = false, taskFinal,
 *                setTaskExtra, recordSpend
 *
 * Completions are batched: one commit per task would be the journal's largest cost on a big run
 * (10,000 tasks), and a crash loses at most one macrotask (or batch) of them (those tasks run again on
 * resume). The runtime commits pending spend before every model call.
 *
 * Reads see every write made through the same store: a read commits what is pending first.
 *
 * Sharing. Several processes may write one journal file at once (runs started side by side on
 * the default `.swarmstate/runs.db`). A write transaction holds the file's write lock only while
 * its statements run (a batch is run at commit, not held open while the run works), and a write
 * that finds the lock held waits and tries again, up to 60 s in all (a batch committing by itself
 * waits without blocking the process). Only then does it fail, with SQLITE_BUSY.
 *
 * Failure. A write the database refuses (SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR, SQLITE_BUSY
 * past that wait...) fails with a `StoreError`, and the whole pending batch is rolled back: a
 * method's writes (a task row and its attempt row, say) are never half-committed. A durable-now
 * write and `flush()` throw it; a batch that fails when it commits by itself tells `onError`.
 * From then on every write, and `flush()`, throws the same error until the store is closed and
 * opened again. Reads keep working on what was committed.
 *
 * Opaque values (plans, options, results, errors, specs, extras, usage) are stored as JSON: what
 * comes back is what `JSON.parse(JSON.stringify(value))` gives. Every row read back is checked
 * column by column (rows.ts): a row changed outside swarmstate is a StoreError (`bad-row`) naming
 * its run, table and column, never a bare JSON error; a listing lists it as `damaged`. The caller redacts secrets before
 * writing; the store never adds any to its messages.
 */
import type { TaskStatus, Usage } from '../../machines/protocol.js';
import type { SqliteDriverName } from './driver.js';

/** A run's status in the journal: `running` while it runs, `interrupted` when found dead. */
export type StoredRunStatus =
  | 'running'
  | 'completed'
  | 'partial'
  | 'failed'
  | 'cancelled'
  | 'budget_exceeded'
  /** Only approvals waiting for a person were left: `resume` continues it. */
  | 'paused'
  | 'interrupted';

/**
 * A task's status in the journal: the run's own `TaskStatus` (one type, so a new status is added
 * once). `pending` for a task added by `addTasks` and not yet started; `queued` after a failed
 * attempt that will be retried.
 */
export type StoredTaskStatus = TaskStatus;

/** What `createRun` takes. `plan` must already be free of secrets. */
export interface NewRun {
  id: string;
  plan: unknown;
  /** The plan file's path, when the plan came from a file. */
  source?: string;
  /** The run's options (seed, onFailure...), opaque to the store. */
  options: unknown;
  tasksTotal: number;
  createdAt: number;
}

/** One run as `listRuns` gives it: everything but the plan and result bodies. */
export interface RunSummary {
  id: string;
  status: StoredRunStatus;
  createdAt: number;
  updatedAt: number;
  source: string | null;
  options: unknown;
  tasksTotal: number;
  /** Tasks completed (each counted once). */
  tasksDone: number;
  /** The sum of `recordSpend` for this run. */
  costUsd: number;
  /**
   * A listing only: the run's row has a column that is not what swarmstate wrote (the file was
   * edited or damaged). The fields that could not be read hold 0, null or `failed`: not to be
   * trusted. Reading the run itself (`getRun`) throws the same problem as a StoreError.
   */
  damaged?: RowDamage;
}

/** Which column of which row of a run could not be read back, and why (never its value). */
export interface RowDamage {
  table: string;
  column: string;
  /** The task the row belongs to (tasks, attempts, spend). */
  taskId?: string;
  /** `tasks.error_json of task a is not valid JSON (4 characters): ...` */
  message: string;
}

/** One run as `getRun` gives it. */
export interface RunRecord extends RunSummary {
  plan: unknown;
  /** What `setRunStatus` stored last with a result, else null. */
  result: unknown;
}

/** A task of a run as `loadTasks` gives it (in the order the tasks were first written). */
export interface TaskRow {
  taskId: string;
  status: StoredTaskStatus;
  /** The number of the last attempt started (0 when none started). */
  attempts: number;
  output: string | null;
  /** The last attempt's error (set by `taskFailed`, cleared by `taskCompleted`). */
  error: unknown;
  /** Why the task was skipped or cancelled (`taskFinal`). */
  reason: string | null;
  usage: Usage | null;
  costUsd: number | null;
  requests: number;
  retries: number;
  /** The spec of a task a planner task made at run time (`addTasks`), else null. */
  spec: unknown;
  /** The planner task that made it, else null. */
  parent: string | null;
  /** Opaque state of the runtime (a review round, feedback): `setTaskExtra`. */
  extra: unknown;
  /**
   * What was wrong with the last answer rejected since the task last completed or was reopened
   * (`taskFailed` with a rejected answer; the answer itself is `output`), else null.
   */
  rejected: RejectedAnswer | null;
  updatedAt: number;
}

/**
 * A failed attempt's answer that its checks rejected (`invalid_output`, `rejected_output`): the
 * task keeps it as its output, and a retry's prompt shows it with its problems.
 */
export interface RejectedAnswer {
  code: string;
  problems: string[];
}

/** One attempt of a task as `loadAttempts` gives it (in the order they started). */
export interface AttemptRow {
  taskId: string;
  attempt: number;
  /** `<provider>/<model>` (or the plan model's name when the route is not known). */
  route: string;
  startedAt: number;
  endedAt: number | null;
  /** null while it runs. */
  status: 'completed' | 'failed' | 'cancelled' | null;
  requests: number;
  usage: Usage | null;
  costUsd: number | null;
}

/** What `spent` gives: USD spent by a run, in all, per task and per model. */
export interface Spent {
  total: number;
  byTask: Record<string, number>;
  byModel: Record<string, number>;
}

/** Who holds (or wants) a run's lock. `id` is unique per process run; pid and host are for humans and the dead-holder check. */
export interface LockOwner {
  id: string;
  pid: number;
  host: string;
}

export type LockResult =
  | { ok: true }
  | { ok: false; holder: { owner: string; pid: number; host: string; since: number; heartbeatAt: number } };

/**
 * Which runs `pruneRuns` removes: those started more than `olderThanMs` ago, those beyond the
 * `keep` newest, or (both given) those that are both. Never a run a live process holds, nor one
 * journaled as running that none holds (interrupted midway: a resume continues it).
 */
export interface PruneRule {
  olderThanMs?: number;
  keep?: number;
}

/** A run `pruneRuns` removed (or would remove). */
export interface PrunedRun {
  id: string;
  status: string;
  /** null when the row's start time cannot be read. */
  createdAt: number | null;
  /** About how many bytes its rows held: each text column's UTF-8 length, 8 per number column. */
  bytes: number;
}

export interface PruneResult {
  /** Newest first. */
  removed: PrunedRun[];
  /** The sum of their `bytes`: what a `compact()` can give back to the file system. */
  bytes: number;
  /** Runs the rule picked but kept: a live process holds them. */
  live: string[];
  /** Runs the rule picked but kept: interrupted midway (`swarmstate resume` continues them). */
  interrupted: string[];
}

/** A planner sub-task joining a run. */
export interface NewTask {
  id: string;
  spec: unknown;
  parent: string;
}

export interface StoreOptions {
  /** The clock for lock times (acquired, heartbeat, staleness). Default `Date.now`. */
  now?: () => number;
  /**
   * Called when a batch that commits by itself (on the next macrotask) fails: nobody is on the
   * stack to catch it. The error is also kept and thrown by the next write or `flush()`.
   */
  onError?: (error: StoreError) => void;
  /**
   * Open for reading only (`swarmstate runs`): nothing is written, not even the WAL switch or
   * the schema; the file must exist and hold a journal. Every write throws (code `read-only`).
   */
  readOnly?: boolean;
  /** How long a write waits in all for a write lock another process holds. Default 60000 ms. */
  busyLimitMs?: number;
  /**
   * The SQLite driver (SqliteStore only): `better-sqlite3` or `node:sqlite`. Default: the
   * `SWARMSTATE_SQLITE` environment variable, else better-sqlite3 when it loads, else node:sqlite.
   */
  driver?: SqliteDriverName;
}

export interface Store {
  /** Where the data lives: a file path, or `:memory:`. */
  readonly path: string;

  /** Records a new run, status `running`. Durable now. Throws a StoreError if the id exists. */
  createRun(run: NewRun): void;
  getRun(id: string): RunRecord | undefined;
  /** Newest first (by createdAt), at most `limit` (default 50). */
  listRuns(limit?: number): RunSummary[];
  /** Durable now. `result`, when given, is stored as JSON and replaces the previous one. */
  setRunStatus(id: string, status: StoredRunStatus, result?: unknown): void;
  /**
   * A retry: the run goes back to `running` with these options (its retry sessions), and each of
   * these tasks that has a row to `queued`, its extra and `rejected` cleared, no longer done (as `taskReopened`).
   * One transaction, durable now: a crash leaves the run as it was or wholly reopened.
   */
  reopenRun(id: string, options: unknown, taskIds: readonly string[], at: number): void;

  /** Task row -> `running`, attempts = attempt; a new attempt row. Batched. */
  taskStarted(runId: string, taskId: string, attempt: number, route: string, at: number): void;
  /**
   * Task row -> `completed` with its output, usage, cost, requests and retries (as given: the
   * caller's totals); the attempt row ends `completed` with the same numbers; the run's
   * tasksDone + 1 the first time the task completes. Batched (see above).
   */
  taskCompleted(
    runId: string,
    taskId: string,
    attempt: number,
    output: string,
    usage: Usage,
    costUsd: number | null,
    requests: number,
    retries: number,
    at: number,
  ): void;
  /**
   * The attempt ends `failed`; the task row keeps the error and goes to `failed` when `final`,
   * else to `queued` (a retry comes). Durable now when final, else batched. With `rejected`, the
   * attempt's answer failed its checks: the row keeps `output` as its output and `rejected` until
   * the task completes again, is reopened or fails with another rejected answer (a failure
   * without one leaves both as they were, as the run table does).
   */
  taskFailed(runId: string, taskId: string, attempt: number, error: unknown, final: boolean, at: number, rejected?: RejectedAnswer & { output: string }): void;
  /**
   * The task's counters over all its attempts (every life of the run), as an attempt ends without
   * completing it (failed, cancelled, a review sent back): requests, retries and usage. Batched.
   */
  taskCounters(runId: string, taskId: string, requests: number, retries: number, usage: Usage, at: number): void;
  /** Task row -> `skipped` or `cancelled` with the reason (an attempt still open ends `cancelled`), or an approval `waiting`. Batched. */
  taskFinal(runId: string, taskId: string, status: 'skipped' | 'cancelled' | 'waiting', reason: string, at: number): void;
  /**
   * Planner sub-tasks joining the run (status `pending`); the run's tasksTotal + the new ones. An
   * id already known keeps its row and gets the new spec (a planner that planned again). Durable now.
   */
  addTasks(runId: string, tasks: readonly NewTask[]): void;
  /** Replaces the task's opaque extra state. Batched. */
  setTaskExtra(runId: string, taskId: string, extra: unknown): void;
  /**
   * A completed task runs again (a reviewer sent it back): status `queued`, `extra` saved (its
   * feedback), `rejected` cleared, and it no longer counts as done. Durable now: a resume must not take the old
   * draft for the final one.
   */
  taskReopened(runId: string, taskId: string, extra: unknown, at: number): void;
  /** An attempt that ended without ending its task (a review that sent the work back). Batched. */
  attemptEnded(runId: string, taskId: string, attempt: number, status: 'completed' | 'failed' | 'cancelled', at: number): void;
  /** Adds one priced model call's cost to the run's ledger (and the run's costUsd). Batched. */
  recordSpend(runId: string, taskId: string, model: string, usd: number): void;
  /** The result of a non-read-only tool call, by its canonical key (the latest wins). Durable now. */
  recordToolResult(runId: string, key: string, content: string, isError: boolean): void;
  toolResult(runId: string, key: string): { content: string; isError: boolean } | undefined;

  loadTasks(runId: string): TaskRow[];
  /** The attempts of a run, or of one of its tasks. */
  loadAttempts(runId: string, taskId?: string): AttemptRow[];
  spent(runId: string): Spent;

  /**
   * Takes the run's lock, atomically (a write transaction: two processes cannot both win). Free,
   * or already held by the same owner id: taken. Held by another: taken over when the holder is on
   * this host and its pid is dead, or its heartbeat is older than `staleMs`; else refused with
   * who holds it. Durable now.
   */
  acquireLock(runId: string, owner: LockOwner, staleMs?: number): LockResult;
  /** Refreshes the heartbeat; false when `ownerId` does not hold the lock (any more). Durable now. */
  heartbeat(runId: string, ownerId: string): boolean;
  /** Whether a live process holds the run's lock (one that could not be taken over now). */
  isHeld(runId: string, staleMs?: number): boolean;
  /** Lets go of the lock if `ownerId` holds it. Durable now. */
  releaseLock(runId: string, ownerId: string): void;

  /**
   * Removes the runs `rule` picks (PruneRule), with every row they have in every table (tasks,
   * attempts, spend, tool results, plan, result, lock): one transaction, durable now, the live
   * check made inside it. `dryRun`: removes nothing, says the same (a read-only store can). The
   * file keeps its size until `compact()`. Throws a TypeError for a rule that is not one.
   */
  pruneRuns(rule: PruneRule, options?: { dryRun?: boolean; staleMs?: number }): PruneResult;
  /**
   * Gives the space of removed rows back to the file system (SQLite: VACUUM, then a WAL
   * checkpoint); nothing to do in memory. Takes as long as writing the whole file once. A failure
   * (a full disk: VACUUM needs room for a copy) is a StoreError that leaves the store usable.
   */
  compact(): void;

  /** Commits the pending batch. Throws the StoreError of an earlier failure. */
  flush(): void;
  /** Commits what is pending (unless the store failed) and closes. Idempotent. Releases no lock. */
  close(): void;
}

/**
 * The store could not do its job: a write was refused, the file cannot be opened (or is another
 * program's database: `foreign`), the store is closed, a row read back is not what swarmstate
 * wrote (`bad-row`: a `JournalRowError` naming the run, table and column). `message` names the
 * database path and the SQLite error code (or the row); it never holds data.
 */
export class StoreError extends Error {
  readonly code = 'STORE_FAILED' as const;
  /** The SQLite error code (SQLITE_FULL...), or a code of ours (`closed`, `exists`, `bad-row`...). */
  readonly sqliteCode: string;
  readonly path: string;

  constructor(message: string, path: string, sqliteCode: string) {
    super(message);
    this.name = 'StoreError';
    this.path = path;
    this.sqliteCode = sqliteCode;
  }

  /** What the user can do about it, for a message that ends with how to resume. */
  get advice(): string {
    if (this.sqliteCode.startsWith('SQLITE_BUSY')) {
      return 'other processes kept the journal busy (runs sharing the file); try again when fewer run at once, or give this run a journal of its own (--store)';
    }
    if (this.sqliteCode === 'foreign') return 'give the journal a file of its own (--store)';
    if (this.sqliteCode === 'bad-row') return "this run's rows cannot be read back as they are (the other runs can); restore the file from a copy, or remove the run (swarmstate runs prune)";
    if (this.sqliteCode === 'SQLITE_DRIVER_MISSING') return 'npm install better-sqlite3, or use Node >= 22.13, or run without a journal (--store memory)';
    return 'fix the disk (space, permissions)';
  }
}
