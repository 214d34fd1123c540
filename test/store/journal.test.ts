/**
 * The Journal: a run's public events in, the store writes they mean out, on both stores. Events
 * it does not journal must cost nothing: on SQLite not even a transaction is opened.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../machines/protocol.js';
import { Journal, MemoryStore, SqliteStore, type JournalEvent, type Store } from '../../src/store/index.js';
import { RunJournal } from '../../src/durable.js';
import { StoreError } from '../../src/store/types.js';
import { tempDir, usage } from './helpers.js';
import { DRIVERS } from '../helpers/sqlite.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const makers: Array<[string, () => Store]> = [
  ['MemoryStore', () => new MemoryStore()],
  ...DRIVERS.map((driver): [string, () => Store] => [
    `SqliteStore on ${driver}`,
    () => {
      const dir = tempDir();
      dirs.push(dir);
      return new SqliteStore(path.join(dir, 'runs.db'), { driver });
    },
  ]),
];

const ERR = { code: 'server_error' as const, message: '500', retryable: true };

describe.each(makers)('Journal on %s', (_name, make) => {
  it('maps task events to task and attempt rows', () => {
    const store = make();
    store.createRun({ id: 'r', plan: {}, options: {}, tasksTotal: 4, createdAt: 1 });
    const journal = new Journal(store, 'r');
    const events: JournalEvent[] = [
      { type: 'task:queued', taskId: 'a' },
      { type: 'task:started', taskId: 'a', attempt: 1, model: 'fast', route: 'p/m', at: 10 },
      { type: 'model:response', taskId: 'a', attempt: 1, turn: 1, provider: 'p', model: 'm', keyId: 'p:1', usage: usage(1, 1) },
      { type: 'task:failed', taskId: 'a', attempt: 1, error: ERR, willRetry: true, at: 20 },
      { type: 'task:started', taskId: 'a', attempt: 2, model: 'fast', at: 30 }, // no route: the plan model
      { type: 'task:completed', taskId: 'a', attempt: 2, output: 'A', usage: usage(5, 6), costUsd: 0.02, requests: 2, retries: 1, at: 40 },
      { type: 'task:started', taskId: 'b', attempt: 1, model: 'fast', route: 'p/m', at: 50 },
      { type: 'task:failed', taskId: 'b', attempt: 1, error: ERR, willRetry: false, at: 60 },
      { type: 'task:skipped', taskId: 'c', reason: 'depends on "b", which failed', at: 61 },
      { type: 'task:started', taskId: 'd', attempt: 1, model: 'fast', route: 'p/m', at: 70 },
      { type: 'task:cancelled', taskId: 'd', at: 80 },
      { type: 'run:cancelled', reason: 'user' },
      { type: 'run:completed', status: 'cancelled' },
    ];
    for (const event of events) journal.record(event);
    store.flush();
    const tasks = Object.fromEntries(store.loadTasks('r').map((t) => [t.taskId, t]));
    expect(tasks.a).toMatchObject({ status: 'completed', attempts: 2, output: 'A', usage: usage(5, 6), costUsd: 0.02, requests: 2, retries: 1, error: null });
    expect(tasks.b).toMatchObject({ status: 'failed', attempts: 1, error: ERR });
    expect(tasks.c).toMatchObject({ status: 'skipped', reason: 'depends on "b", which failed', attempts: 0 });
    expect(tasks.d).toMatchObject({ status: 'cancelled', reason: 'cancelled', updatedAt: 80 });
    expect(store.loadAttempts('r').map((a) => [a.taskId, a.attempt, a.route, a.startedAt, a.endedAt, a.status])).toEqual([
      ['a', 1, 'p/m', 10, 20, 'failed'],
      ['a', 2, 'fast', 30, 40, 'completed'],
      ['b', 1, 'p/m', 50, 60, 'failed'],
      ['d', 1, 'p/m', 70, 80, 'cancelled'],
    ]);
    expect(store.getRun('r')).toMatchObject({ status: 'running', tasksDone: 1 }); // run status is the runtime's call
    store.close();
  });

  it('keeps a rejected answer (task:failed with output) and its problems on the task row', () => {
    const store = make();
    store.createRun({ id: 'r', plan: {}, options: {}, tasksTotal: 2, createdAt: 1 });
    const journal = new Journal(store, 'r');
    const invalid = { code: 'invalid_output' as const, message: 'not JSON', retryable: true, problems: ['the answer is not valid JSON'] };
    journal.record({ type: 'task:started', taskId: 'a', attempt: 1, model: 'fast', at: 10 });
    journal.record({ type: 'task:failed', taskId: 'a', attempt: 1, error: invalid, willRetry: true, output: 'Here it is', at: 20 });
    // An error without problems: its message stands for them, as in the run table's feedback.
    journal.record({ type: 'task:started', taskId: 'b', attempt: 1, model: 'fast', at: 30 });
    journal.record({ type: 'task:failed', taskId: 'b', attempt: 1, error: { code: 'rejected_output', message: 'score 2 < 7', retryable: true }, willRetry: false, output: 'meh', at: 40 });
    store.flush();
    const [a, b] = store.loadTasks('r');
    expect(a).toMatchObject({ status: 'queued', output: 'Here it is', error: invalid, rejected: { code: 'invalid_output', problems: ['the answer is not valid JSON'] } });
    expect(b).toMatchObject({ status: 'failed', output: 'meh', rejected: { code: 'rejected_output', problems: ['score 2 < 7'] } });
    store.close();
  });

  it('fills what the event leaves out: no cost is null, no requests or retries are 0, no time is now', () => {
    const store = make();
    const journal = new Journal(store, 'r');
    const before = Date.now();
    journal.record({ type: 'task:completed', taskId: 'a', attempt: 1, output: '', usage: usage(0, 0) });
    expect(store.loadTasks('r')[0]).toMatchObject({ costUsd: null, requests: 0, retries: 0, output: '' });
    expect(store.loadTasks('r')[0].updatedAt).toBeGreaterThanOrEqual(before);
    store.close();
  });

  it('ignores every other event without touching the store', () => {
    const store = make();
    const journal = new Journal(store, 'r');
    const ignored: RunEvent[] = [
      { type: 'run:started', runId: 'r', tasks: 1 },
      { type: 'task:queued', taskId: 'a' },
      { type: 'task:retry', taskId: 'a', attempt: 1, retry: 1, delayMs: 5, error: ERR },
      { type: 'model:request', taskId: 'a', attempt: 1, turn: 1, provider: 'p', model: 'm', keyId: 'p:1' },
      { type: 'tool:called', taskId: 'a', name: 'search', shared: false },
      { type: 'key:backoff', keyId: 'p:1', retryAfterMs: 100 },
      { type: 'breaker:open', route: 'p/m', cooldownMs: 1000, failures: 3 },
      { type: 'run:completed', status: 'completed' },
    ];
    for (const event of ignored) journal.record(event);
    expect(store.loadTasks('r')).toEqual([]);
    if (store instanceof SqliteStore) expect(store.database.inTransaction).toBe(false);
    store.close();
  });
});

describe('RunJournal after a failed write', () => {
  it('lets no model call leave: beforeCall throws the failure, whether or not spend is pending', () => {
    const journal = new RunJournal(new MemoryStore(), 'r1');
    expect(() => journal.beforeCall()).not.toThrow();
    const told: string[] = [];
    journal.onFailure = (e) => told.push(e.message);
    journal.fail(new StoreError('disk full', '/x/runs.db', 'SQLITE_FULL'));
    journal.fail(new StoreError('again', '/x/runs.db', 'SQLITE_FULL'));
    expect(told).toEqual(['disk full']);
    expect(() => journal.beforeCall()).toThrow(/journal cannot be written: disk full/);
  });
});
