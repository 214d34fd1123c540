/**
 * `SqliteStore`: the run journal in one SQLite file, by default `.swarmstate/runs.db`, on
 * better-sqlite3 or Node's built-in node:sqlite (driver.ts: both synchronous, the same code). See `types.ts` for the contract (batches, durable-now writes, failure).
 *
 * Why these settings: WAL lets `swarmstate runs` read while a run writes; `synchronous=NORMAL`
 * in WAL mode never corrupts the file, and a power cut loses at most the last commits, which the
 * resume logic tolerates (it re-runs what was not recorded as done).
 *
 * Several processes may share the file (runs started side by side): batches, durable-now writes
 * and the wait for a write lock another process holds are in sqliteWrites.ts. Opening the file
 * (checks, schema, every statement prepared once) is sqliteOpen.ts; rows read back are checked by
 * rows.ts; pruning runs and VACUUM are sqlitePrune.ts.
 *
 * The schema (sqliteSchema.ts) is versioned with `PRAGMA user_version` and marked with
 * `PRAGMA application_id`, brought up to date inside one write transaction, so two processes
 * opening a new file do not race. Another program's database is recognised before anything is
 * written and refused (`foreign`); `readOnly` opens a journal for a listing without any write.
 */
import { resolve } from 'node:path';
import type { SqlDatabase, SqliteDriverName } from './driver.js';
import type { Usage } from '../../machines/protocol.js';
import { mayTake, toJson, withoutContainers, type HeldLock } from './shared.js';
import { checkedJson, checkedSummary, listedSummary, readAttempt, readSpend, readTask, readToolResult } from './rows.js';
import { rawAttempt, rawSummary, rawTask } from './sqliteRows.js';
import { BUSY_LIMIT_MS } from './busy.js';
import { SqliteWrites } from './sqliteWrites.js';
import { RunCounters } from './sqliteCounters.js';
import { PendingStarts, StartWrite } from './sqliteStarts.js';
import { openJournal } from './sqliteOpen.js';
import { compactSqlite, pruneSqlite } from './sqlitePrune.js';
import type { AttemptDbRow, RunRow, Statements, SummaryRow, TaskDbRow } from './sqliteSchema.js';
import {
  StoreError,
  type AttemptRow,
  type LockOwner,
  type LockResult,
  type NewRun,
  type NewTask,
  type PruneResult,
  type PruneRule,
  type RejectedAnswer,
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

export class SqliteStore implements Store {
  readonly path: string;
  /** The SQLite driver this store runs on. */
  readonly driver: SqliteDriverName;
  private readonly db: SqlDatabase;
  private readonly st: Statements;
  private readonly now: () => number;
  private readonly writes: SqliteWrites;
  private readonly counters: RunCounters;
  private readonly starts = new PendingStarts();
  private readonly busyLimitMs: number;
  /** Schema version 2 and later keep the plan and the result in tables of their own (a bad one is named there). */
  private readonly runTables: boolean;

  constructor(file: string = DEFAULT_DB_PATH, options: StoreOptions = {}) {
    this.path = file === ':memory:' ? file : resolve(file);
    this.now = options.now ?? Date.now;
    const readOnly = options.readOnly === true;
    const busyLimitMs = options.busyLimitMs ?? BUSY_LIMIT_MS;
    this.busyLimitMs = busyLimitMs;
    const { db, st, version } = openJournal(this.path, { readOnly, busyLimitMs, driver: options.driver });
    this.runTables = version >= 2;
    this.st = st;
    this.db = db;
    this.driver = db.driver;
    this.counters = new RunCounters(this.st);
    this.writes = new SqliteWrites(db, this.st, {
      path: this.path,
      readOnly,
      busyLimitMs,
      onError: options.onError,
      counters: this.counters,
      onBatchEnd: () => this.starts.clear(),
      onWrite: (write) => this.starts.wrote(write),
    });
  }

  /** The connection, for tests and diagnostics (pragmas, a look at the tables). Not for writes. */
  get database(): SqlDatabase {
    return this.db;
  }

  // -------------------------------------------------------------------------------------------
  // Runs
  // -------------------------------------------------------------------------------------------

  createRun(run: NewRun): void {
    const plan = toJson(run.plan);
    const options = toJson(run.options);
    this.writes.durable('create run', () => {
      if (this.st.runExists.get(run.id) !== undefined) {
        throw new StoreError(`run journal ${this.path}: run "${run.id}" already exists`, this.path, 'exists');
      }
      this.st.insertRun.run(run.id, run.createdAt, run.createdAt, run.source ?? null, options, run.tasksTotal);
      this.st.insertPlan.run(run.id, plan);
    });
  }

  getRun(id: string): RunRecord | undefined {
    const row = this.writes.read(() => this.st.getRun.get(id) as RunRow | undefined);
    if (row === undefined) return undefined;
    return {
      ...withoutContainers(checkedSummary(this.path, rawSummary(row)), this.containersOf(id)),
      plan: checkedJson(this.path, id, this.runTables ? 'run_plans' : 'runs', 'plan_json', row.plan_json),
      result: checkedJson(this.path, id, this.runTables ? 'run_results' : 'runs', 'result_json', row.result_json),
    };
  }

  listRuns(limit = 50): RunSummary[] {
    const rows = this.writes.read(() => this.st.listRuns.all(Math.max(0, limit)) as SummaryRow[]);
    return rows.map((row) => {
      const summary = listedSummary(this.path, rawSummary(row));
      return summary.damaged ? summary : withoutContainers(summary, this.containersOf(summary.id));
    });
  }

  /** Each container's status (shared.ts withoutContainers). */
  private containersOf(runId: string): string[] {
    return this.writes.read(() => this.st.containers.all(runId, runId) as unknown[]).map(String);
  }

  setRunStatus(id: string, status: StoredRunStatus, result?: unknown): void {
    const json = toJson(result);
    const at = this.now();
    this.writes.durable('set run status', () => {
      this.st.setStatus.run(status, at, id);
      if (json !== null) this.st.setResult.run(json, id);
    });
  }

  reopenRun(id: string, options: unknown, taskIds: readonly string[], at: number): void {
    const json = toJson(options);
    this.writes.durable('reopen run', () => {
      this.st.setOptions.run(json, at, id);
      this.st.setStatus.run('running', at, id);
      for (const taskId of taskIds) {
        const before = this.st.taskStatus.get(id, taskId);
        if (before === undefined) continue;
        this.st.taskReopen.run(null, at, id, taskId);
        if (before === 'completed') this.st.runUndone.run(at, id);
      }
    });
  }

  // -------------------------------------------------------------------------------------------
  // Tasks
  // -------------------------------------------------------------------------------------------

  taskStarted(runId: string, taskId: string, attempt: number, route: string, at: number): void {
    this.writes.add(new StartWrite(this.st, this.counters, runId, taskId, attempt, route, at));
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
    const start = this.starts.take(runId, taskId, attempt);
    // Its start is still pending in this batch, and nothing else for the task since: one write (sqliteStarts.ts).
    if (start !== undefined) return start.complete(output, usageJson, costUsd, requests, retries, at, this.counters.place());
    const place = this.counters.place();
    this.writes.batched('record task completion', runId, taskId, () => {
      // Counted once per task: a completion journaled again (a replayed batch) does not count twice.
      if (this.st.taskStatus.get(runId, taskId) !== 'completed') this.counters.add(runId, 1, 0, at, place);
      this.st.taskComplete.run(runId, taskId, attempt, output, usageJson, costUsd, requests, retries, at);
      this.st.attemptComplete.run(runId, taskId, attempt, at, at, requests, usageJson, costUsd);
    });
  }

  taskFailed(runId: string, taskId: string, attempt: number, error: unknown, final: boolean, at: number, rejected?: RejectedAnswer & { output: string }): void {
    const errorJson = toJson(error);
    const rejectedJson = rejected === undefined ? null : toJson({ code: rejected.code, problems: rejected.problems } satisfies RejectedAnswer);
    const status = final ? 'failed' : 'queued';
    const body = () => {
      if (rejected === undefined) this.st.taskFail.run(runId, taskId, status, attempt, errorJson, at);
      else this.st.taskFailRejected.run(runId, taskId, status, attempt, errorJson, rejected.output, rejectedJson, at);
      this.st.attemptFail.run(runId, taskId, attempt, at, at);
    };
    if (final) this.writes.durable('record task failure', body);
    else this.writes.batched('record task failure', runId, taskId, body);
  }

  taskCounters(runId: string, taskId: string, requests: number, retries: number, usage: Usage, at: number): void {
    const usageJson = toJson(usage);
    this.writes.batched('record task counters', runId, taskId, () => {
      this.st.taskCounters.run(requests, retries, usageJson, at, runId, taskId);
    });
  }

  taskFinal(runId: string, taskId: string, status: 'skipped' | 'cancelled' | 'waiting', reason: string, at: number): void {
    this.writes.batched(`record task ${status}`, runId, taskId, () => {
      this.st.taskFinal.run(runId, taskId, status, reason, at);
      this.st.attemptCancelOpen.run(at, runId, taskId);
    });
  }

  addTasks(runId: string, tasks: readonly NewTask[]): void {
    const specs = tasks.map((task) => toJson(task.spec));
    const at = this.now();
    this.writes.durable('add tasks', () => {
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
    this.writes.batched('set task extra', runId, taskId, () => {
      this.st.taskExtra.run(runId, taskId, json, at);
    });
  }

  attemptEnded(runId: string, taskId: string, attempt: number, status: 'completed' | 'failed' | 'cancelled', at: number): void {
    this.writes.batched('end attempt', runId, taskId, () => {
      this.st.attemptEnd.run(at, status, runId, taskId, attempt);
    });
  }

  taskReopened(runId: string, taskId: string, extra: unknown, at: number): void {
    const json = toJson(extra);
    this.writes.durable('reopen task', () => {
      const before = this.st.taskStatus.get(runId, taskId);
      this.st.taskReopen.run(json, at, runId, taskId);
      if (before === 'completed') this.st.runUndone.run(at, runId);
    });
  }

  loadTasks(runId: string): TaskRow[] {
    const rows = this.writes.read(() => this.st.loadTasks.all(runId) as TaskDbRow[]);
    return rows.map((row) => readTask(this.path, runId, row.task_id, rawTask(row)));
  }

  loadAttempts(runId: string, taskId?: string): AttemptRow[] {
    const rows = this.writes.read(
      () => (taskId === undefined ? this.st.loadAttempts.all(runId) : this.st.loadAttemptsOf.all(runId, taskId)) as AttemptDbRow[],
    );
    return rows.map((row) => readAttempt(this.path, runId, rawAttempt(row)));
  }

  // -------------------------------------------------------------------------------------------
  // Money and tools
  // -------------------------------------------------------------------------------------------

  recordSpend(runId: string, taskId: string, model: string, usd: number): void {
    const at = this.now();
    const place = this.counters.place();
    this.writes.batched('record spend', runId, taskId, () => {
      this.st.spend.run(runId, taskId, model, usd);
      this.counters.add(runId, 0, usd, at, place);
    });
  }

  spent(runId: string): Spent {
    const raw = this.writes.read(() => this.st.spent.all(runId) as Array<{ task_id: unknown; model: unknown; usd: unknown }>);
    const rows = raw.map((row) => readSpend(this.path, runId, { taskId: row.task_id, model: row.model, usd: row.usd }));
    // Keyed by names from the plan: no prototype, so a task or model named `constructor` or `__proto__` is an ordinary key.
    const spent: Spent = { total: 0, byTask: Object.create(null) as Spent['byTask'], byModel: Object.create(null) as Spent['byModel'] };
    for (const row of rows) {
      spent.total += row.usd;
      spent.byTask[row.taskId] = (spent.byTask[row.taskId] ?? 0) + row.usd;
      spent.byModel[row.model] = (spent.byModel[row.model] ?? 0) + row.usd;
    }
    return spent;
  }

  recordToolResult(runId: string, key: string, content: string, isError: boolean): void {
    const at = this.now();
    this.writes.durable('record tool result', () => {
      this.st.toolPut.run(runId, key, content, isError ? 1 : 0, at);
    });
  }

  toolResult(runId: string, key: string): { content: string; isError: boolean } | undefined {
    const row = this.writes.read(() => this.st.toolGet.get(runId, key) as { content: unknown; is_error: unknown } | undefined);
    return row === undefined ? undefined : readToolResult(this.path, runId, { content: row.content, isError: row.is_error });
  }

  // -------------------------------------------------------------------------------------------
  // Locks: each one write transaction (BEGIN IMMEDIATE holds the write lock before the read)
  // -------------------------------------------------------------------------------------------

  acquireLock(runId: string, owner: LockOwner, staleMs = 30_000): LockResult {
    return this.writes.durable('acquire lock', (): LockResult => {
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
    const row = this.writes.read(() => this.st.lockGet.get(runId)) as
      | { owner: string; pid: number; host: string; acquired_at: number; heartbeat_at: number }
      | undefined;
    if (row === undefined) return false;
    return !mayTake({ owner: row.owner, pid: row.pid, host: row.host, acquiredAt: row.acquired_at, heartbeatAt: row.heartbeat_at }, '', this.now(), staleMs);
  }

  heartbeat(runId: string, ownerId: string): boolean {
    return this.writes.durable('heartbeat lock', () => this.st.lockBeat.run(this.now(), runId, ownerId).changes > 0);
  }

  releaseLock(runId: string, ownerId: string): void {
    this.writes.durable('release lock', () => {
      this.st.lockDel.run(runId, ownerId);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Upkeep (sqlitePrune.ts)
  // -------------------------------------------------------------------------------------------

  pruneRuns(rule: PruneRule, options?: { dryRun?: boolean; staleMs?: number }): PruneResult {
    return pruneSqlite({ db: this.db, writes: this.writes, now: this.now }, rule, options);
  }

  compact(): void {
    // Refuses as a write would (read-only, closed, failed), after committing what is pending.
    this.writes.flush();
    compactSqlite(this.db, this.path, this.busyLimitMs);
  }

  // -------------------------------------------------------------------------------------------
  // Batches (sqliteWrites.ts)
  // -------------------------------------------------------------------------------------------

  flush(): void {
    this.writes.flush();
  }

  close(): void {
    this.writes.close();
  }
}
