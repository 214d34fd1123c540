/**
 * Several runs sharing one journal file (the default .swarmstate/runs.db): real child processes
 * writing at once, each as a run does (batched writes between bursts of work, durable writes,
 * its lock's heartbeat), all finish with every row; a write that waits past its limit fails
 * with SQLITE_BUSY and is never called a disk problem.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore, StoreError } from '../../src/store/index.js';
import { exited, lineReader, tempDir, tsChild } from './helpers.js';
import { DRIVERS, rawDb } from '../helpers/sqlite.js';

const dirs: string[] = [];
const handles: Array<{ close(): void }> = [];
afterEach(() => {
  for (const handle of handles.splice(0)) handle.close();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function dbFile(): string {
  const dir = tempDir();
  dirs.push(dir);
  return path.join(dir, 'runs.db');
}

/**
 * One run's writes: per macrotask a burst of task writes and some CPU work (what the actor system
 * does between two writes), a durable write now and then, the run's status at the end.
 */
const RUN_SCRIPT = `
  import { hostname } from 'node:os';
  import { SqliteStore } from './src/store/sqlite.ts';
  const [file, runId, count, driver] = process.argv.slice(1);
  const tasks = Number(count);
  const store = new SqliteStore(file, { driver, onError: (e) => { process.stderr.write(e.message + '\\n'); process.exit(4); } });
  const owner = { id: runId, pid: process.pid, host: hostname() };
  const usage = { inputTokens: 1, outputTokens: 1, cacheWriteTokens: 0, cacheReadTokens: 0 };
  process.stdout.write('ready\\n');
  process.stdin.once('data', async () => {
    try {
      store.createRun({ id: runId, plan: { tasks: [] }, options: {}, tasksTotal: tasks, createdAt: Date.now() });
      if (!store.acquireLock(runId, owner).ok) throw new Error('lock refused');
      for (let i = 0; i < tasks; i++) {
        store.taskStarted(runId, 't' + i, 1, 'p/m', Date.now());
        store.taskCompleted(runId, 't' + i, 1, 'out ' + i, usage, 0.001, 1, 0, Date.now());
        store.recordSpend(runId, 't' + i, 'm', 0.001);
        const until = Date.now() + 4;
        while (Date.now() < until) {} // the run's own work, between writes
        if (i % 25 === 0) store.heartbeat(runId, owner.id);
        if (i % 40 === 0) store.recordToolResult(runId, 'k' + i, 'sent ' + i, false);
        await new Promise((resolve) => setImmediate(resolve));
      }
      store.setRunStatus(runId, 'completed', { ok: true });
      store.releaseLock(runId, owner.id);
      store.close();
      process.stdout.write('done\\n');
      process.exit(0);
    } catch (error) {
      process.stderr.write(String(error && error.message) + '\\n');
      process.exit(4);
    }
  });
`;

describe.each(DRIVERS)('on %s', (driver) => {
  describe('one journal shared by several runs', () => {
    it('three processes writing at once all finish, with every row of every run', async () => {
      const file = dbFile();
      const runs = ['runA', 'runB', 'runC'];
      const tasks = 200;
      // A new file: the three also race to create the schema.
      const children = runs.map((id) => tsChild(RUN_SCRIPT, [file, id, String(tasks), driver]));
      const readers = children.map(lineReader);
      const stderr = children.map((child) => {
        let text = '';
        child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString()));
        return () => text;
      });
      expect(await Promise.all(readers.map((read) => read()))).toEqual(['ready', 'ready', 'ready']);
      for (const child of children) child.stdin!.write('go\n');
      const codes = await Promise.all(children.map(exited));
      expect(codes.map((code, i) => `${code} ${stderr[i]()}`)).toEqual(['0 ', '0 ', '0 ']);

      const db = rawDb(file, { readOnly: true, driver });
      handles.push(db);
      for (const id of runs) {
        expect(db.prepare('SELECT status, tasks_done FROM runs WHERE id = ?').get(id)).toEqual({ status: 'completed', tasks_done: tasks });
        expect(db.prepare("SELECT count(*) FROM tasks WHERE run_id = ? AND status = 'completed'").pluck().get(id)).toBe(tasks);
        expect(db.prepare('SELECT count(*) FROM attempts WHERE run_id = ?').pluck().get(id)).toBe(tasks);
        expect(db.prepare('SELECT count(*) FROM spend WHERE run_id = ?').pluck().get(id)).toBe(tasks);
        expect(db.prepare('SELECT count(*) FROM tool_results WHERE run_id = ?').pluck().get(id)).toBe(5);
      }
      expect(db.prepare('SELECT count(*) FROM locks').pluck().get()).toBe(0);
      expect(db.pragma('integrity_check')).toBe('ok');
    }, 120_000);

    it('a batch that finds the lock held commits once it is free; the process goes on meanwhile', async () => {
      const file = dbFile();
      const errors: StoreError[] = [];
      const store = new SqliteStore(file, { driver, onError: (e) => errors.push(e) });
      handles.push(store);
      store.createRun({ id: 'r1', plan: {}, options: {}, tasksTotal: 1, createdAt: 1 });
      const other = rawDb(file, { driver });
      handles.push(other);
      other.exec('BEGIN IMMEDIATE'); // another run, in the middle of a write
      store.taskStarted('r1', 'a', 1, 'p/m', 2);
      // The commit on the next macrotask finds the lock held: it tries again later, and this
      // process goes on meanwhile (these turns of the event loop run).
      let turns = 0;
      while (turns < 3) {
        await new Promise((resolve) => setImmediate(resolve));
        turns++;
      }
      expect(errors).toEqual([]);
      other.exec('COMMIT');
      const peek = rawDb(file, { readOnly: true, driver });
      handles.push(peek);
      while (peek.prepare('SELECT count(*) FROM tasks').pluck().get() === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(errors).toEqual([]);
    });

    it('a write that waits past its limit fails with SQLITE_BUSY, as contention, not as a disk problem', () => {
      const file = dbFile();
      const store = new SqliteStore(file, { driver, busyLimitMs: 300 });
      handles.push(store);
      const other = rawDb(file, { driver });
      handles.push(other);
      other.exec('BEGIN IMMEDIATE');
      let caught: unknown;
      try {
        store.createRun({ id: 'r1', plan: {}, options: {}, tasksTotal: 1, createdAt: 1 });
      } catch (error) {
        caught = error;
      }
      other.exec('ROLLBACK');
      expect(caught).toBeInstanceOf(StoreError);
      const error = caught as StoreError;
      expect(error.sqliteCode).toBe('SQLITE_BUSY');
      expect(error.message).toContain("other processes held the journal's write lock");
      expect(error.advice).not.toMatch(/disk/);
      expect(error.advice).toMatch(/--store/);
    });
  });
});
