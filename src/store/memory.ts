/**
 * `MemoryStore`: the run journal in this process's memory, for tests and `--store memory` (a run
 * that needs no resume). Same interface and same answers as `SqliteStore`: opaque values go
 * through JSON both ways, rows come back in the order they were first written, a task completes
 * once for the run's count. Nothing can fail to be written, so every write is durable at once and
 * `flush()` has nothing to do; after `close()` every call throws, like the file store.
 */
import type { Usage } from '../../machines/protocol.js';
import { mayTake, toJson, type HeldLock } from './shared.js';
import { checkedJson } from './rows.js';
import { checkPruneRule, pickPrunable, prunedRun } from './prune.js';
import { attemptOf, attemptRowOf, newRunData, newTask, runBytes, summaryOf, taskOf, taskRowOf, type AttemptState, type RunData, type RunState, type TaskState } from './memoryRows.js';
import {
  StoreError,
  type AttemptRow,
  type LockOwner,
  type RejectedAnswer,
  type LockResult,
  type NewRun,
  type NewTask,
  type PruneResult,
  type PruneRule,
  type RunRecord,
  type RunSummary,
  type Spent,
  type Store,
  type StoreOptions,
  type StoredRunStatus,
  type StoredTaskStatus,
  type TaskRow,
} from './types.js';

export class MemoryStore implements Store {
  readonly path = ':memory:';
  private readonly now: () => number;
  private readonly runs = new Map<string, RunState>();
  private readonly data = new Map<string, RunData>();
  private readonly locks = new Map<string, HeldLock>();
  private seq = 0;
  private closed = false;

