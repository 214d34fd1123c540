/**
 * `SqliteStore`: the run journal in one SQLite file (better-sqlite3, synchronous), by default
 * `.swarmstate/runs.db`. See `types.ts` for the contract (batches, durable-now writes, failure).
 *
 * Why these settings: WAL lets `swarmstate runs` read while a run writes; `synchronous=NORMAL`
 * in WAL mode never corrupts the file, and a power cut loses at most the last commits, which the
 * resume logic tolerates (it re-runs what was not recorded as done).
 *
 * Several processes may share the file (runs started side by side). So a batch is not an open
 * transaction: batched writes are kept in order (closures over their bound values) and run
 * together in one `BEGIN IMMEDIATE` ... `COMMIT` when the batch commits (the `setImmediate` armed
 * by its first write, a durable-now write, `flush()`, or a read). The write lock is held for the
 * statements only, never while the run does its own work between writes. A lock held by another
 * process is waited for (busy.ts): a durable write blocks, within a limit; a batch committing by
 * itself tries again on a timer. Every statement is prepared once, in the constructor.
 *
 * The schema (sqliteSchema.ts) is versioned with `PRAGMA user_version` and marked with
 * `PRAGMA application_id`, brought up to date inside one write transaction, so two processes
 * opening a new file do not race. Another program's database is recognised before anything is
 * written and refused (`foreign`); `readOnly` opens a journal for a listing without any write.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import type { Usage } from '../../machines/protocol.js';
import { fromJson, mayTake, toJson, type HeldLock } from './shared.js';
import { BUSY_LIMIT_MS, BUSY_TIMEOUT_MS, backoffMs, isBusy, retryBusy } from './busy.js';
import { checkVersion, migrate, prepare, recognise, type AttemptDbRow, type RunRow, type Statements, type SummaryRow, type TaskDbRow } from './sqliteSchema.js';
import {
  StoreError,
  type AttemptRow,
  type LockOwner,
  type LockResult,
  type NewRun,
  type NewTask,
  type RunRecord,
  type RunSummary,
  type Spent,
  type Store,
  type StoreOptions,
  type StoredRunStatus,
  type TaskRow,
} from './types.js';

/** Where the journal lives when no path is given, relative to the working directory. */
export const DEFAULT_DB_PATH = '.swarmstate/runs.db';

export { SCHEMA_VERSION } from './sqliteSchema.js';

function summaryOf(row: SummaryRow): RunSummary {
  return {
    id: row.id,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    source: row.source,
    options: fromJson(row.options_json),
    tasksTotal: row.tasks_total,
    tasksDone: row.tasks_done,
    costUsd: row.cost_usd,
  };
}

/** A SQLite error's code (`SQLITE_FULL`...), or what else failed, for the message. */
function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'internal';
}

/** The error's own words, short: SQLite's messages describe the failure, never the data bound. */
function reasonOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

export class SqliteStore implements Store {
  readonly path: string;
  private readonly db: Database.Database;
  private readonly st: Statements;
  private readonly now: () => number;
  private readonly onError: ((error: StoreError) => void) | undefined;
  private readonly readOnly: boolean;
  private readonly busyLimitMs: number;
  /** Batched writes not yet run: each runs, in order, inside the next write transaction. */
  private pending: Array<{ doing: string; body: () => void }> = [];
  /** The commit armed by the first write of a batch. */
  private timer: NodeJS.Immediate | null = null;
  /** The next try of a commit that found the write lock held by another process. */
  private retry: NodeJS.Timeout | null = null;
  private busySince: number | null = null;
  private busyTries = 0;
  /** Set by the first failed write; every later write throws it. */
  private failed: StoreError | null = null;
  private closed = false;

