/**
 * Schema version 2: the plan and the result live in tables of their own (`run_plans`,
 * `run_results`), out of the `runs` row every batch updates, and out of each other's row. A file written by version 1 (built here with its own DDL, as that swarmstate left it)
 * is read as it is by a read-only listing, migrated by a store that writes, and resumed.
 * Version 3: a task row keeps its last rejected answer's problems (`rejected_json`); a version-2
 * file is read as it is (no rejected answers) and migrated by a store that writes.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { SCHEMA_VERSION, SqliteStore } from '../../src/store/index.js';
import { APPLICATION_ID } from '../../src/store/sqliteMigrate.js';
import { MIGRATIONS } from '../../src/store/sqliteSchema.js';
import { tempDir, usage } from './helpers.js';
import { DRIVERS, rawDb } from '../helpers/sqlite.js';

/** Version 1's tables as it created them (only `runs` differs from version 2). */
const V1_DDL = `
  CREATE TABLE runs (
    id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, status TEXT NOT NULL,
    plan_json TEXT, source TEXT, options_json TEXT, tasks_total INTEGER NOT NULL,
    tasks_done INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0, result_json TEXT
  );
  CREATE INDEX runs_by_created ON runs (created_at);
  CREATE TABLE tasks (
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    output TEXT, error_json TEXT, reason TEXT, usage_json TEXT, cost_usd REAL, requests INTEGER NOT NULL DEFAULT 0,
    retries INTEGER NOT NULL DEFAULT 0, spec_json TEXT, parent TEXT, extra_json TEXT, updated_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, task_id)
  );
  CREATE TABLE attempts (
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, attempt INTEGER NOT NULL, route TEXT NOT NULL,
    started_at INTEGER NOT NULL, ended_at INTEGER, status TEXT, requests INTEGER NOT NULL DEFAULT 0,
    usage_json TEXT, cost_usd REAL, PRIMARY KEY (run_id, task_id, attempt)
  );
  CREATE TABLE tool_results (
    run_id TEXT NOT NULL, key TEXT NOT NULL, content TEXT NOT NULL, is_error INTEGER NOT NULL, at INTEGER NOT NULL,
    PRIMARY KEY (run_id, key)
  );
  CREATE TABLE spend (
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, model TEXT NOT NULL, usd REAL NOT NULL, PRIMARY KEY (run_id, task_id, model)
  );
  CREATE TABLE locks (
    run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    acquired_at INTEGER NOT NULL, heartbeat_at INTEGER NOT NULL
  );
`;

const PLAN = {
  providers: { p: { type: 'sim' } },
  models: { fast: { provider: 'p', model: 'instant' } },
  tasks: [
    { id: 'a', model: 'fast', prompt: 'first' },
    { id: 'b', model: 'fast', prompt: 'second', deps: ['a'] },
  ],
};
const RESULT = { status: 'completed', note: 'written by version 1' };

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const hash = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

