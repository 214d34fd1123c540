/**
 * The Store contract, run against both stores (describe.each): every method's round trip, the
 * counters a resume relies on (tasksDone, tasksTotal, spend), tool results, locks. A last test
 * drives both with the same script and checks that they give the very same answers.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore, SqliteStore, StoreError, type Store, type StoreOptions } from '../../src/store/index.js';
import { HOST } from '../../src/store/shared.js';
import { deadPid, manualClock, tempDir, usage } from './helpers.js';
import { DRIVERS } from '../helpers/sqlite.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

type Make = (options: StoreOptions) => Store;
const makers: Array<[string, Make]> = [
  ['MemoryStore', (options) => new MemoryStore(options)],
  ...DRIVERS.map((driver): [string, Make] => [
    `SqliteStore on ${driver}`,
    (options) => {
      const dir = tempDir();
      dirs.push(dir);
      return new SqliteStore(path.join(dir, 'runs.db'), { ...options, driver });
    },
  ]),
];

const PLAN = { tasks: [{ id: 'a', prompt: 'hi' }, { id: 'b', deps: ['a'] }], models: { m: { provider: 'p' } } };

describe.each(makers)('%s', (_name, make) => {
  function setup() {
    const clock = manualClock();
    const store = make({ now: clock.now });
    store.createRun({ id: 'r1', plan: PLAN, source: 'plan.json', options: { seed: 7, onFailure: 'continue' }, tasksTotal: 2, createdAt: 100 });
    return { store, clock };
  }

  it('creates, reads and lists runs (newest first, summaries without bodies)', () => {
    const { store } = setup();
    store.createRun({ id: 'r2', plan: { tasks: [] }, options: null, tasksTotal: 0, createdAt: 300 });
    store.createRun({ id: 'r3', plan: undefined, options: { x: 1 }, tasksTotal: 1, createdAt: 200 });
    expect(store.getRun('r1')).toEqual({
      id: 'r1',
      status: 'running',
      createdAt: 100,
      updatedAt: 100,
      source: 'plan.json',
      options: { seed: 7, onFailure: 'continue' },
      tasksTotal: 2,
      tasksDone: 0,
      costUsd: 0,
      plan: PLAN,
      result: null,
    });
    expect(store.getRun('r3')?.plan).toBeNull();
    expect(store.getRun('nope')).toBeUndefined();
    const list = store.listRuns();
    expect(list.map((r) => r.id)).toEqual(['r2', 'r3', 'r1']);
    expect(list[0]).not.toHaveProperty('plan');
    expect(list[0]).not.toHaveProperty('result');
    expect(list[2]).toMatchObject({ source: 'plan.json', tasksTotal: 2, status: 'running' });
    expect(store.listRuns(1).map((r) => r.id)).toEqual(['r2']);
    store.close();
  });

  it('refuses a run id that exists, and keeps working', () => {
    const { store } = setup();
    expect(() => store.createRun({ id: 'r1', plan: {}, options: {}, tasksTotal: 0, createdAt: 1 })).toThrow(StoreError);
    try {
      store.createRun({ id: 'r1', plan: {}, options: {}, tasksTotal: 0, createdAt: 1 });
    } catch (error) {
      expect(error).toMatchObject({ code: 'STORE_FAILED', sqliteCode: 'exists' });
      expect((error as Error).message).toContain('"r1" already exists');
    }
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    expect(store.loadTasks('r1')).toHaveLength(1);
    expect(store.getRun('r1')?.plan).toEqual(PLAN);
    store.close();
  });

  it('sets the run status, with and without a result', () => {
    const { store, clock } = setup();
    clock.t = 5000;
    store.setRunStatus('r1', 'partial', { status: 'partial', tasks: { a: 'completed' } });
    expect(store.getRun('r1')).toMatchObject({ status: 'partial', updatedAt: 5000, result: { status: 'partial', tasks: { a: 'completed' } } });
    clock.t = 6000;
    store.setRunStatus('r1', 'interrupted');
    expect(store.getRun('r1')).toMatchObject({ status: 'interrupted', updatedAt: 6000, result: { status: 'partial' } });
    store.setRunStatus('unknown', 'failed'); // nothing to update, no error
    expect(store.getRun('unknown')).toBeUndefined();
    store.close();
  });

  it('reopens a run for a retry in one write: running, its options replaced, the tasks queued', () => {
    const { store } = setup();
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    store.taskCompleted('r1', 'a', 1, 'out', usage(1, 1), 0.1, 1, 0, 111);
    store.taskStarted('r1', 'b', 1, 'p/m', 112);
    store.taskFailed('r1', 'b', 1, { code: 'bad_request', message: 'no', retryable: false }, true, 113);
    store.setTaskExtra('r1', 'b', { rounds: 1 });
    store.taskFinal('r1', 'c', 'skipped', 'depends on "b", which failed', 114);
    store.setRunStatus('r1', 'partial', { status: 'partial' });
    const options = { seed: 7, retries: [{ at: 7000, tasks: ['b', 'c', 'd'], from: { b: 1, c: 0, d: 0 } }] };
    store.reopenRun('r1', options, ['b', 'c', 'd'], 7000);
    expect(store.getRun('r1')).toMatchObject({ status: 'running', updatedAt: 7000, result: { status: 'partial' }, options, tasksDone: 1 });
    expect(store.listRuns()[0]!.options).toEqual(options);
    const rows = store.loadTasks('r1');
    // `d` has no row (it never started): none is made.
    expect(rows.map((t) => [t.taskId, t.status, t.extra, t.attempts])).toEqual([
      ['a', 'completed', null, 1],
      ['b', 'queued', null, 1],
      ['c', 'queued', null, 0],
    ]);
    // A completed task reopened no longer counts as done.
    store.reopenRun('r1', options, ['a'], 8000);
    expect(store.getRun('r1')!.tasksDone).toBe(0);
    store.reopenRun('unknown', {}, ['a'], 9000); // nothing to update, no error
    expect(store.getRun('unknown')).toBeUndefined();
    store.close();
  });

  it('journals a task through its attempts: started, failed (retry), started, completed', () => {
    const { store } = setup();
    const error = { code: 'rate_limited', message: '429', retryable: true };
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    expect(store.loadTasks('r1')).toEqual([
      expect.objectContaining({ taskId: 'a', status: 'running', attempts: 1, output: null, usage: null, updatedAt: 110 }),
    ]);
    store.taskFailed('r1', 'a', 1, error, false, 120);
    expect(store.loadTasks('r1')[0]).toMatchObject({ status: 'queued', error, attempts: 1 });
    store.taskStarted('r1', 'a', 2, 'p/m2', 130);
    store.taskCompleted('r1', 'a', 2, 'the answer', usage(10, 20), 0.0125, 3, 1, 140);
    expect(store.loadTasks('r1')).toEqual([
      {
        taskId: 'a',
        status: 'completed',
        attempts: 2,
        output: 'the answer',
        error: null,
        reason: null,
        usage: usage(10, 20),
        costUsd: 0.0125,
        requests: 3,
        retries: 1,
        spec: null,
        parent: null,
        extra: null,
        rejected: null,
        updatedAt: 140,
      },
    ]);
    expect(store.loadAttempts('r1')).toEqual([
      { taskId: 'a', attempt: 1, route: 'p/m', startedAt: 110, endedAt: 120, status: 'failed', requests: 0, usage: null, costUsd: null },
      { taskId: 'a', attempt: 2, route: 'p/m2', startedAt: 130, endedAt: 140, status: 'completed', requests: 3, usage: usage(10, 20), costUsd: 0.0125 },
    ]);
    expect(store.getRun('r1')).toMatchObject({ tasksDone: 1, updatedAt: 140 });
    // Completing again (a replayed event) does not count the task twice.
    store.taskCompleted('r1', 'a', 2, 'the answer', usage(10, 20), null, 3, 1, 150);
    expect(store.getRun('r1')?.tasksDone).toBe(1);
    expect(store.loadTasks('r1')[0].costUsd).toBeNull();
    store.close();
  });

  it('keeps a rejected answer and its problems until the task completes or is reopened; a failure without one leaves them', () => {
    const { store } = setup();
    const invalid = { code: 'invalid_output', message: 'bad', retryable: true, problems: ['/title: must be string'] };
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    store.taskFailed('r1', 'a', 1, invalid, false, 120, { output: 'not json', code: 'invalid_output', problems: ['/title: must be string'] });
    expect(store.loadTasks('r1')[0]).toMatchObject({ status: 'queued', output: 'not json', error: invalid, rejected: { code: 'invalid_output', problems: ['/title: must be string'] } });
    // The run table keeps the feedback through a failure that rejected nothing: so does the row.
    store.taskStarted('r1', 'a', 2, 'p/m', 130);
    store.taskFailed('r1', 'a', 2, { code: 'task_timeout', message: 't', retryable: true }, false, 140);
    expect(store.loadTasks('r1')[0]).toMatchObject({ output: 'not json', error: { code: 'task_timeout' }, rejected: { code: 'invalid_output' } });
    store.taskStarted('r1', 'a', 3, 'p/m', 150);
    store.taskFailed('r1', 'a', 3, { ...invalid, code: 'rejected_output' }, true, 160, { output: 'too short', code: 'rejected_output', problems: ['shorter than 40'] });
    expect(store.loadTasks('r1')[0]).toMatchObject({ status: 'failed', output: 'too short', rejected: { code: 'rejected_output', problems: ['shorter than 40'] } });
    // A retry reopens it clean.
    store.reopenRun('r1', { seed: 7 }, ['a'], 170);
    expect(store.loadTasks('r1')[0]).toMatchObject({ status: 'queued', rejected: null });
    store.taskStarted('r1', 'a', 4, 'p/m', 180);
    store.taskFailed('r1', 'a', 4, invalid, false, 190, { output: 'again', code: 'invalid_output', problems: ['x'] });
    store.taskStarted('r1', 'a', 5, 'p/m', 200);
    store.taskCompleted('r1', 'a', 5, '{"title":"t"}', usage(1, 1), null, 2, 1, 210);
    expect(store.loadTasks('r1')[0]).toMatchObject({ status: 'completed', output: '{"title":"t"}', rejected: null });
    store.taskStarted('r1', 'b', 1, 'p/m', 220);
    store.taskFailed('r1', 'b', 1, invalid, false, 230, { output: 'nope', code: 'invalid_output', problems: ['x'] });
    store.taskReopened('r1', 'b', { rounds: 1 }, 240);
    expect(store.loadTasks('r1')[1]).toMatchObject({ taskId: 'b', status: 'queued', rejected: null });
    store.close();
  });

  it('journals final failures, skips and cancellations', () => {
    const { store } = setup();
    store.taskStarted('r1', 'a', 1, 'p/m', 110);
    store.taskFailed('r1', 'a', 1, { code: 'bad_request', message: 'no', retryable: false }, true, 120);
    store.taskFinal('r1', 'b', 'skipped', 'depends on "a", which failed', 121);
    store.taskStarted('r1', 'c', 1, 'p/m', 122);
    store.taskFinal('r1', 'c', 'cancelled', 'cancelled', 130);
    const tasks = store.loadTasks('r1');
    expect(tasks.map((t) => [t.taskId, t.status, t.reason])).toEqual([
      ['a', 'failed', null],
      ['b', 'skipped', 'depends on "a", which failed'],
      ['c', 'cancelled', 'cancelled'],
    ]);
    expect(tasks[0].error).toEqual({ code: 'bad_request', message: 'no', retryable: false });
    expect(tasks[1].attempts).toBe(0);
    expect(store.loadAttempts('r1', 'c')).toEqual([
      { taskId: 'c', attempt: 1, route: 'p/m', startedAt: 122, endedAt: 130, status: 'cancelled', requests: 0, usage: null, costUsd: null },
    ]);
    expect(store.loadAttempts('r1', 'a')[0].status).toBe('failed');
    expect(store.getRun('r1')?.tasksDone).toBe(0);
    store.close();
  });

  it('adds planner sub-tasks once each (a known id takes the new spec), and keeps opaque extra state', () => {
    const { store, clock } = setup();
    clock.t = 2000;
    store.addTasks('r1', [
      { id: 'a.1', spec: { prompt: 'part 1', model: 'm' }, parent: 'a' },
      { id: 'a.2', spec: { prompt: 'part 2', deps: ['a.1'] }, parent: 'a' },
    ]);
    store.addTasks('r1', [{ id: 'a.1', spec: { prompt: 'again' }, parent: 'x' }]); // known: not counted again, new spec
    expect(store.getRun('r1')).toMatchObject({ tasksTotal: 4, updatedAt: 2000 });
    expect(store.loadTasks('r1')).toEqual([
      expect.objectContaining({ taskId: 'a.1', status: 'pending', spec: { prompt: 'again' }, parent: 'x', updatedAt: 2000 }),
      expect.objectContaining({ taskId: 'a.2', status: 'pending', spec: { prompt: 'part 2', deps: ['a.1'] }, parent: 'a' }),
    ]);
    store.setTaskExtra('r1', 'a.2', { round: 2, feedback: ['shorter'] });
    store.setTaskExtra('r1', 'z', { round: 1 }); // a task not written before
    const tasks = store.loadTasks('r1');
    expect(tasks[1]).toMatchObject({ taskId: 'a.2', extra: { round: 2, feedback: ['shorter'] }, status: 'pending' });
    expect(tasks[2]).toMatchObject({ taskId: 'z', extra: { round: 1 }, status: 'pending' });
    store.setTaskExtra('r1', 'a.2', undefined);
    expect(store.loadTasks('r1')[1].extra).toBeNull();
    store.close();
  });

  it('counts a map or reduce with rows under it as a container, not a task: tasksTotal and tasksDone as the result counts them', () => {
    const { store, clock } = setup();
    const plan = { tasks: [{ id: 'mp', kind: 'map' }, { id: 'rd', kind: 'reduce', over: 'mp' }, { id: 'pl', kind: 'plan' }, { id: 'x' }] };
    store.createRun({ id: 'c', plan, options: null, tasksTotal: 4, createdAt: 500 });
    const total = () => store.getRun('c')!;
    const listed = () => store.listRuns().find((r) => r.id === 'c')!;
    // Not expanded yet: four tasks.
    expect([total().tasksTotal, listed().tasksTotal]).toEqual([4, 4]);
    store.addTasks('c', [
      { id: 'mp/0', spec: { prompt: 'a' }, parent: 'mp' },
      { id: 'mp/1', spec: { prompt: 'b' }, parent: 'mp' },
      { id: 'pl.1', spec: { prompt: 'c' }, parent: 'pl' },
      // A reduce's group that split again: a container whose kind is in its own spec.
      { id: 'rd/0', spec: { kind: 'reduce', prompt: 'd' }, parent: 'rd' },
      { id: 'rd/0/0', spec: { prompt: 'e' }, parent: 'rd/0' },
    ]);
    for (const id of ['mp', 'rd', 'rd/0', 'mp/0', 'pl']) {
      store.taskStarted('c', id, 1, 'p/m', (clock.t += 1));
      store.taskCompleted('c', id, 1, 'out', usage(1, 1), 0, 1, 0, (clock.t += 1));
    }
    store.flush();
    // 9 rows: mp, rd and rd/0 are containers (the planner `pl` is a task with sub-tasks); 3 of the 6 tasks done.
    expect({ total: total().tasksTotal, done: total().tasksDone }).toEqual({ total: 6, done: 2 });
    expect({ total: listed().tasksTotal, done: listed().tasksDone }).toEqual({ total: 6, done: 2 });
    store.close();
  });

  it('sums spend per run, per task and per model', () => {
    const { store } = setup();
    store.recordSpend('r1', 'a', 'm', 0.25);
    store.recordSpend('r1', 'a', 'm', 0.5);
    store.recordSpend('r1', 'a', 'big', 1);
    store.recordSpend('r1', 'b', 'm', 0.125);
    store.recordSpend('other', 'a', 'm', 9);
    expect(store.spent('r1')).toEqual({ total: 1.875, byTask: { a: 1.75, b: 0.125 }, byModel: { m: 0.875, big: 1 } });
    expect(store.getRun('r1')?.costUsd).toBe(1.875);
    expect(store.spent('none')).toEqual({ total: 0, byTask: {}, byModel: {} });
    store.close();
  });

  it('sums spend of tasks and models named like Object.prototype members as ordinary names', () => {
    const { store } = setup();
    store.recordSpend('r1', 'constructor', '__proto__', 0.25);
    store.recordSpend('r1', 'constructor', '__proto__', 0.5);
    store.recordSpend('r1', '__proto__', 'toString', 1);
    const spent = store.spent('r1');
    expect(spent.byTask['constructor']).toBe(0.75);
    expect(spent.byTask['__proto__']).toBe(1);
    expect(spent.byModel['__proto__']).toBe(0.75);
    expect(spent.byModel['toString']).toBe(1);
    store.close();
  });

  it('keeps tool results by key, the latest winning', () => {
    const { store } = setup();
    expect(store.toolResult('r1', 'k1')).toBeUndefined();
    store.recordToolResult('r1', 'k1', 'first', true);
    store.recordToolResult('r1', 'k1', 'second', false);
    store.recordToolResult('r1', 'k2', '', true);
    expect(store.toolResult('r1', 'k1')).toEqual({ content: 'second', isError: false });
    expect(store.toolResult('r1', 'k2')).toEqual({ content: '', isError: true });
    expect(store.toolResult('r2', 'k1')).toBeUndefined();
    store.close();
  });

  it('locks a run: the holder re-acquires, another owner is refused, release frees it', () => {
    const { store, clock } = setup();
    const a = { id: 'owner-a', pid: process.pid, host: HOST };
    const b = { id: 'owner-b', pid: process.pid, host: HOST };
    expect(store.acquireLock('r1', a)).toEqual({ ok: true });
    clock.t += 1000;
    expect(store.acquireLock('r1', a)).toEqual({ ok: true });
    expect(store.acquireLock('r1', b)).toEqual({
      ok: false,
      holder: { owner: 'owner-a', pid: process.pid, host: HOST, since: 1_000_000, heartbeatAt: 1_001_000 },
    });
    expect(store.heartbeat('r1', 'owner-b')).toBe(false);
    clock.t += 1000;
    expect(store.heartbeat('r1', 'owner-a')).toBe(true);
    store.releaseLock('r1', 'owner-b'); // not the holder: nothing
    expect(store.acquireLock('r1', b).ok).toBe(false);
    store.releaseLock('r1', 'owner-a');
    expect(store.heartbeat('r1', 'owner-a')).toBe(false);
    expect(store.acquireLock('r1', b)).toEqual({ ok: true });
    expect(store.acquireLock('r2', a)).toEqual({ ok: true }); // locks are per run
    store.close();
  });

  it('takes over a lock whose heartbeat is stale', () => {
    const { store, clock } = setup();
    const elsewhere = { id: 'far', pid: 1, host: 'another-host' };
    const me = { id: 'me', pid: process.pid, host: HOST };
    expect(store.acquireLock('r1', elsewhere).ok).toBe(true);
    clock.t += 30_000;
    expect(store.acquireLock('r1', me).ok).toBe(false); // exactly staleMs old: still held
    clock.t += 1;
    expect(store.acquireLock('r1', me)).toEqual({ ok: true });
    expect(store.heartbeat('r1', 'far')).toBe(false);
    clock.t += 100;
    expect(store.acquireLock('r1', elsewhere, 50).ok).toBe(true); // a shorter staleMs
    store.close();
  });

  it('takes over a lock whose holder process on this host is dead, not one on another host', async () => {
    const { store } = setup();
    const pid = await deadPid();
    expect(store.acquireLock('r1', { id: 'dead', pid, host: HOST }).ok).toBe(true);
    expect(store.acquireLock('r1', { id: 'me', pid: process.pid, host: HOST })).toEqual({ ok: true });
    expect(store.acquireLock('r2', { id: 'remote', pid, host: 'another-host' }).ok).toBe(true);
    expect(store.acquireLock('r2', { id: 'me', pid: process.pid, host: HOST }).ok).toBe(false);
    store.close();
  });

  it('refuses every call after close; close is idempotent', () => {
    const { store } = setup();
    store.close();
    store.close();
    for (const call of [() => store.getRun('r1'), () => store.taskStarted('r1', 'a', 1, 'p/m', 1), () => store.flush(), () => store.listRuns()]) {
      expect(call).toThrow(StoreError);
      expect(call).toThrow(/the store is closed/);
    }
  });
});

describe('MemoryStore and SqliteStore (on every driver)', () => {
  it('give the same answers to the same script', async () => {
    const pid = await deadPid();
    const answers = makers.map(([, make]) => {
      const clock = manualClock();
      const store = make({ now: clock.now });
      const seen: unknown[] = [];
      store.createRun({ id: 'r', plan: PLAN, options: { seed: 1 }, tasksTotal: 3, createdAt: 10 });
      store.createRun({ id: 's', plan: [], source: 'x.yaml', options: undefined, tasksTotal: 0, createdAt: 10 });
      store.taskStarted('r', 'a', 1, 'p/m', 11);
      store.taskFailed('r', 'a', 1, { code: 'timeout', message: 't', retryable: true }, false, 12);
      store.taskFinal('r', 'b', 'skipped', 'why', 13);
      store.taskStarted('r', 'a', 2, 'p/m', 14);
      store.recordSpend('r', 'a', 'm', 0.1);
      store.recordSpend('r', 'a', 'm', 0.2);
      store.addTasks('r', [{ id: 'a.1', spec: { p: 1 }, parent: 'a' }]);
      store.taskCompleted('r', 'a', 2, 'out', usage(1, 2), 0.3, 2, 1, 15);
      store.setTaskExtra('r', 'a.1', { n: 1 });
      store.taskStarted('r', 'a.1', 1, 'q/n', 16);
      store.taskFinal('r', 'a.1', 'cancelled', 'stop', 17);
      store.recordToolResult('r', 'k', 'c', false);
      clock.t += 5;
      store.setRunStatus('r', 'cancelled', { done: 1 });
      seen.push(store.acquireLock('r', { id: 'x', pid, host: HOST }), store.acquireLock('r', { id: 'y', pid: 2, host: 'h' }));
      seen.push(store.acquireLock('r', { id: 'z', pid: process.pid, host: HOST }), store.heartbeat('r', 'y'));
      store.flush();
      seen.push(store.getRun('r'), store.listRuns(), store.loadTasks('r'), store.loadAttempts('r'), store.spent('r'));
      seen.push(store.toolResult('r', 'k'), store.loadTasks('s'), store.loadAttempts('r', 'a.1'));
      store.close();
      return seen;
    });
    expect(answers.length).toBe(1 + DRIVERS.length);
    for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0]);
  });
});