  constructor(file: string = DEFAULT_DB_PATH, options: StoreOptions = {}) {
    this.path = file === ':memory:' ? file : resolve(file);
    this.now = options.now ?? Date.now;
    this.onError = options.onError;
    this.readOnly = options.readOnly === true;
    this.busyLimitMs = options.busyLimitMs ?? BUSY_LIMIT_MS;
    let db: Database.Database | undefined;
    try {
      if (this.path !== ':memory:' && !this.readOnly) {
        mkdirSync(dirname(this.path), { recursive: true });
        // Root ignores permission bits, so SQLite would write a file its owner made read-only: refuse here.
        const mode = statSync(this.path, { throwIfNoEntry: false })?.mode;
        if (mode !== undefined && (mode & 0o222) === 0) {
          throw Object.assign(new Error('the file is read-only'), { code: 'SQLITE_READONLY' });
        }
      }
      db = new Database(this.path, { timeout: BUSY_TIMEOUT_MS, ...(this.readOnly ? { readonly: true, fileMustExist: true } : {}) });
      const opened = db;
      // Before anything is written (WAL, the schema): another program's database stays as it was.
      const kind = retryBusy(() => recognise(opened, this.path), this.busyLimitMs);
      if (this.readOnly) {
        if (kind === 'new') throw new StoreError(`run journal ${this.path}: the file holds no journal yet`, this.path, 'empty');
        checkVersion(opened, this.path);
      } else {
        retryBusy(() => opened.pragma('journal_mode = WAL'), this.busyLimitMs);
        opened.pragma('synchronous = NORMAL');
        retryBusy(() => migrate(opened, this.path), this.busyLimitMs);
      }
      this.st = prepare(db);
    } catch (error) {
      try {
        db?.close();
      } catch {
        // Closing a half-open handle: nothing more to report than the first error.
      }
      if (error instanceof StoreError) throw error;
      throw new StoreError(
        `run journal ${this.path}: cannot open: ${codeOf(error)} (${reasonOf(error)})`,
        this.path,
        codeOf(error),
      );
    }
    this.db = db;
  }

  /** The connection, for tests and diagnostics (pragmas, a look at the tables). Not for writes. */
  get database(): Database.Database {
    return this.db;
  }

  // -------------------------------------------------------------------------------------------
  // Runs
  // -------------------------------------------------------------------------------------------

  createRun(run: NewRun): void {
    const plan = toJson(run.plan);
    const options = toJson(run.options);
    this.durable('create run', () => {
      if (this.st.runExists.get(run.id) !== undefined) {
        throw new StoreError(`run journal ${this.path}: run "${run.id}" already exists`, this.path, 'exists');
      }
      this.st.insertRun.run(run.id, run.createdAt, run.createdAt, plan, run.source ?? null, options, run.tasksTotal);
    });
  }

  getRun(id: string): RunRecord | undefined {
    const row = this.read(() => this.st.getRun.get(id) as RunRow | undefined);
    if (row === undefined) return undefined;
    return { ...summaryOf(row), plan: fromJson(row.plan_json), result: fromJson(row.result_json) };
  }

  listRuns(limit = 50): RunSummary[] {
    return this.read(() => (this.st.listRuns.all(Math.max(0, limit)) as SummaryRow[]).map(summaryOf));
  }

