/**
 * The journal's SQLite schema and statements, apart from `SqliteStore` so each file reads on its
 * own: the migrations (`PRAGMA user_version` is the version: `MIGRATIONS[i]` takes a file from
 * version i to i + 1), every statement the store runs (prepared once per connection), and the
 * row shapes SQLite hands back.
 */
import type { SqlDatabase, SqlStatement } from './driver.js';
import { type AttemptRow, type StoredRunStatus, type StoredTaskStatus } from './types.js';

/** `MIGRATIONS[i]` takes the schema from version i to i + 1. The last index + 1 is the version. */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE IF NOT EXISTS runs (
    id           TEXT PRIMARY KEY,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    status       TEXT NOT NULL,
    plan_json    TEXT,              -- already secret-free: the caller redacts
    source       TEXT,              -- the plan file's path
    options_json TEXT,
    tasks_total  INTEGER NOT NULL,
    tasks_done   INTEGER NOT NULL DEFAULT 0,
    cost_usd     REAL NOT NULL DEFAULT 0,
    result_json  TEXT
  );
  CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at);
  CREATE TABLE IF NOT EXISTS tasks (
    run_id     TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    status     TEXT NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    output     TEXT,
    error_json TEXT,
    reason     TEXT,
    usage_json TEXT,
    cost_usd   REAL,
    requests   INTEGER NOT NULL DEFAULT 0,
    retries    INTEGER NOT NULL DEFAULT 0,
    spec_json  TEXT,                -- sub-tasks a planner task made at run time
    parent     TEXT,
    extra_json TEXT,                -- review round, feedback: opaque to the store
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, task_id)
  );
  CREATE TABLE IF NOT EXISTS attempts (
    run_id     TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    route      TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    status     TEXT,
    requests   INTEGER NOT NULL DEFAULT 0,
    usage_json TEXT,
    cost_usd   REAL,
    PRIMARY KEY (run_id, task_id, attempt)
  );
  CREATE TABLE IF NOT EXISTS tool_results (
    run_id   TEXT NOT NULL,
    key      TEXT NOT NULL,
    content  TEXT NOT NULL,
    is_error INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (run_id, key)
  );
  CREATE TABLE IF NOT EXISTS spend (
    run_id  TEXT NOT NULL,
    task_id TEXT NOT NULL,
    model   TEXT NOT NULL,
    usd     REAL NOT NULL,
    PRIMARY KEY (run_id, task_id, model)
  );
  CREATE TABLE IF NOT EXISTS locks (
    run_id       TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    acquired_at  INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
  );
  `,
  // 1 -> 2: the plan and the result, each written once, leave the runs row that batches update
  // (its counters): SQLite rewrites a whole row, overflow pages and all, when an UPDATE changes its
  // size (the first completion, the first cost, tasks_done past 127, the result), and the plan is
  // ~100 bytes per task. Each in a table of its own, so writing the result does not rewrite the plan.
  `
  CREATE TABLE IF NOT EXISTS run_plans (
    run_id    TEXT PRIMARY KEY,
    plan_json TEXT                  -- already secret-free: the caller redacts
  );
  CREATE TABLE IF NOT EXISTS run_results (
    run_id      TEXT PRIMARY KEY,
    result_json TEXT NOT NULL
  );
  INSERT INTO run_plans (run_id, plan_json) SELECT id, plan_json FROM runs;
  INSERT INTO run_results (run_id, result_json) SELECT id, result_json FROM runs WHERE result_json IS NOT NULL;
  ALTER TABLE runs DROP COLUMN plan_json;
  ALTER TABLE runs DROP COLUMN result_json;
  `,
  // 2 -> 3: what was wrong with a task's last rejected answer (the answer is its output), so a
  // resumed retry's prompt carries it as the uninterrupted run's would. A column added is O(1):
  // SQLite reads it as NULL in the rows written before.
  `
  ALTER TABLE tasks ADD COLUMN rejected_json TEXT;
  `,
];

/** The oldest version a read-only store reads as it is (it cannot migrate): version 1 kept the plan and result in `runs`. */
export const OLDEST_READABLE = 1;

export const SCHEMA_VERSION = MIGRATIONS.length;

const TASK_COLUMNS =
  'task_id, status, attempts, output, error_json, reason, usage_json, cost_usd, requests, retries, spec_json, parent, extra_json, updated_at';
/** A file before version 3 has no rejected answers (a read-only store reads it as it is). */
const rejectedColumn = (version: number) => (version >= 3 ? 'rejected_json' : 'NULL AS rejected_json');
const ATTEMPT_COLUMNS = 'task_id, attempt, route, started_at, ended_at, status, requests, usage_json, cost_usd';
const SUMMARY_COLUMNS = 'id, status, created_at, updated_at, source, options_json, tasks_total, tasks_done, cost_usd';

/** The part of a prepared statement the store uses (driver.ts). */
export type Stmt = SqlStatement;

/** A statement a read-only store never runs (its writes are refused before any statement). */
const NOT_PREPARED: Stmt = {
  run: notPrepared,
  get: notPrepared,
  all: notPrepared,
  pluck: () => NOT_PREPARED,
};
function notPrepared(): never {
  throw new Error('a write statement of a read-only store was run');
}

/**
 * Every statement, prepared once, for a file at schema `version`. A read-only store prepares only
 * its reads: a file of an older version it reads (OLDEST_READABLE) lacks the tables newer writes use.
 */
export function prepare(db: SqlDatabase, version: number, readOnly: boolean) {
  const p = (sql: string): Stmt => db.prepare(sql);
  const w: (sql: string) => Stmt = readOnly ? () => NOT_PREPARED : p;
  return {
    begin: w('BEGIN IMMEDIATE'),
    commit: w('COMMIT'),
    runExists: w('SELECT 1 FROM runs WHERE id = ?').pluck(),
    insertRun: w(
      `INSERT INTO runs (id, created_at, updated_at, status, source, options_json, tasks_total)
       VALUES (?, ?, ?, 'running', ?, ?, ?)`,
    ),
    insertPlan: w('INSERT INTO run_plans (run_id, plan_json) VALUES (?, ?)'),
    getRun: p(
      version >= 2
        ? `SELECT ${SUMMARY_COLUMNS}, plan_json, result_json FROM runs
             LEFT JOIN run_plans ON run_plans.run_id = runs.id LEFT JOIN run_results ON run_results.run_id = runs.id WHERE id = ?`
        : `SELECT ${SUMMARY_COLUMNS}, plan_json, result_json FROM runs WHERE id = ?`,
    ),
    listRuns: p(`SELECT ${SUMMARY_COLUMNS} FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?`),
    /**
     * The status of each container of a run (shared.ts withoutContainers): a map or reduce with
     * rows under it. Its kind is in its spec (a sub-task), else in the plan; a column that is not
     * JSON gives no kind rather than an error (the listing reports damage its own way).
     */
    containers: p(
      `SELECT status FROM (
         SELECT c.status, COALESCE(
           CASE WHEN json_valid(c.spec_json) THEN json_extract(c.spec_json, '$.kind') END,
           (SELECT json_extract(t.value, '$.kind') FROM ${version >= 2 ? 'run_plans' : 'runs'} AS r, json_each(CASE WHEN json_valid(r.plan_json) THEN r.plan_json ELSE '{}' END, '$.tasks') AS t
              WHERE r.${version >= 2 ? 'run_id' : 'id'} = c.run_id AND json_extract(t.value, '$.id') = c.task_id LIMIT 1)) AS kind
         FROM tasks AS c
         WHERE c.run_id = ? AND c.task_id IN (SELECT parent FROM tasks WHERE run_id = ? AND parent IS NOT NULL))
       WHERE kind IN ('map', 'reduce')`,
    ).pluck(),
    setStatus: w('UPDATE runs SET status = ?, updated_at = ? WHERE id = ?'),
    /** Of a run that exists, as the UPDATE of the runs row it was. */
    setResult: w(
      `INSERT INTO run_results (run_id, result_json) SELECT id, ? FROM runs WHERE id = ?
       ON CONFLICT (run_id) DO UPDATE SET result_json = excluded.result_json`,
    ),
    setOptions: w('UPDATE runs SET options_json = ?, updated_at = ? WHERE id = ?'),
    runUndone: w('UPDATE runs SET tasks_done = tasks_done - 1, updated_at = ? WHERE id = ?'),
    /** A batch's completions and spend, at once (sqliteCounters.ts). */
    runAdd: w('UPDATE runs SET tasks_done = tasks_done + ?, cost_usd = cost_usd + ?, updated_at = ? WHERE id = ?'),
    taskReopen: w(`UPDATE tasks SET status = 'queued', extra_json = ?, rejected_json = NULL, updated_at = ? WHERE run_id = ? AND task_id = ?`),
    runTotal: w('UPDATE runs SET tasks_total = tasks_total + ?, updated_at = ? WHERE id = ?'),

    taskStatus: p('SELECT status FROM tasks WHERE run_id = ? AND task_id = ?').pluck(),
    taskStart: w(
      `INSERT INTO tasks (run_id, task_id, status, attempts, updated_at) VALUES (?, ?, 'running', ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET status = 'running', attempts = excluded.attempts, updated_at = excluded.updated_at`,
    ),
    taskComplete: w(
      `INSERT INTO tasks (run_id, task_id, status, attempts, output, usage_json, cost_usd, requests, retries, updated_at)
       VALUES (?, ?, 'completed', ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET status = 'completed', attempts = max(attempts, excluded.attempts),
         output = excluded.output, error_json = NULL, rejected_json = NULL, usage_json = excluded.usage_json, cost_usd = excluded.cost_usd,
         requests = excluded.requests, retries = excluded.retries, updated_at = excluded.updated_at`,
    ),
    /** A start and its completion in one batch (sqliteStarts.ts): the row taskStart then taskComplete leave. */
    taskStartComplete: w(
      `INSERT INTO tasks (run_id, task_id, status, attempts, output, usage_json, cost_usd, requests, retries, updated_at)
       VALUES (?, ?, 'completed', ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET status = 'completed', attempts = excluded.attempts,
         output = excluded.output, error_json = NULL, rejected_json = NULL, usage_json = excluded.usage_json, cost_usd = excluded.cost_usd,
         requests = excluded.requests, retries = excluded.retries, updated_at = excluded.updated_at`,
    ),
    taskFail: w(
      `INSERT INTO tasks (run_id, task_id, status, attempts, error_json, updated_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET status = excluded.status, attempts = max(attempts, excluded.attempts),
         error_json = excluded.error_json, updated_at = excluded.updated_at`,
    ),
    /** taskFail of an attempt whose answer was rejected: the answer is kept as the output, with its problems. */
    taskFailRejected: w(
      `INSERT INTO tasks (run_id, task_id, status, attempts, error_json, output, rejected_json, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET status = excluded.status, attempts = max(attempts, excluded.attempts),
         error_json = excluded.error_json, output = excluded.output, rejected_json = excluded.rejected_json, updated_at = excluded.updated_at`,
    ),
    /** An attempt ended without completing its task: the task's counters over all its attempts. */
    taskCounters: w('UPDATE tasks SET requests = ?, retries = ?, usage_json = ?, updated_at = ? WHERE run_id = ? AND task_id = ?'),
    taskFinal: w(
      `INSERT INTO tasks (run_id, task_id, status, reason, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, updated_at = excluded.updated_at`,
    ),
    taskAdd: w(
      `INSERT INTO tasks (run_id, task_id, status, spec_json, parent, updated_at) VALUES (?, ?, 'pending', ?, ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET spec_json = excluded.spec_json, parent = excluded.parent, updated_at = excluded.updated_at`,
    ),
    taskExtra: w(
      `INSERT INTO tasks (run_id, task_id, status, extra_json, updated_at) VALUES (?, ?, 'pending', ?, ?)
       ON CONFLICT (run_id, task_id) DO UPDATE SET extra_json = excluded.extra_json, updated_at = excluded.updated_at`,
    ),
    loadTasks: p(`SELECT ${TASK_COLUMNS}, ${rejectedColumn(version)} FROM tasks WHERE run_id = ? ORDER BY rowid`),

    attemptStart: w(
      `INSERT INTO attempts (run_id, task_id, attempt, route, started_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET route = excluded.route, started_at = excluded.started_at,
         ended_at = NULL, status = NULL, requests = 0, usage_json = NULL, cost_usd = NULL`,
    ),
    // An attempt that ends without having been journaled as started gets route '' and starts when it ends.
    attemptComplete: w(
      `INSERT INTO attempts (run_id, task_id, attempt, route, started_at, ended_at, status, requests, usage_json, cost_usd)
       VALUES (?, ?, ?, '', ?, ?, 'completed', ?, ?, ?)
       ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET ended_at = excluded.ended_at, status = 'completed',
         requests = excluded.requests, usage_json = excluded.usage_json, cost_usd = excluded.cost_usd`,
    ),
    /** The row attemptStart then attemptComplete leave. */
    attemptStartComplete: w(
      `INSERT INTO attempts (run_id, task_id, attempt, route, started_at, ended_at, status, requests, usage_json, cost_usd)
       VALUES (?, ?, ?, ?, ?, ?, 'completed', ?, ?, ?)
       ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET route = excluded.route, started_at = excluded.started_at,
         ended_at = excluded.ended_at, status = 'completed', requests = excluded.requests, usage_json = excluded.usage_json,
         cost_usd = excluded.cost_usd`,
    ),
    attemptEnd: w(`UPDATE attempts SET ended_at = ?, status = ? WHERE run_id = ? AND task_id = ? AND attempt = ?`),
    attemptFail: w(
      `INSERT INTO attempts (run_id, task_id, attempt, route, started_at, ended_at, status) VALUES (?, ?, ?, '', ?, ?, 'failed')
       ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET ended_at = excluded.ended_at, status = 'failed'`,
    ),
    attemptCancelOpen: w(
      `UPDATE attempts SET ended_at = ?, status = 'cancelled' WHERE run_id = ? AND task_id = ? AND ended_at IS NULL`,
    ),
    loadAttempts: p(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? ORDER BY rowid`),
    loadAttemptsOf: p(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? AND task_id = ? ORDER BY rowid`),

    spend: w(
      `INSERT INTO spend (run_id, task_id, model, usd) VALUES (?, ?, ?, ?)
       ON CONFLICT (run_id, task_id, model) DO UPDATE SET usd = usd + excluded.usd`,
    ),
    spent: p('SELECT task_id, model, usd FROM spend WHERE run_id = ? ORDER BY rowid'),

    toolPut: w(
      `INSERT INTO tool_results (run_id, key, content, is_error, at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (run_id, key) DO UPDATE SET content = excluded.content, is_error = excluded.is_error, at = excluded.at`,
    ),
    toolGet: p('SELECT content, is_error FROM tool_results WHERE run_id = ? AND key = ?'),

    lockGet: p('SELECT owner, pid, host, acquired_at, heartbeat_at FROM locks WHERE run_id = ?'),
    lockPut: w(
      `INSERT INTO locks (run_id, owner, pid, host, acquired_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, pid = excluded.pid, host = excluded.host,
         acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at`,
    ),
    lockBeat: w('UPDATE locks SET heartbeat_at = ? WHERE run_id = ? AND owner = ?'),
    lockDel: w('DELETE FROM locks WHERE run_id = ? AND owner = ?'),
  };
}

export type Statements = ReturnType<typeof prepare>;

// Row shapes as SQLite returns them.
export interface SummaryRow {
  id: string;
  status: StoredRunStatus;
  created_at: number;
  updated_at: number;
  source: string | null;
  options_json: string | null;
  tasks_total: number;
  tasks_done: number;
  cost_usd: number;
}
export interface RunRow extends SummaryRow {
  plan_json: string | null;
  result_json: string | null;
}
export interface TaskDbRow {
  task_id: string;
  status: StoredTaskStatus;
  attempts: number;
  output: string | null;
  error_json: string | null;
  reason: string | null;
  usage_json: string | null;
  cost_usd: number | null;
  requests: number;
  retries: number;
  spec_json: string | null;
  parent: string | null;
  extra_json: string | null;
  updated_at: number;
  rejected_json: string | null;
}
export interface AttemptDbRow {
  task_id: string;
  attempt: number;
  route: string;
  started_at: number;
  ended_at: number | null;
  status: AttemptRow['status'];
  requests: number;
  usage_json: string | null;
  cost_usd: number | null;
}
