/**
 * Journal upkeep on both stores (and every SQLite driver): `pruneRuns` removes the runs a rule
 * picks (older than, beyond the n newest) with every row they have in every table, never a run a
 * live process holds nor one interrupted midway (a resume continues it); a dry run removes
 * nothing and says the same; `compact` gives the space back to the file system (VACUUM).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, SqliteStore, StoreError, type PruneRule, type Store, type StoreOptions } from '../../src/store/index.js';
import { checkPruneRule } from '../../src/store/prune.js';
import { HOST } from '../../src/store/shared.js';
import { deadPid, manualClock, tempDir, usage } from './helpers.js';
import { DRIVERS, rawDb } from '../helpers/sqlite.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function dbFile(): string {
  const dir = tempDir();
  dirs.push(dir);
  return path.join(dir, 'runs.db');
}

type Make = (options: StoreOptions) => Store;
const makers: Array<[string, Make]> = [
  ['MemoryStore', (options) => new MemoryStore(options)],
  ...DRIVERS.map((driver): [string, Make] => [`SqliteStore on ${driver}`, (options) => new SqliteStore(dbFile(), { ...options, driver })]),
];

/**
 * Five runs, newest first: new (finished), mid (failed), dead (journaled running, its holder's
 * process gone: interrupted), live (held by this process), old (finished, with a row in every table).
 */
async function journal(make: Make) {
  const clock = manualClock(1_000_000);
  const store = make({ now: clock.now });
  const run = (id: string, createdAt: number) => store.createRun({ id, plan: { tasks: [] }, options: { seed: 1 }, tasksTotal: 1, createdAt });
  run('old', 1_000);
  store.taskStarted('old', 'a', 1, 'p/m', 1_001);
  store.taskCompleted('old', 'a', 1, 'out', usage(1, 2), 0.5, 1, 0, 1_002);
  store.recordToolResult('old', 'k1', 'cached', false);
  store.recordSpend('old', 'a', 'm', 0.5);
  store.setRunStatus('old', 'completed', { ok: true });
  run('live', 1_200);
  store.acquireLock('live', { id: 'me', pid: process.pid, host: HOST });
  run('dead', 1_500);
  store.acquireLock('dead', { id: 'gone', pid: await deadPid(), host: HOST });
  run('mid', 2_000);
  store.setRunStatus('mid', 'failed');
  run('new', 900_000);
  store.setRunStatus('new', 'completed');
  return { store, clock };
}

/** Bytes of the rows, counted by hand: each text column's UTF-8 length, 8 per number column. */
const OLD_BYTES = 62 + 15 + 14 + 131 + 131 + 27 + 13; // runs, run_plans, run_results, tasks, attempts, tool_results, spend
const MID_BYTES = 59 + 15; // runs, run_plans

describe.each(makers)('%s', (_name, make) => {
  it('removes the runs older than the rule, never a live or an interrupted one, and says what it kept', async () => {
    const { store } = await journal(make);
    const result = store.pruneRuns({ olderThanMs: 500_000 });
    expect(result).toEqual({
      removed: [
        { id: 'mid', status: 'failed', createdAt: 2_000, bytes: MID_BYTES },
        { id: 'old', status: 'completed', createdAt: 1_000, bytes: OLD_BYTES },
      ],
      bytes: MID_BYTES + OLD_BYTES,
      live: ['live'],
      interrupted: ['dead'],
    });
    expect(store.listRuns().map((r) => r.id)).toEqual(['new', 'dead', 'live']);
    expect(store.getRun('old')).toBeUndefined();
    expect(store.loadTasks('old')).toEqual([]);
    expect(store.loadAttempts('old')).toEqual([]);
    expect(store.spent('old').total).toBe(0);
    expect(store.toolResult('old', 'k1')).toBeUndefined();
    // Nothing left to remove: the same rule again removes nothing.
    expect(store.pruneRuns({ olderThanMs: 500_000 }).removed).toEqual([]);
    store.close();
  });

  it('keeps the n newest (and the live and interrupted beyond them); both rules: a run must match both', async () => {
    const kept = await journal(make);
    expect(kept.store.pruneRuns({ keep: 1 }).removed.map((r) => r.id)).toEqual(['mid', 'old']);
    kept.store.close();
    const both = await journal(make);
    expect(both.store.pruneRuns({ keep: 1, olderThanMs: 998_500 }).removed.map((r) => r.id)).toEqual(['old']);
    both.store.close();
    const none = await journal(make);
    expect(none.store.pruneRuns({ keep: 0 }).removed.map((r) => r.id)).toEqual(['new', 'mid', 'old']);
    none.store.close();
  });

  it('a dry run says the same and removes nothing', async () => {
    const { store } = await journal(make);
    const dry = store.pruneRuns({ keep: 2 }, { dryRun: true });
    expect(dry.removed.map((r) => [r.id, r.bytes])).toEqual([['old', OLD_BYTES]]);
    expect(store.listRuns().map((r) => r.id)).toEqual(['new', 'mid', 'dead', 'live', 'old']);
    expect(store.pruneRuns({ keep: 2 })).toEqual(dry);
    store.close();
  });

  it('refuses a rule that picks nothing or is not a duration and count', () => {
    const store = make({});
    for (const [rule, message] of [
      [{}, 'a prune rule needs olderThanMs or keep'],
      [{ keep: -1 }, 'keep must be a whole number of runs, 0 or more (got -1)'],
      [{ keep: 1.5 }, 'keep must be a whole number of runs, 0 or more (got 1.5)'],
      [{ olderThanMs: Number.NaN }, 'olderThanMs must be a number of milliseconds, 0 or more (got NaN)'],
      [{ olderThanMs: '7d' }, 'olderThanMs must be a number of milliseconds, 0 or more (got "7d")'],
    ] as Array<[PruneRule, string]>) {
      expect(() => store.pruneRuns(rule)).toThrow(new TypeError(message));
    }
    store.close();
  });
});