describe.each(DRIVERS)('on %s', (driver) => {
  /** A version-1 journal: run `halfway` (task a completed, b not started) and run `finished` (with its result). */
  function v1File(): string {
    const dir = tempDir();
    dirs.push(dir);
    const file = path.join(dir, 'runs.db');
    const db = rawDb(file, { driver });
    db.exec(V1_DDL);
    db.pragma('user_version = 1');
    db.pragma(`application_id = ${APPLICATION_ID}`);
    const plan = JSON.stringify(PLAN);
    db.prepare(
      `INSERT INTO runs (id, created_at, updated_at, status, plan_json, options_json, tasks_total, tasks_done, cost_usd, result_json)
       VALUES (?, ?, ?, ?, ?, '{"seed":0}', 2, ?, 0, ?)`,
    ).run('halfway', 100, 120, 'running', plan, 1, null);
    db.prepare(
      `INSERT INTO runs (id, created_at, updated_at, status, plan_json, options_json, tasks_total, tasks_done, cost_usd, result_json)
       VALUES (?, ?, ?, ?, ?, '{"seed":0}', 2, ?, 0, ?)`,
    ).run('finished', 200, 230, 'completed', plan, 2, JSON.stringify(RESULT));
    db.prepare(
      `INSERT INTO tasks (run_id, task_id, status, attempts, output, usage_json, requests, updated_at) VALUES ('halfway', 'a', 'completed', 1, 'from version 1', ?, 1, 120)`,
    ).run(JSON.stringify(usage(1, 1)));
    db.prepare(
      `INSERT INTO attempts (run_id, task_id, attempt, route, started_at, ended_at, status, requests, usage_json) VALUES ('halfway', 'a', 1, 'p/instant', 110, 120, 'completed', 1, ?)`,
    ).run(JSON.stringify(usage(1, 1)));
    db.close();
    return file;
  }

  it('a read-only store (a listing) reads a version-1 file as it is, without changing it', () => {
    const file = v1File();
    const before = hash(file);
    const reader = new SqliteStore(file, { readOnly: true, driver });
    expect(reader.listRuns().map((r) => [r.id, r.status, r.tasksDone])).toEqual([
      ['finished', 'completed', 2],
      ['halfway', 'running', 1],
    ]);
    expect(reader.getRun('finished')).toMatchObject({ plan: PLAN, result: RESULT });
    expect(reader.getRun('halfway')).toMatchObject({ plan: PLAN, result: null, tasksTotal: 2 });
    expect(reader.database.pragma('user_version')).toBe(1);
    reader.close();
    expect(hash(file)).toBe(before);
  });

  it('a store that writes migrates a version-1 file: plan and result move out of the runs row, and read back the same', () => {
    const file = v1File();
    const store = new SqliteStore(file, { driver });
    expect(store.database.pragma('user_version')).toBe(SCHEMA_VERSION);
    const columns = store.database.prepare("SELECT name FROM pragma_table_info('runs')").pluck().all();
    expect(columns).not.toContain('plan_json');
    expect(columns).not.toContain('result_json');
    expect(store.getRun('finished')).toMatchObject({ status: 'completed', tasksDone: 2, plan: PLAN, result: RESULT, createdAt: 200, updatedAt: 230 });
    expect(store.getRun('halfway')).toMatchObject({ status: 'running', tasksDone: 1, plan: PLAN, result: null });
    expect(store.loadTasks('halfway')).toMatchObject([{ taskId: 'a', status: 'completed', output: 'from version 1' }]);
    expect(store.database.pragma('integrity_check')).toBe('ok');
    store.close();
  });

  it('resumes a run journaled by version 1, and returns a finished one its recorded result', async () => {
    const file = v1File();
    const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => 'from version 2' }) }, store: new SqliteStore(file, { driver }) });
    try {
      const resumed = swarm.resume('halfway');
      const started: string[] = [];
      resumed.events.on('task:started', (e) => started.push(e.taskId));
      const result = await resumed.result;
      expect(result.status).toBe('completed');
      expect(started).toEqual(['b']);
      expect(result.tasks.a).toMatchObject({ status: 'completed', output: 'from version 1' });
      expect(result.tasks.b).toMatchObject({ status: 'completed', output: 'from version 2' });
      expect(await swarm.resume('finished').result).toEqual(RESULT);
      expect(swarm.runs().map((r) => [r.id, r.status, r.tasksDone])).toEqual([
        ['finished', 'completed', 2],
        ['halfway', 'completed', 2],
      ]);
    } finally {
      await swarm.close();
    }
  });

  /** A version-2 journal: version 1's file taken to 2 by its migration, as that swarmstate did. */
  function v2File(): string {
    const file = v1File();
    const db = rawDb(file, { driver });
    db.exec(`BEGIN; ${MIGRATIONS[1]} COMMIT;`);
    db.pragma('user_version = 2');
    db.close();
    return file;
  }

  it('a version-2 file is read as it is by a listing (no rejected answers), and migrated to 3 by a store that writes', () => {
    const file = v2File();
    const before = hash(file);
    const reader = new SqliteStore(file, { readOnly: true, driver });
    expect(reader.loadTasks('halfway')).toMatchObject([{ taskId: 'a', output: 'from version 1', rejected: null }]);
    expect(reader.database.pragma('user_version')).toBe(2);
    reader.close();
    expect(hash(file)).toBe(before);

    const store = new SqliteStore(file, { driver });
    expect(store.database.pragma('user_version')).toBe(3);
    expect(store.database.prepare("SELECT name FROM pragma_table_info('tasks')").pluck().all()).toContain('rejected_json');
    expect(store.loadTasks('halfway')).toMatchObject([{ taskId: 'a', status: 'completed', output: 'from version 1', rejected: null }]);
    store.taskStarted('halfway', 'b', 1, 'p/instant', 130);
    store.taskFailed('halfway', 'b', 1, { code: 'invalid_output' }, false, 140, { output: 'not json', code: 'invalid_output', problems: ['not JSON'] });
    expect(store.loadTasks('halfway')[1]).toMatchObject({ taskId: 'b', status: 'queued', output: 'not json', rejected: { code: 'invalid_output', problems: ['not JSON'] } });
    expect(store.database.pragma('integrity_check')).toBe('ok');
    store.close();
  });

  it("neither a batch's counter update nor the result rewrites the plan: the WAL grows by a few pages, not by the plan's size", () => {
    const dir = tempDir();
    dirs.push(dir);
    const file = path.join(dir, 'runs.db');
    const store = new SqliteStore(file, { driver });
    // About 600 KB of plan: 150 pages, under the WAL's auto-checkpoint (1,000 pages). SQLite
    // overwrites a row of unchanged size in place, page by page, but rewrites the whole row when its
    // size changes: with the plan in the runs row, the first completion (tasks_done 0 -> 1), the
    // first cost, tasks_done past 127, and the result each rewrote the plan.
    const tasks = Array.from({ length: 6000 }, (_, i) => ({ id: `t${i}`, prompt: `task number ${i} of a large plan` }));
    store.createRun({ id: 'big', plan: { tasks }, options: {}, tasksTotal: tasks.length, createdAt: 1 });
    const before = fs.statSync(`${file}-wal`).size;
    store.taskStarted('big', 't0', 1, 'p/m', 2);
    store.taskCompleted('big', 't0', 1, 'out', usage(1, 1), 0.5, 1, 0, 3);
    store.flush();
    const walSize = () => fs.statSync(`${file}-wal`).size;
    const counted = walSize();
    expect(store.getRun('big')).toMatchObject({ tasksDone: 1, costUsd: 0 });
    expect(counted - before).toBeGreaterThan(0);
    expect(counted - before).toBeLessThan(64 * 1024);
    store.setRunStatus('big', 'completed', { ok: true });
    expect(walSize() - counted).toBeGreaterThan(0);
    expect(walSize() - counted).toBeLessThan(64 * 1024);
    expect(store.getRun('big')).toMatchObject({ status: 'completed', result: { ok: true }, plan: { tasks } });
    // A result for a run the journal does not hold is written nowhere, as before.
    store.setRunStatus('nope', 'completed', { ok: false });
    expect(store.database.prepare('SELECT run_id FROM run_results').pluck().all()).toEqual(['big']);
    store.close();
  });
});