  setRunStatus(id: string, status: StoredRunStatus, result?: unknown): void {
    const json = toJson(result);
    const at = this.now();
    this.durable('set run status', () => {
      if (json === null) this.st.setStatus.run(status, at, id);
      else this.st.setStatusResult.run(status, json, at, id);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Tasks
  // -------------------------------------------------------------------------------------------

  taskStarted(runId: string, taskId: string, attempt: number, route: string, at: number): void {
    this.batched('record task start', () => {
      this.st.taskStart.run(runId, taskId, attempt, at);
      this.st.attemptStart.run(runId, taskId, attempt, route, at);
    });
  }

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
  ): void {
    const usageJson = toJson(usage);
    this.batched('record task completion', () => {
      // One statement fewer per task than reading the status first (this is the journal's hot path).
      this.st.runDoneOnce.run(at, runId, runId, taskId);
      this.st.taskComplete.run(runId, taskId, attempt, output, usageJson, costUsd, requests, retries, at);
      this.st.attemptComplete.run(runId, taskId, attempt, at, at, requests, usageJson, costUsd);
    });
  }

  taskFailed(runId: string, taskId: string, attempt: number, error: unknown, final: boolean, at: number): void {
    const errorJson = toJson(error);
    const body = () => {
      this.st.taskFail.run(runId, taskId, final ? 'failed' : 'queued', attempt, errorJson, at);
      this.st.attemptFail.run(runId, taskId, attempt, at, at);
    };
    if (final) this.durable('record task failure', body);
    else this.batched('record task failure', body);
  }

  taskFinal(runId: string, taskId: string, status: 'skipped' | 'cancelled', reason: string, at: number): void {
    this.batched(`record task ${status}`, () => {
      this.st.taskFinal.run(runId, taskId, status, reason, at);
      this.st.attemptCancelOpen.run(at, runId, taskId);
    });
  }

  addTasks(runId: string, tasks: readonly NewTask[]): void {
    const specs = tasks.map((task) => toJson(task.spec));
    const at = this.now();
    this.durable('add tasks', () => {
      let added = 0;
      for (let i = 0; i < tasks.length; i++) {
        // A planner that plans again (after a crash) may reuse an id: its new spec replaces the old.
        const known = this.st.taskStatus.get(runId, tasks[i].id) !== undefined;
        this.st.taskAdd.run(runId, tasks[i].id, specs[i], tasks[i].parent, at);
        if (!known) added += 1;
      }
      if (added > 0) this.st.runTotal.run(added, at, runId);
    });
  }

  setTaskExtra(runId: string, taskId: string, extra: unknown): void {
    const json = toJson(extra);
    const at = this.now();
    this.batched('set task extra', () => {
      this.st.taskExtra.run(runId, taskId, json, at);
    });
  }

  attemptEnded(runId: string, taskId: string, attempt: number, status: 'completed' | 'failed' | 'cancelled', at: number): void {
    this.batched('end attempt', () => {
      this.st.attemptEnd.run(at, status, runId, taskId, attempt);
    });
  }

  taskReopened(runId: string, taskId: string, extra: unknown, at: number): void {
    const json = toJson(extra);
    this.durable('reopen task', () => {
      const before = this.st.taskStatus.get(runId, taskId);
      this.st.taskReopen.run(json, at, runId, taskId);
      if (before === 'completed') this.st.runUndone.run(at, runId);
    });
  }

  loadTasks(runId: string): TaskRow[] {
    const rows = this.read(() => this.st.loadTasks.all(runId) as TaskDbRow[]);
    return rows.map((row) => ({
      taskId: row.task_id,
      status: row.status,
      attempts: row.attempts,
      output: row.output,
      error: fromJson(row.error_json),
      reason: row.reason,
      usage: fromJson(row.usage_json) as Usage | null,
      costUsd: row.cost_usd,
      requests: row.requests,
      retries: row.retries,
      spec: fromJson(row.spec_json),
      parent: row.parent,
      extra: fromJson(row.extra_json),
      updatedAt: row.updated_at,
    }));
  }

  loadAttempts(runId: string, taskId?: string): AttemptRow[] {
    const rows = this.read(
      () => (taskId === undefined ? this.st.loadAttempts.all(runId) : this.st.loadAttemptsOf.all(runId, taskId)) as AttemptDbRow[],
    );
    return rows.map((row) => ({
      taskId: row.task_id,
      attempt: row.attempt,
      route: row.route,
      startedAt: row.started_at,
      endedAt: row.ended_at,
      status: row.status,
      requests: row.requests,
      usage: fromJson(row.usage_json) as Usage | null,
      costUsd: row.cost_usd,
    }));
  }

  // -------------------------------------------------------------------------------------------
  // Money and tools
  // -------------------------------------------------------------------------------------------

  recordSpend(runId: string, taskId: string, model: string, usd: number): void {
    const at = this.now();
    this.batched('record spend', () => {
      this.st.spend.run(runId, taskId, model, usd);
      this.st.runCost.run(usd, at, runId);
    });
  }

  spent(runId: string): Spent {
    const rows = this.read(() => this.st.spent.all(runId) as Array<{ task_id: string; model: string; usd: number }>);
    const spent: Spent = { total: 0, byTask: {}, byModel: {} };
    for (const row of rows) {
      spent.total += row.usd;
      spent.byTask[row.task_id] = (spent.byTask[row.task_id] ?? 0) + row.usd;
      spent.byModel[row.model] = (spent.byModel[row.model] ?? 0) + row.usd;
    }
    return spent;
  }

  recordToolResult(runId: string, key: string, content: string, isError: boolean): void {
    const at = this.now();
    this.durable('record tool result', () => {
      this.st.toolPut.run(runId, key, content, isError ? 1 : 0, at);
    });
  }

  toolResult(runId: string, key: string): { content: string; isError: boolean } | undefined {
    const row = this.read(() => this.st.toolGet.get(runId, key) as { content: string; is_error: number } | undefined);
    return row === undefined ? undefined : { content: row.content, isError: row.is_error !== 0 };
  }

  // -------------------------------------------------------------------------------------------
  // Locks: each one write transaction (BEGIN IMMEDIATE holds the write lock before the read)
  // -------------------------------------------------------------------------------------------

  acquireLock(runId: string, owner: LockOwner, staleMs = 30_000): LockResult {
    return this.durable('acquire lock', (): LockResult => {
      const now = this.now();
      const row = this.st.lockGet.get(runId) as
        | { owner: string; pid: number; host: string; acquired_at: number; heartbeat_at: number }
        | undefined;
      if (row !== undefined) {
        const held: HeldLock = { owner: row.owner, pid: row.pid, host: row.host, acquiredAt: row.acquired_at, heartbeatAt: row.heartbeat_at };
        if (!mayTake(held, owner.id, now, staleMs)) {
          return { ok: false, holder: { owner: row.owner, pid: row.pid, host: row.host, since: row.acquired_at, heartbeatAt: row.heartbeat_at } };
        }
        if (row.owner === owner.id) {
          this.st.lockBeat.run(now, runId, owner.id);
          return { ok: true };
        }
      }
      this.st.lockPut.run(runId, owner.id, owner.pid, owner.host, now, now);
      return { ok: true };
    });
  }

  isHeld(runId: string, staleMs = 30_000): boolean {
    const row = this.read(() => this.st.lockGet.get(runId)) as
      | { owner: string; pid: number; host: string; acquired_at: number; heartbeat_at: number }
      | undefined;
    if (row === undefined) return false;
    return !mayTake({ owner: row.owner, pid: row.pid, host: row.host, acquiredAt: row.acquired_at, heartbeatAt: row.heartbeat_at }, '', this.now(), staleMs);
  }

  heartbeat(runId: string, ownerId: string): boolean {
    return this.durable('heartbeat lock', () => this.st.lockBeat.run(this.now(), runId, ownerId).changes > 0);
  }

  releaseLock(runId: string, ownerId: string): void {
    this.durable('release lock', () => {
      this.st.lockDel.run(runId, ownerId);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Batches
  // -------------------------------------------------------------------------------------------

  flush(): void {
    this.usable();
    if (this.pending.length > 0) this.transact(undefined, undefined, true);
  }

  close(): void {
    if (this.closed) return;
    try {
      if (this.failed === null && this.pending.length > 0) this.transact(undefined, undefined, true);
    } catch {
      // Poisoned and rolled back by transact: what was committed before stays.
    } finally {
      this.closed = true;
      this.clearTimers();
      if (this.db.inTransaction) this.rollbackQuietly();
      this.db.close();
    }
  }

  /** A batched write: kept in order and run with the batch, in one short transaction. */
  private batched(doing: string, body: () => void): void {
    this.usable();
    this.pending.push({ doing, body });
    if (this.timer === null && this.retry === null) this.timer = setImmediate(this.autoCommit);
  }

  /** A durable-now write: the pending batch and then `body`, committed together before this returns. */
  private durable<T>(doing: string, body: () => T): T {
    this.usable();
    return this.transact(doing, body, true) as T;
  }

  /**
   * One write transaction: BEGIN IMMEDIATE (waiting for the write lock when `wait`, within
   * BUSY_LIMIT_MS), the pending writes in order, then `body`, COMMIT. Any failure rolls all of it
   * back and poisons the store; without `wait`, a busy lock is thrown as SQLite's own error and
   * nothing changes (the caller tries again later).
   */
  private transact<T>(doing: string | undefined, body: (() => T) | undefined, wait: boolean): T | undefined {
    try {
      if (wait) retryBusy(() => this.st.begin.run(), this.busyLimitMs);
      else this.st.begin.run();
    } catch (error) {
      if (!wait && isBusy(error)) throw error;
      throw this.poison(error, doing ?? this.pending[0]?.doing ?? 'commit', true);
    }
    let step = doing ?? 'commit';
    try {
      for (const write of this.pending) {
        step = write.doing;
        write.body();
      }
      this.pending = [];
      step = doing ?? 'commit';
      let value: T | undefined;
      let refused: StoreError | undefined;
      try {
        value = body?.();
      } catch (error) {
        // A refusal of ours (the run exists) wrote nothing: what was pending still commits.
        if (!(error instanceof StoreError && error.sqliteCode === 'exists')) throw error;
        refused = error;
      }
      this.st.commit.run();
      this.clearTimers();
      if (refused) throw refused;
      return value;
    } catch (error) {
      if (error instanceof StoreError && error.sqliteCode === 'exists') throw error;
      throw this.poison(error, step, false);
    }
  }

  private read<T>(body: () => T): T {
    if (this.closed) throw this.closedError();
    // Reads see this store's own writes: what is pending is committed first.
    if (this.pending.length > 0 && this.failed === null) {
      try {
        this.transact(undefined, undefined, true);
      } catch (error) {
        // Nobody on this stack writes: the owner hears of it as of a failed batch. The read goes on
        // over what was committed.
        this.onError?.(error as StoreError);
      }
    }
    return body();
  }

  /** Commits the batch on the next macrotask; while another process holds the lock, again later (with backoff). */
  private readonly autoCommit = (): void => {
    this.timer = null;
    this.retry = null;
    if (this.closed || this.failed !== null || this.pending.length === 0) return;
    try {
      this.transact(undefined, undefined, false);
      this.busySince = null;
    } catch (error) {
      if (error instanceof StoreError) {
        this.onError?.(error);
        return;
      }
      // Busy: wait without blocking this process, up to the limit, then fail as a synchronous write would.
      const now = Date.now();
      this.busySince ??= now;
      if (now - this.busySince < this.busyLimitMs) {
        this.retry = setTimeout(this.autoCommit, backoffMs(this.busyTries++));
        return;
      }
      this.onError?.(this.poison(error, this.pending[0]?.doing ?? 'commit', true));
    }
  };

  private clearTimers(): void {
    if (this.timer !== null) clearImmediate(this.timer);
    if (this.retry !== null) clearTimeout(this.retry);
    this.timer = null;
    this.retry = null;
    this.busySince = null;
    this.busyTries = 0;
  }

  /** Throws when the store cannot take writes: read-only, closed, or failed before. */
  private usable(): void {
    if (this.closed) throw this.closedError();
    if (this.readOnly) {
      throw new StoreError(`run journal ${this.path}: opened read-only (for a listing): it takes no writes`, this.path, 'read-only');
    }
    if (this.failed !== null) throw this.failed;
  }

  private closedError(): StoreError {
    return new StoreError(`run journal ${this.path}: the store is closed`, this.path, 'closed');
  }

  /** Rolls the batch back, remembers the failure and returns it (the same error from now on). */
  private poison(error: unknown, doing: string, waited: boolean): StoreError {
    this.clearTimers();
    this.pending = [];
    if (this.db.inTransaction) this.rollbackQuietly();
    if (this.failed !== null) return this.failed;
    const code = codeOf(error);
    const why = waited && isBusy(error) ? `other processes held the journal's write lock for ${this.busyLimitMs / 1000} s` : reasonOf(error);
    this.failed = new StoreError(
      `run journal ${this.path}: ${doing} failed: ${code} (${why}); ` +
        'the uncommitted batch was rolled back and the store takes no more writes until it is reopened',
      this.path,
      code,
    );
    return this.failed;
  }

  private rollbackQuietly(): void {
    try {
      this.db.exec('ROLLBACK');
    } catch {
      // SQLite may have rolled back by itself (SQLITE_FULL, SQLITE_IOERR): nothing is left to undo.
    }
  }
}