describe('MemoryStore and SqliteStore (on every driver)', () => {
  it('prune the same runs and count the same bytes', async () => {
    const answers = [];
    for (const [, make] of makers) {
      const { store } = await journal(make);
      answers.push([store.pruneRuns({ keep: 3 }, { dryRun: true }), store.pruneRuns({ olderThanMs: 1 }), store.listRuns()]);
      store.close();
    }
    for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0]);
  });
});

describe.each(DRIVERS)('SqliteStore on %s', (driver) => {
  it('leaves no row of a removed run in any table of the schema', async () => {
    const file = dbFile();
    const { store } = await journal((options) => new SqliteStore(file, { ...options, driver }));
    store.pruneRuns({ olderThanMs: 500_000 });
    store.close();
    const db = rawDb(file, { driver, readOnly: true });
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").pluck().all() as string[];
    expect(tables).toEqual(['attempts', 'locks', 'run_plans', 'run_results', 'runs', 'spend', 'tasks', 'tool_results']);
    const left: Record<string, number> = {};
    for (const table of tables) {
      const column = table === 'runs' ? 'id' : 'run_id';
      left[table] = db.prepare(`SELECT count(*) FROM ${table} WHERE ${column} IN ('old', 'mid')`).pluck().get() as number;
    }
    expect(left).toEqual({ attempts: 0, locks: 0, run_plans: 0, run_results: 0, runs: 0, spend: 0, tasks: 0, tool_results: 0 });
    expect(db.prepare("SELECT count(*) FROM locks WHERE run_id IN ('live', 'dead')").pluck().get()).toBe(2);
    db.close();
  });

  it('compact (VACUUM) gives the removed rows back: the file shrinks', () => {
    const file = dbFile();
    const store = new SqliteStore(file, { driver });
    const big = 'x'.repeat(1_000_000);
    for (const id of ['a', 'b', 'c']) {
      store.createRun({ id, plan: null, options: null, tasksTotal: 1, createdAt: id.charCodeAt(0) });
      store.taskCompleted(id, 't', 1, big, usage(1, 1), null, 1, 0, 1);
      store.setRunStatus(id, 'completed');
    }
    store.flush();
    const size = () => fs.statSync(file).size + (fs.statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0);
    const before = size();
    expect(before).toBeGreaterThan(3_000_000);
    expect(store.pruneRuns({ keep: 1 }).removed.map((r) => r.id)).toEqual(['b', 'a']);
    store.compact();
    expect(size()).toBeLessThan(before - 1_900_000);
    expect(store.loadTasks('c')[0]!.output).toBe(big);
    store.close();
  });

  it('a read-only store (a listing) prunes only as a dry run', async () => {
    const file = dbFile();
    const { store } = await journal((options) => new SqliteStore(file, { ...options, driver }));
    store.close();
    const reader = new SqliteStore(file, { driver, readOnly: true });
    expect(reader.pruneRuns({ keep: 4 }, { dryRun: true }).removed.map((r) => r.id)).toEqual(['old']);
    expect(() => reader.pruneRuns({ keep: 4 })).toThrow(StoreError);
    expect(() => reader.compact()).toThrow(/opened read-only/);
    reader.close();
  });
});