  constructor(options: StoreOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  // -------------------------------------------------------------------------------------------
  // Runs
  // -------------------------------------------------------------------------------------------

  createRun(run: NewRun): void {
    this.open();
    if (this.runs.has(run.id)) throw new StoreError(`run journal ${this.path}: run "${run.id}" already exists`, this.path, 'exists');
    this.runs.set(run.id, {
      seq: this.seq++,
      id: run.id,
      status: 'running',
      createdAt: run.createdAt,
      updatedAt: run.createdAt,
      source: run.source ?? null,
      optionsJson: toJson(run.options),
      planJson: toJson(run.plan),
      resultJson: null,
      tasksTotal: run.tasksTotal,
      tasksDone: 0,
      costUsd: 0,
    });
  }

  getRun(id: string): RunRecord | undefined {
    this.open();
    const run = this.runs.get(id);
    if (run === undefined) return undefined;
    return { ...summaryOf(this.path, run, this.data.get(id)), plan: checkedJson(this.path, id, 'run_plans', 'plan_json', run.planJson), result: checkedJson(this.path, id, 'run_results', 'result_json', run.resultJson) };
  }

  listRuns(limit = 50): RunSummary[] {
    this.open();
    return [...this.runs.values()]
      .sort((a, b) => b.createdAt - a.createdAt || b.seq - a.seq)
      .slice(0, Math.max(0, limit))
      .map((run) => summaryOf(this.path, run, this.data.get(run.id), true));
  }

  setRunStatus(id: string, status: StoredRunStatus, result?: unknown): void {
    this.open();
    const json = toJson(result);
    const run = this.runs.get(id);
    if (run === undefined) return;
    run.status = status;
    if (json !== null) run.resultJson = json;
    run.updatedAt = this.now();
  }

  reopenRun(id: string, options: unknown, taskIds: readonly string[], at: number): void {
    this.open();
    const run = this.runs.get(id);
    if (run === undefined) return;
    run.optionsJson = toJson(options);
    run.status = 'running';
    run.updatedAt = at;
    const tasks = this.data.get(id)?.tasks;
    for (const taskId of taskIds) {
      const task = tasks?.get(taskId);
      if (task === undefined) continue;
      if (task.status === 'completed') run.tasksDone -= 1;
      task.status = 'queued';
      task.extraJson = null;
      task.rejectedJson = null;
      task.updatedAt = at;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Tasks
  // -------------------------------------------------------------------------------------------

  taskStarted(runId: string, taskId: string, attempt: number, route: string, at: number): void {
    this.open();
    const task = this.task(runId, taskId, at);
    task.status = 'running';
    task.attempts = attempt;
    task.updatedAt = at;
    const row = this.attempt(runId, taskId, attempt, at);
    Object.assign(row, { route, startedAt: at, endedAt: null, status: null, requests: 0, usageJson: null, costUsd: null });
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
    this.open();
    const usageJson = toJson(usage);
    const task = this.task(runId, taskId, at);
    const before = task.status;
    Object.assign(task, {
      status: 'completed',
      attempts: Math.max(task.attempts, attempt),
      output,
      errorJson: null,
      rejectedJson: null,
      usageJson,
      costUsd,
      requests,
      retries,
      updatedAt: at,
    });
    Object.assign(this.attempt(runId, taskId, attempt, at), { endedAt: at, status: 'completed', requests, usageJson, costUsd });
    const run = this.runs.get(runId);
    if (before !== 'completed' && run !== undefined) {
      run.tasksDone += 1;
      run.updatedAt = at;
    }
  }

  taskFailed(runId: string, taskId: string, attempt: number, error: unknown, final: boolean, at: number, rejected?: RejectedAnswer & { output: string }): void {
    this.open();
    const errorJson = toJson(error);
    const task = this.task(runId, taskId, at);
    task.status = final ? 'failed' : 'queued';
    task.attempts = Math.max(task.attempts, attempt);
    task.errorJson = errorJson;
    if (rejected !== undefined) {
      task.output = rejected.output;
      task.rejectedJson = toJson({ code: rejected.code, problems: rejected.problems } satisfies RejectedAnswer);
    }
    task.updatedAt = at;
    Object.assign(this.attempt(runId, taskId, attempt, at), { endedAt: at, status: 'failed' });
  }

  taskCounters(runId: string, taskId: string, requests: number, retries: number, usage: Usage, at: number): void {
    this.open();
    Object.assign(this.task(runId, taskId, at), { requests, retries, usageJson: toJson(usage), updatedAt: at });
  }

  taskFinal(runId: string, taskId: string, status: 'skipped' | 'cancelled' | 'waiting', reason: string, at: number): void {
    this.open();
    const task = this.task(runId, taskId, at);
    task.status = status;
    task.reason = reason;
    task.updatedAt = at;
    for (const row of this.runData(runId).attemptsOf.get(taskId)?.values() ?? []) {
      if (row.endedAt === null) Object.assign(row, { endedAt: at, status: 'cancelled' });
    }
  }

  addTasks(runId: string, tasks: readonly NewTask[]): void {
    this.open();
    const specs = tasks.map((task) => toJson(task.spec));
    const at = this.now();
    const known = this.runData(runId).tasks;
    let added = 0;
    tasks.forEach((t, i) => {
      const existing = known.get(t.id);
      if (existing) {
        // A planner that plans again may reuse an id: its new spec replaces the old.
        existing.specJson = specs[i]!;
        existing.parent = t.parent;
        return;
      }
      known.set(t.id, { ...newTask(at), specJson: specs[i], parent: t.parent });
      added += 1;
    });
    const run = this.runs.get(runId);
    if (added > 0 && run !== undefined) {
      run.tasksTotal += added;
      run.updatedAt = at;
    }
  }

  setTaskExtra(runId: string, taskId: string, extra: unknown): void {
    this.open();
    const json = toJson(extra);
    const at = this.now();
    const task = this.task(runId, taskId, at);
    task.extraJson = json;
    task.updatedAt = at;
  }

  attemptEnded(runId: string, taskId: string, attempt: number, status: 'completed' | 'failed' | 'cancelled', at: number): void {
    this.open();
    Object.assign(this.attempt(runId, taskId, attempt, at), { endedAt: at, status });
  }

  taskReopened(runId: string, taskId: string, extra: unknown, at: number): void {
    this.open();
    const json = toJson(extra);
    const task = this.task(runId, taskId, at);
    const run = this.runs.get(runId);
    if (task.status === 'completed' && run) run.tasksDone -= 1;
    task.status = 'queued';
    task.extraJson = json;
    task.rejectedJson = null;
    task.updatedAt = at;
  }

  loadTasks(runId: string): TaskRow[] {
    this.open();
    return [...(this.data.get(runId)?.tasks ?? new Map<string, TaskState>())].map(([taskId, t]) => taskRowOf(this.path, runId, taskId, t));
  }

  loadAttempts(runId: string, taskId?: string): AttemptRow[] {
    this.open();
    const rows = this.data.get(runId)?.attempts ?? [];
    return rows
      .filter((row) => taskId === undefined || row.taskId === taskId)
      .map((row) => attemptRowOf(this.path, runId, row));
  }

  // -------------------------------------------------------------------------------------------
  // Money and tools
  // -------------------------------------------------------------------------------------------

  recordSpend(runId: string, taskId: string, model: string, usd: number): void {
    this.open();
    const spend = this.runData(runId).spend;
    const key = `${taskId}\0${model}`;
    const entry = spend.get(key);
    if (entry === undefined) spend.set(key, { taskId, model, usd });
    else entry.usd += usd;
    const run = this.runs.get(runId);
    if (run !== undefined) {
      run.costUsd += usd;
      run.updatedAt = this.now();
    }
  }

  spent(runId: string): Spent {
    this.open();
    // Keyed by names from the plan: no prototype, so a task or model named `constructor` or `__proto__` is an ordinary key.
    const spent: Spent = { total: 0, byTask: Object.create(null) as Spent['byTask'], byModel: Object.create(null) as Spent['byModel'] };
    for (const row of this.data.get(runId)?.spend.values() ?? []) {
      spent.total += row.usd;
      spent.byTask[row.taskId] = (spent.byTask[row.taskId] ?? 0) + row.usd;
      spent.byModel[row.model] = (spent.byModel[row.model] ?? 0) + row.usd;
    }
    return spent;
  }

  recordToolResult(runId: string, key: string, content: string, isError: boolean): void {
    this.open();
    this.runData(runId).tools.set(key, { content, isError, at: this.now() });
  }

  toolResult(runId: string, key: string): { content: string; isError: boolean } | undefined {
    this.open();
    const row = this.data.get(runId)?.tools.get(key);
    return row === undefined ? undefined : { content: row.content, isError: row.isError };
  }

  // -------------------------------------------------------------------------------------------
  // Locks (one process: atomic by construction)
  // -------------------------------------------------------------------------------------------

  acquireLock(runId: string, owner: LockOwner, staleMs = 30_000): LockResult {
    this.open();
    const now = this.now();
    const held = this.locks.get(runId);
    if (held !== undefined) {
      if (!mayTake(held, owner.id, now, staleMs)) {
        return { ok: false, holder: { owner: held.owner, pid: held.pid, host: held.host, since: held.acquiredAt, heartbeatAt: held.heartbeatAt } };
      }
      if (held.owner === owner.id) {
        held.heartbeatAt = now;
        return { ok: true };
      }
    }
    this.locks.set(runId, { owner: owner.id, pid: owner.pid, host: owner.host, acquiredAt: now, heartbeatAt: now });
    return { ok: true };
  }

  isHeld(runId: string, staleMs = 30_000): boolean {
    this.open();
    const held = this.locks.get(runId);
    return held !== undefined && !mayTake(held, '', this.now(), staleMs);
  }

  heartbeat(runId: string, ownerId: string): boolean {
    this.open();
    const held = this.locks.get(runId);
    if (held === undefined || held.owner !== ownerId) return false;
    held.heartbeatAt = this.now();
    return true;
  }

  releaseLock(runId: string, ownerId: string): void {
    this.open();
    if (this.locks.get(runId)?.owner === ownerId) this.locks.delete(runId);
  }

  pruneRuns(rule: PruneRule, options: { dryRun?: boolean; staleMs?: number } = {}): PruneResult {
    checkPruneRule(rule);
    this.open();
    const now = this.now();
    const newestFirst = [...this.runs.values()].sort((a, b) => b.createdAt - a.createdAt || b.seq - a.seq);
    const isHeld = (id: string) => {
      const held = this.locks.get(id);
      return held !== undefined && !mayTake(held, '', now, options.staleMs ?? 30_000);
    };
    const picked = pickPrunable(newestFirst, rule, now, isHeld);
    const removed = picked.remove.map((run) => prunedRun(run, runBytes(this.runs.get(run.id)!, this.data.get(run.id), this.locks.get(run.id))));
    if (!options.dryRun) {
      for (const { id } of picked.remove) {
        this.runs.delete(id);
        this.data.delete(id);
        this.locks.delete(id);
      }
    }
    return { removed, bytes: removed.reduce((sum, r) => sum + r.bytes, 0), live: picked.live, interrupted: picked.interrupted };
  }

  /** Nothing to give back: removed runs are garbage for the collector. */
  compact(): void {
    this.open();
  }

  flush(): void {
    this.open();
  }

  close(): void {
    this.closed = true;
  }

  // -------------------------------------------------------------------------------------------

  private open(): void {
    if (this.closed) throw new StoreError(`run journal ${this.path}: the store is closed`, this.path, 'closed');
  }

  private runData(runId: string): RunData {
    let data = this.data.get(runId);
    if (data === undefined) {
      data = newRunData();
      this.data.set(runId, data);
    }
    return data;
  }

  private task(runId: string, taskId: string, at: number): TaskState {
    return taskOf(this.runData(runId), taskId, at);
  }

  private attempt(runId: string, taskId: string, attempt: number, at: number): AttemptState {
    return attemptOf(this.runData(runId), taskId, attempt, at);
  }
}
