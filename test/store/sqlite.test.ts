/**
 * What only the file store has, on real SQLite files in temp dirs: its settings (WAL...), the
 * schema version, batches and what another connection sees of them, a real SQLITE_FULL (rollback,
 * refusal, reopen), a read-only file, and locks between connections and between processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, MemoryStore, SCHEMA_VERSION, SqliteStore, StoreError } from '../../src/store/index.js';
import { HOST } from '../../src/store/shared.js';
import { BUSY_TIMEOUT_MS } from '../../src/store/busy.js';
import { BATCH_MAX_WRITES } from '../../src/store/sqliteWrites.js';
import { APPLICATION_ID } from '../../src/store/sqliteMigrate.js';
import { exited, lineReader, manualClock, ROOT, tempDir, tsChild, usage } from './helpers.js';
import { DRIVERS, rawDb } from '../helpers/sqlite.js';
import type { SqlDatabase } from '../../src/store/driver.js';

const dirs: string[] = [];
const handles: Array<{ close(): void }> = [];
afterEach(() => {
  for (const handle of handles.splice(0)) {
    try {
      handle.close();
    } catch {
      // already closed
    }
  }
  for (const dir of dirs.splice(0)) {
    fs.chmodSync(dir, 0o755);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

function dbFile(): string {
  const dir = tempDir();
  dirs.push(dir);
  return path.join(dir, 'runs.db');
}

describe.each(DRIVERS)('on %s', (driver) => {
  function open(file: string, options = {}): SqliteStore {
    const store = new SqliteStore(file, { driver, ...options });
    handles.push(store);
    return store;
  }

  /** A second, independent connection: what another process would see. */
  function peek(file: string): SqlDatabase {
    const db = rawDb(file, { readOnly: true, driver });
    handles.push(db);
    return db;
  }

  const RUN = { id: 'r1', plan: { tasks: [] }, options: {}, tasksTotal: 3, createdAt: 100 };
  const countTasks = (db: SqlDatabase) => db.prepare('SELECT count(*) FROM tasks').pluck().get();

  describe('SqliteStore: the file', () => {
    it('runs in WAL mode with synchronous=NORMAL and a busy timeout, at the current schema version', () => {
      const file = dbFile();
      const db = open(file).database;
      expect(db.pragma('journal_mode')).toBe('wal');
      expect(db.pragma('synchronous')).toBe(1); // NORMAL
      expect(db.pragma('busy_timeout')).toBe(BUSY_TIMEOUT_MS);
      expect(db.pragma('user_version')).toBe(SCHEMA_VERSION);
      expect(db.pragma('application_id')).toBe(APPLICATION_ID);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
      expect(tables).toEqual(['attempts', 'locks', 'run_plans', 'run_results', 'runs', 'spend', 'tasks', 'tool_results']);
    });

    it('creates its directory, and opens an existing file again without touching the data', () => {
      const dir = tempDir();
      dirs.push(dir);
      const file = path.join(dir, 'deep', 'er', 'runs.db');
      const first = open(file);
      first.createRun(RUN);
      first.close();
      const again = open(file);
      expect(again.getRun('r1')?.tasksTotal).toBe(3);
      expect(again.database.pragma('user_version')).toBe(SCHEMA_VERSION);
    });

    it('refuses a file written by a newer schema', () => {
      const file = dbFile();
      open(file).close();
      const raw = rawDb(file, { driver });
      raw.pragma('user_version = 99');
      raw.close();
      expect(() => open(file)).toThrow(StoreError);
      expect(() => open(file)).toThrow(/schema version 99 is newer/);
    });

    it('reports a path it cannot open as a StoreError naming the path', () => {
      const dir = tempDir();
      dirs.push(dir);
      fs.mkdirSync(path.join(dir, 'runs.db')); // a directory where the file should be
      let caught: unknown;
      try {
        open(path.join(dir, 'runs.db'));
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(StoreError);
      expect(caught).toMatchObject({ code: 'STORE_FAILED', path: path.join(dir, 'runs.db') });
      expect((caught as Error).message).toMatch(/^run journal .*runs\.db: cannot open: SQLITE_CANTOPEN/);
    });

    it('openStore: undefined is .swarmstate/runs.db under the working directory; memory names; a path', async () => {
      expect(openStore('memory')).toBeInstanceOf(MemoryStore);
      expect(openStore(':memory:')).toBeInstanceOf(MemoryStore);
      const file = dbFile();
      const store = openStore(file);
      handles.push(store);
      expect(store).toBeInstanceOf(SqliteStore);
      expect(store.path).toBe(file);
      // The default path, from a child whose working directory is a temp dir.
      const cwd = tempDir();
      dirs.push(cwd);
      const index = pathToFileURL(path.join(ROOT, 'src/store/index.ts')).href;
      const { spawnSync } = await import('node:child_process');
      const tsx = import.meta.resolve('tsx');
      const code = `import { openStore } from '${index}'; const s = openStore(undefined, { driver: '${driver}' }); console.log(s.path); s.close();`;
      const child = spawnSync(process.execPath, ['--import', tsx, '--input-type=module', '-e', code], { cwd, encoding: 'utf8' });
      expect(child.stderr).toBe('');
      expect(child.stdout.trim()).toBe(path.join(fs.realpathSync(cwd), '.swarmstate', 'runs.db'));
      expect(fs.existsSync(path.join(cwd, '.swarmstate', 'runs.db'))).toBe(true);
    });
  });

  describe('SqliteStore: batches', () => {
    it('holds no write lock between batched writes; its own reads see them (committing them), others after flush', () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN); // durable now
      const other = peek(file);
      expect(other.prepare('SELECT id FROM runs').pluck().all()).toEqual(['r1']);
      store.taskStarted('r1', 'a', 1, 'p/m', 110);
      store.recordSpend('r1', 'a', 'm', 0.5);
      expect(store.database.inTransaction).toBe(false); // another process may write meanwhile
      expect(countTasks(other)).toBe(0);
      expect(store.loadTasks('r1').map((t) => t.status)).toEqual(['running']);
      expect(store.spent('r1').total).toBe(0.5);
      expect(countTasks(other)).toBe(1);
      store.taskStarted('r1', 'b', 1, 'p/m', 120);
      expect(countTasks(other)).toBe(1);
      store.flush();
      expect(countTasks(other)).toBe(2);
      store.flush(); // nothing pending: a no-op
    });

    it('commits a batch by itself on the next macrotask', async () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN);
      const other = peek(file);
      store.taskStarted('r1', 'a', 1, 'p/m', 110);
      store.taskStarted('r1', 'b', 1, 'p/m', 111);
      expect(countTasks(other)).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(store.database.inTransaction).toBe(false);
      expect(countTasks(other)).toBe(2);
    });

    it('commits a full batch at once, without waiting for the macrotask to end (a run that settles in microtasks)', () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN);
      const other = peek(file);
      // Each task: its start and its completion, one write when both are in the batch (sqliteStarts.ts).
      const tasks = BATCH_MAX_WRITES;
      for (let i = 0; i < tasks - 1; i++) {
        store.taskStarted('r1', `t${i}`, 1, 'p/m', 110);
        store.taskCompleted('r1', `t${i}`, 1, 'out', usage(1, 1), 0.01, 1, 0, 120 + i);
      }
      expect(countTasks(other)).toBe(0);
      store.taskStarted('r1', 'last', 1, 'p/m', 130); // the batch is full
      expect(countTasks(other)).toBe(tasks);
      expect(other.prepare('SELECT tasks_done, updated_at FROM runs').get()).toEqual({ tasks_done: tasks - 1, updated_at: 120 + tasks - 2 });
      expect(store.database.inTransaction).toBe(false);
    });

    it('a full batch that finds the write lock held waits for the armed commit, and loses nothing', async () => {
      const file = dbFile();
      const errors: StoreError[] = [];
      const store = open(file, { onError: (e: StoreError) => errors.push(e) });
      store.createRun(RUN);
      const holder = rawDb(file, { driver });
      handles.push(holder);
      holder.exec('BEGIN IMMEDIATE'); // another run, in the middle of a write
      const writes = BATCH_MAX_WRITES + 10;
      for (let i = 0; i < writes; i++) store.taskStarted('r1', `t${i}`, 1, 'p/m', 110);
      expect(errors).toEqual([]);
      holder.exec('COMMIT');
      const other = peek(file);
      while (countTasks(other) === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(countTasks(other)).toBe(writes);
      expect(errors).toEqual([]);
    });

    it('counts a task done once per run, whether its completions share a batch or not', () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN);
      const other = peek(file);
      store.taskCompleted('r1', 'a', 1, 'out', usage(1, 1), null, 1, 0, 120);
      store.taskCompleted('r1', 'a', 1, 'out', usage(1, 1), null, 1, 0, 121); // the same batch
      store.recordSpend('r1', 'a', 'm', 0.25);
      store.flush();
      expect(other.prepare('SELECT tasks_done, cost_usd FROM runs').get()).toEqual({ tasks_done: 1, cost_usd: 0.25 });
      store.taskCompleted('r1', 'a', 2, 'again', usage(1, 1), null, 1, 0, 130); // a later batch
      store.taskCompleted('r1', 'b', 1, 'out', usage(1, 1), null, 1, 0, 131);
      store.recordSpend('r1', 'b', 'm', 0.5);
      store.taskReopened('r1', 'a', null, 140); // durable: after the batch, in its transaction
      expect(other.prepare('SELECT tasks_done, cost_usd, updated_at FROM runs').get()).toEqual({ tasks_done: 1, cost_usd: 0.75, updated_at: 140 });
    });

    it('makes a durable-now write visible to another connection at once, with what was pending', () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN);
      const other = peek(file);
      store.taskStarted('r1', 'a', 1, 'p/m', 110); // batched
      store.taskCompleted('r1', 'a', 1, 'out', usage(1, 1), 0.01, 1, 0, 120); // batched too
      expect(countTasks(other)).toBe(0);
      store.taskFailed('r1', 'z', 1, { code: 'x' }, true, 125); // durable now: commits the batch with it
      expect(other.prepare("SELECT task_id, status, output FROM tasks WHERE task_id = 'a'").all()).toEqual([{ task_id: 'a', status: 'completed', output: 'out' }]);
      expect(other.prepare('SELECT count(*) FROM attempts').pluck().get()).toBe(2);
      expect(other.prepare('SELECT tasks_done FROM runs').pluck().get()).toBe(1);
      store.taskStarted('r1', 'b', 1, 'p/m', 130);
      store.recordToolResult('r1', 'k', 'sent the mail', false);
      expect(other.prepare('SELECT content FROM tool_results').pluck().all()).toEqual(['sent the mail']);
      expect(countTasks(other)).toBe(3);
      store.taskStarted('r1', 'c', 1, 'p/m', 140);
      store.setRunStatus('r1', 'completed', { ok: true });
      expect(other.prepare('SELECT status, result_json FROM runs JOIN run_results ON run_id = id').get()).toEqual({ status: 'completed', result_json: '{"ok":true}' });
      expect(countTasks(other)).toBe(4);
    });

    it('keeps what was committed across close and reopen; close commits what is pending', () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN);
      store.taskStarted('r1', 'a', 1, 'p/m', 110);
      store.taskCompleted('r1', 'a', 1, 'out', usage(1, 2), null, 1, 0, 120);
      store.taskStarted('r1', 'b', 1, 'p/m', 130);
      store.setTaskExtra('r1', 'b', { round: 1 });
      store.close();
      const again = open(file);
      expect(again.loadTasks('r1').map((t) => [t.taskId, t.status, t.output, t.extra])).toEqual([
        ['a', 'completed', 'out', null],
        ['b', 'running', null, { round: 1 }],
      ]);
      expect(again.getRun('r1')?.tasksDone).toBe(1);
    });
  });

  describe('SqliteStore: write failures', () => {
    /** A store whose database cannot grow by one more page: the next big write gets SQLITE_FULL. */
    function fullStore(file: string, onError?: (error: StoreError) => void) {
      const store = open(file, { onError });
      store.createRun(RUN);
      store.taskStarted('r1', 'done', 1, 'p/m', 105);
      store.taskCompleted('r1', 'done', 1, 'kept', usage(1, 1), 0.01, 1, 0, 106);
      store.flush();
      const pages = store.database.pragma('page_count') as number;
      store.database.pragma(`max_page_count = ${pages}`);
      return store;
    }

    it('throws a StoreError on SQLITE_FULL, rolls the batch back and refuses later writes', () => {
      const file = dbFile();
      const store = fullStore(file);
      store.taskStarted('r1', 'a', 1, 'p/m', 110); // batched: rolled back with the failure
      store.recordSpend('r1', 'a', 'm', 0.5);
      let caught: unknown;
      try {
        store.taskCompleted('r1', 'a', 1, 'x'.repeat(1_000_000), usage(1, 1), 0.1, 1, 0, 120);
        store.flush(); // the batch runs here, and fails at its third write
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(StoreError);
      const error = caught as StoreError;
      expect(error).toMatchObject({ code: 'STORE_FAILED', sqliteCode: 'SQLITE_FULL', path: file });
      expect(error.message).toContain(file);
      expect(error.message).toContain('SQLITE_FULL');
      expect(error.message).toContain('record task completion failed');
      expect(error.message).not.toContain('xxxx');
      // Nothing of the batch is left: no task row, no attempt row, no spend, the run's counters as they were.
      expect(store.loadTasks('r1').map((t) => t.taskId)).toEqual(['done']);
      expect(store.loadAttempts('r1').map((a) => a.taskId)).toEqual(['done']);
      expect(store.spent('r1')).toEqual({ total: 0, byTask: {}, byModel: {} });
      expect(store.getRun('r1')).toMatchObject({ tasksDone: 1, costUsd: 0 });
      // Every later write, and flush, throws the same error; a small write too.
      expect(() => store.taskStarted('r1', 'b', 1, 'p/m', 130)).toThrow(error);
      expect(() => store.setRunStatus('r1', 'failed')).toThrow(error);
      expect(() => store.acquireLock('r1', { id: 'o', pid: process.pid, host: HOST })).toThrow(error);
      expect(() => store.flush()).toThrow(error);
      store.close();
      // Reopened (without the page cap): the committed data is intact, and writes work again.
      const again = open(file);
      expect(again.getRun('r1')).toMatchObject({ status: 'running', tasksDone: 1, tasksTotal: 3 });
      expect(again.loadTasks('r1')).toEqual([expect.objectContaining({ taskId: 'done', status: 'completed', output: 'kept' })]);
      expect(again.database.pragma('integrity_check')).toBe('ok');
      again.taskStarted('r1', 'b', 1, 'p/m', 140);
      again.flush();
      expect(again.loadTasks('r1').map((t) => t.taskId)).toEqual(['done', 'b']);
    });

    it('fails a durable write at once, naming it', () => {
      const store = fullStore(dbFile());
      store.setTaskExtra('r1', 'done', { blob: 'y'.repeat(1_000_000) }); // batched: runs with the next commit
      expect(() => store.setRunStatus('r1', 'failed')).toThrow(/set task extra failed: SQLITE_FULL/);
      expect(store.loadTasks('r1')[0].extra).toBeNull();
      expect(() => store.recordSpend('r1', 'done', 'm', 1)).toThrow(/SQLITE_FULL/);
    });

    it('tells onError when a commit on the next macrotask fails, and rolls that batch back', async () => {
      const seen: StoreError[] = [];
      const store = fullStore(dbFile(), (error: StoreError) => seen.push(error));
      store.taskStarted('r1', 'a', 1, 'p/m', 110);
      store.taskCompleted('r1', 'a', 1, 'x'.repeat(1_000_000), usage(1, 1), 0.1, 1, 0, 120);
      await new Promise((resolve) => setImmediate(resolve));
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ code: 'STORE_FAILED', sqliteCode: 'SQLITE_FULL' });
      expect(seen[0].message).toMatch(/: record task completion failed: SQLITE_FULL/);
      expect(store.loadTasks('r1').map((t) => t.taskId)).toEqual(['done']);
      expect(() => store.flush()).toThrow(seen[0]);
      expect(() => store.taskStarted('r1', 'b', 1, 'p/m', 120)).toThrow(seen[0]);
    });

    it('refuses a read-only file with a clear StoreError', () => {
      const file = dbFile();
      const first = open(file);
      first.createRun(RUN);
      first.close();
      fs.chmodSync(file, 0o444);
      let caught: unknown;
      try {
        open(file).taskStarted('r1', 'a', 1, 'p/m', 1);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(StoreError);
      expect(caught).toMatchObject({ code: 'STORE_FAILED', sqliteCode: 'SQLITE_READONLY', path: file });
      expect((caught as Error).message).toBe(`run journal ${file}: cannot open: SQLITE_READONLY (the file is read-only)`);
    });
  });

  describe('SqliteStore: locks across connections and processes', () => {
    it('refuses a second owner on another connection, until the heartbeat goes stale', () => {
      const file = dbFile();
      const clock = manualClock();
      const one = open(file, { now: clock.now });
      const two = open(file, { now: clock.now });
      expect(one.acquireLock('r1', { id: 'one', pid: process.pid, host: HOST })).toEqual({ ok: true });
      expect(two.acquireLock('r1', { id: 'two', pid: process.pid, host: HOST })).toMatchObject({ ok: false, holder: { owner: 'one' } });
      clock.t += 20_000;
      expect(one.heartbeat('r1', 'one')).toBe(true);
      clock.t += 20_000;
      expect(two.acquireLock('r1', { id: 'two', pid: process.pid, host: HOST }).ok).toBe(false);
      clock.t += 10_001;
      expect(two.acquireLock('r1', { id: 'two', pid: process.pid, host: HOST })).toEqual({ ok: true });
      expect(one.heartbeat('r1', 'one')).toBe(false); // one learns it lost the lock
    });

    it('takes the lock inside a pending batch without losing the batch', () => {
      const file = dbFile();
      const store = open(file);
      store.createRun(RUN);
      store.taskStarted('r1', 'a', 1, 'p/m', 110);
      expect(store.acquireLock('r1', { id: 'me', pid: process.pid, host: HOST }).ok).toBe(true);
      expect(countTasks(peek(file))).toBe(1); // the lock's commit took the batch with it
    });

    it('lets exactly one of two processes racing for the lock win', async () => {
      const file = dbFile();
      open(file).close(); // the schema exists; the children only race for the lock
      const code = `
        import { hostname } from 'node:os';
        import { SqliteStore } from './src/store/sqlite.ts';
        const [file, id, driver] = process.argv.slice(1);
        const store = new SqliteStore(file, { driver });
        process.stdout.write('ready\\n');
        process.stdin.once('data', () => {
          const result = store.acquireLock('race', { id, pid: process.pid, host: hostname() });
          process.stdout.write(JSON.stringify(result) + '\\n');
          process.stdin.once('end', () => { store.close(); process.exit(0); });
        });
      `;
      const children = ['p1', 'p2'].map((id) => tsChild(code, [file, id, driver]));
      const readers = children.map(lineReader);
      try {
        expect(await Promise.all(readers.map((read) => read()))).toEqual(['ready', 'ready']);
        for (const child of children) child.stdin!.write('go\n');
        const results = (await Promise.all(readers.map((read) => read()))).map((line) => JSON.parse(line));
        expect(results.filter((r) => r.ok)).toHaveLength(1);
        const loser = results.find((r) => !r.ok);
        const winner = children[results.findIndex((r) => r.ok)];
        expect(loser.holder).toMatchObject({ pid: winner.pid, host: HOST });
        const row = peek(file).prepare('SELECT owner, pid FROM locks WHERE run_id = ?').get('race');
        expect(row).toEqual({ owner: results[0].ok ? 'p1' : 'p2', pid: winner.pid });
      } finally {
        for (const child of children) child.stdin!.end();
        expect(await Promise.all(children.map(exited))).toEqual([0, 0]);
      }
    });
  });
});
