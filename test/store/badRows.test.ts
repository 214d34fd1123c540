/**
 * Journal rows are outside input: a real SQLite file corrupted with raw SQL (a JSON column that
 * does not parse, text where a number goes) is read row by row. The bad row is named (run, table,
 * column) in a StoreError with the code `bad-row`; the other runs are still listed and read. Then
 * the CLI (npm run build first) as a child process: `runs`, `show`, `resume` and `retry`.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore, StoreError } from '../../src/store/index.js';
import { ROOT, tempDir, usage } from './helpers.js';
import { DRIVERS, rawDb } from '../helpers/sqlite.js';

const exec = promisify(execFile);
const BIN = path.join(ROOT, 'bin/swarmstate.js');
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const PLAN = { tasks: [{ id: 'a', prompt: 'hi' }] };

describe.each(DRIVERS)('on %s', (driver) => {
  /** A journal of three finished runs (r1 oldest), each with a completed task `a`, then `sql` run on it by another connection. */
  function corrupted(sql: string): string {
    const dir = tempDir();
    dirs.push(dir);
    const file = path.join(dir, 'runs.db');
    const store = new SqliteStore(file, { driver });
    for (const [i, id] of ['r1', 'r2', 'r3'].entries()) {
      store.createRun({ id, plan: PLAN, options: { seed: 1 }, tasksTotal: 1, createdAt: 1_000 + i });
      store.taskStarted(id, 'a', 1, 'p/m', 1_100);
      store.taskCompleted(id, 'a', 1, 'done', usage(1, 2), 0.5, 1, 0, 1_200);
      store.recordSpend(id, 'a', 'm', 0.5);
      store.setRunStatus(id, 'completed', { runId: id });
    }
    store.close();
    const db = rawDb(file, { driver });
    db.exec(sql);
    db.close();
    return file;
  }

  function open(file: string): SqliteStore {
    const store = new SqliteStore(file, { driver, readOnly: true });
    return store;
  }

  function thrown(call: () => unknown): StoreError & { runId?: string; table?: string; column?: string; taskId?: string } {
    try {
      call();
    } catch (error) {
      return error as StoreError;
    }
    throw new Error('it did not throw');
  }

  it("a task's JSON column that does not parse: that run's tasks throw a StoreError naming it; the others read", () => {
    const file = corrupted(`UPDATE tasks SET error_json = '{bad' WHERE run_id = 'r2'`);
    const store = open(file);
    const error = thrown(() => store.loadTasks('r2'));
    expect(error).toBeInstanceOf(StoreError);
    expect(error.sqliteCode).toBe('bad-row');
    expect([error.runId, error.table, error.column, error.taskId]).toEqual(['r2', 'tasks', 'error_json', 'a']);
    expect(error.message).toBe(`run journal ${file}: run r2: tasks.error_json of task a is not valid JSON (4 characters): the journal was changed outside swarmstate`);
    expect(store.loadTasks('r1').map((t) => t.output)).toEqual(['done']);
    expect(store.listRuns().map((r) => r.id)).toEqual(['r3', 'r2', 'r1']);
    store.close();
  });

  it("a run's options that do not parse: listed with `damaged`, the others as they were; getRun of it throws", () => {
    const file = corrupted(`UPDATE runs SET options_json = '{bad' WHERE id = 'r2'`);
    const store = open(file);
    const listed = store.listRuns();
    expect(listed.map((r) => [r.id, r.damaged?.column])).toEqual([['r3', undefined], ['r2', 'options_json'], ['r1', undefined]]);
    expect(listed[1]!.damaged).toEqual({ table: 'runs', column: 'options_json', message: 'runs.options_json is not valid JSON (4 characters): the journal was changed outside swarmstate' });
    expect(listed[0]).toEqual({ id: 'r3', status: 'completed', createdAt: 1_002, updatedAt: expect.any(Number), source: null, options: { seed: 1 }, tasksTotal: 1, tasksDone: 1, costUsd: 0.5 });
    const error = thrown(() => store.getRun('r2'));
    expect([error.sqliteCode, error.runId, error.table, error.column]).toEqual(['bad-row', 'r2', 'runs', 'options_json']);
    expect(store.getRun('r1')?.plan).toEqual(PLAN);
    store.close();
  });

  it('text where a number goes (cost_usd, requests, usd), an unknown status, a usage that is not one: each named', () => {
    const cases: Array<[string, () => (s: SqliteStore) => unknown, string, string]> = [
      [`UPDATE runs SET cost_usd = 'lots' WHERE id = 'r2'`, () => (s) => s.getRun('r2'), 'runs', 'cost_usd'],
      [`UPDATE tasks SET requests = 'many' WHERE run_id = 'r2'`, () => (s) => s.loadTasks('r2'), 'tasks', 'requests'],
      [`UPDATE tasks SET status = 'weird' WHERE run_id = 'r2'`, () => (s) => s.loadTasks('r2'), 'tasks', 'status'],
      [`UPDATE attempts SET usage_json = '[1,2]' WHERE run_id = 'r2'`, () => (s) => s.loadAttempts('r2'), 'attempts', 'usage_json'],
      [`UPDATE spend SET usd = 'x' WHERE run_id = 'r2'`, () => (s) => s.spent('r2'), 'spend', 'usd'],
      [`UPDATE run_plans SET plan_json = '{bad' WHERE run_id = 'r2'`, () => (s) => s.getRun('r2'), 'run_plans', 'plan_json'],
      [`UPDATE run_results SET result_json = 'nope' WHERE run_id = 'r2'`, () => (s) => s.getRun('r2'), 'run_results', 'result_json'],
    ];
    for (const [sql, read, table, column] of cases) {
      const store = open(corrupted(sql));
      const error = thrown(() => read()(store));
      expect([sql, error.sqliteCode, error.table, error.column]).toEqual([sql, 'bad-row', table, column]);
      expect(error.message).not.toMatch(/lots|many|weird|nope|Expected|Unexpected/);
      expect(store.listRuns()).toHaveLength(3);
      store.close();
    }
  });

  describe('the CLI', () => {
    async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
      try {
        const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], { env: { ...process.env, SWARMSTATE_STORE: '', SWARMSTATE_SQLITE: driver } });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const e = error as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    }

    it('runs lists the other runs and a line about the bad one; show, resume and retry of it say what is wrong', async () => {
      const file = corrupted(`UPDATE runs SET options_json = '{bad' WHERE id = 'r2'; UPDATE runs SET cost_usd = 'lots' WHERE id = 'r3'`);
      const listed = await cli(['runs', '--store', file]);
      expect(listed.stderr).not.toMatch(/Expected|at |TypeError/);
      expect(listed.code).toBe(0);
      const lines = listed.stdout.trimEnd().split('\n');
      expect(lines[1]).toMatch(/^r3 +unreadable +- +- +1970-01-01 00:00:01/);
      expect(lines[2]).toMatch(/^r2 +unreadable/);
      expect(lines[3]).toMatch(/^r1 +completed +1\/1 +\$0\.5000/);
      expect(lines.slice(4)).toEqual([
        '',
        'r3: runs.cost_usd holds text, not a number: the journal was changed outside swarmstate',
        'r2: runs.options_json is not valid JSON (4 characters): the journal was changed outside swarmstate',
      ]);
      const json = JSON.parse((await cli(['runs', '--store', file, '--json'])).stdout) as Array<{ id: string; damaged?: { column: string } }>;
      expect(json.map((r) => [r.id, r.damaged?.column])).toEqual([['r3', 'cost_usd'], ['r2', 'options_json'], ['r1', undefined]]);

      const what = `run journal ${file}: run r2: runs.options_json is not valid JSON (4 characters): the journal was changed outside swarmstate`;
      const shown = await cli(['show', 'r2', '--store', file]);
      expect([shown.code, shown.stderr.trim()]).toEqual([4, `swarmstate show: ${what}`]);
      for (const command of ['resume', 'retry']) {
        const r = await cli([command, 'r2', '--store', file]);
        expect([command, r.code, r.stderr.trim()]).toEqual([command, 4, `swarmstate: ${what}`]);
      }
      const other = await cli(['show', 'r1', '--store', file]);
      expect(other.code).toBe(0);
      expect(other.stdout).toMatch(/^run r1 +completed/);
    });
  });
});
