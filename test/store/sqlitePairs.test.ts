/**
 * A task's start and completion in one batch, written as one pair of rows (src/store/sqliteStarts.ts):
 * each row is written once, and the file ends up as the writes one by one (each committed on its
 * own) leave it, whatever else the task wrote in between.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/index.js';
import type { SqliteWrites } from '../../src/store/sqliteWrites.js';
import { manualClock, tempDir, usage } from './helpers.js';
import { DRIVERS } from '../helpers/sqlite.js';

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterEach(() => {
  for (const store of stores.splice(0)) store.close();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe.each(DRIVERS)('on %s', (driver) => {
  function open() {
    const dir = tempDir();
    dirs.push(dir);
    const clock = manualClock(500);
    const store = new SqliteStore(path.join(dir, 'runs.db'), { driver, now: clock.now });
    stores.push(store);
    store.createRun({ id: 'r1', plan: { tasks: [] }, options: {}, tasksTotal: 9, createdAt: 100 });
    return { store, clock };
  }

  /** Counts every row written to tasks and attempts, through triggers on the store's own connection. */
  function countRowWrites(store: SqliteStore): () => Record<string, number> {
    const db = store.database;
    db.exec('CREATE TEMP TABLE row_writes (tbl TEXT NOT NULL)');
    for (const table of ['tasks', 'attempts']) {
      for (const op of ['INSERT', 'UPDATE']) {
        db.exec(`CREATE TEMP TRIGGER count_${table}_${op} AFTER ${op} ON main.${table} BEGIN INSERT INTO row_writes VALUES ('${table}'); END`);
      }
    }
    return () => Object.fromEntries((db.prepare('SELECT tbl, count(*) AS n FROM row_writes GROUP BY tbl').all() as Array<{ tbl: string; n: number }>).map((r) => [r.tbl, r.n]));
  }

  it('writes the task row and the attempt row once for a task that starts and completes in one batch', () => {
    const { store } = open();
    const writes = countRowWrites(store);
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    store.taskCompleted('r1', 'a', 1, 'out', usage(1, 2), 0.5, 1, 0, 120);
    store.flush();
    // Written one by one: the start inserts both rows, the completion updates both.
    expect(writes()).toEqual({ tasks: 1, attempts: 1 });
    expect(store.loadTasks('r1')).toMatchObject([{ taskId: 'a', status: 'completed', attempts: 1, output: 'out', costUsd: 0.5, requests: 1, updatedAt: 120 }]);
    expect(store.loadAttempts('r1')).toEqual([
      { taskId: 'a', attempt: 1, route: 'p/m', startedAt: 110, endedAt: 120, status: 'completed', requests: 1, usage: usage(1, 2), costUsd: 0.5 },
    ]);
    expect(store.getRun('r1')).toMatchObject({ tasksDone: 1, updatedAt: 120 });
  });

  /** The same writes, in one batch (`batched`) or each committed before the next. */
  function script(store: SqliteStore, clock: { t: number }, step: () => void) {
    const w = (write: () => void) => {
      clock.t += 1;
      write();
      step();
    };
    w(() => store.addTasks('r1', [{ id: 'sub', spec: { id: 'sub', prompt: 'x' }, parent: 'plan' }]));
    w(() => store.taskStarted('r1', 'plain', 1, 'p/m', 110));
    w(() => store.taskStarted('r1', 'extra', 1, 'p/m', 111));
    w(() => store.taskStarted('r1', 'spent', 1, 'p/m', 112));
    w(() => store.taskStarted('r1', 'sub', 1, 'p/m', 113));
    w(() => store.setTaskExtra('r1', 'extra', { rounds: 1 }));
    w(() => store.recordSpend('r1', 'spent', 'm', 0.25));
    w(() => store.taskCompleted('r1', 'sub', 1, 'sub out', usage(3, 4), null, 2, 0, 121));
    w(() => store.taskCompleted('r1', 'spent', 1, 'spent out', usage(1, 1), 0.25, 1, 0, 122));
    w(() => store.taskCompleted('r1', 'extra', 1, 'extra out', usage(1, 1), null, 1, 0, 123));
    w(() => store.taskCompleted('r1', 'plain', 1, 'plain out', usage(1, 1), null, 1, 0, 124));
    // A retried task: its first attempt failed, its second completes.
    w(() => store.taskStarted('r1', 'retried', 1, 'p/m', 130));
    w(() => store.taskFailed('r1', 'retried', 1, { code: 'overloaded' }, false, 131));
    w(() => store.taskStarted('r1', 'retried', 2, 'p/b', 132));
    w(() => store.taskCompleted('r1', 'retried', 2, 'second', usage(2, 2), null, 1, 1, 133));
    // A completion for another attempt than the pending start, and one without a start.
    w(() => store.taskStarted('r1', 'odd', 1, 'p/m', 140));
    w(() => store.taskCompleted('r1', 'odd', 2, 'odd out', usage(1, 1), null, 1, 0, 141));
    w(() => store.taskCompleted('r1', 'unstarted', 1, 'u', usage(1, 1), null, 1, 0, 142));
    // Completed again in the same batch (a replay): counted once.
    w(() => store.taskStarted('r1', 'twice', 1, 'p/m', 150));
    w(() => store.taskCompleted('r1', 'twice', 1, 'once', usage(1, 1), null, 1, 0, 151));
    w(() => store.taskCompleted('r1', 'twice', 1, 'twice', usage(1, 1), null, 1, 0, 152));
    // Started, then cancelled.
    w(() => store.taskStarted('r1', 'gone', 1, 'p/m', 160));
    w(() => store.taskFinal('r1', 'gone', 'cancelled', 'cancelled', 161));
    // Its attempt ended by hand before the completion (the completion's attempt row then keeps that status's end).
    w(() => store.taskStarted('r1', 'ended', 1, 'p/m', 170));
    w(() => store.attemptEnded('r1', 'ended', 1, 'cancelled', 171));
    w(() => store.taskCompleted('r1', 'ended', 1, 'ended out', usage(1, 1), null, 1, 0, 172));
    store.flush();
    return { run: store.getRun('r1'), tasks: store.loadTasks('r1'), attempts: store.loadAttempts('r1'), spent: store.spent('r1') };
  }

  it('leaves the file as the writes one by one do, whatever the task wrote between its start and completion', () => {
    const batched = open();
    const oneByOne = open();
    const together = script(batched.store, batched.clock, () => {});
    const apart = script(oneByOne.store, oneByOne.clock, () => oneByOne.store.flush());
    expect(together).toEqual(apart);
    expect(together.run).toMatchObject({ tasksDone: 9, costUsd: 0.25 });
  });

  it('does not pair a start with its completion across any other batched write for the task, whichever method made it', () => {
    const { store } = open();
    // A write as a store method would add it, without that method doing anything about pairs:
    // the batch alone knows the task it touches.
    const writes = (store as unknown as { writes: SqliteWrites }).writes;
    const statusOf = store.database.prepare("SELECT status FROM tasks WHERE run_id = 'r1' AND task_id = ?").pluck();
    const seen: unknown[] = [];
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    store.taskStarted('r1', 'b', 1, 'p/m', 111);
    writes.batched('probe', 'r1', 'a', () => seen.push(statusOf.get('a')));
    writes.batched('probe', 'r1', null, () => seen.push(statusOf.get('b')));
    store.taskCompleted('r1', 'a', 1, 'out', usage(1, 1), null, 1, 0, 120);
    store.taskCompleted('r1', 'b', 1, 'out', usage(1, 1), null, 1, 0, 121);
    store.flush();
    // Each probe ran after its task's start and before its completion, as written.
    expect(seen).toEqual(['running', 'running']);
    expect(store.getRun('r1')).toMatchObject({ tasksDone: 2, updatedAt: 121 });
  });
});
