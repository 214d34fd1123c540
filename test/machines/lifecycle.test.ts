/**
 * The task lifecycle (machines/tasks/lifecycle.ts): the table the run table checks every status
 * change against, the statechart that draws it, and the run table using each of its moves.
 */
import { getShortestPaths } from '@xstate/graph';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ZERO_USAGE, type AttemptReport, type TaskStatus } from '../../machines/protocol.js';
import { LIFECYCLE, nextStatus, TASK_STATUSES, TaskLifecycleError, TaskStates, type TaskEvent } from '../../machines/tasks/lifecycle.js';
import { taskLifecycleMachine } from '../../machines/tasks/task.machine.js';
import type { RestoredTask } from '../../machines/tasks/restore.js';
import { RunTable } from '../../machines/tasks/runTable.js';
import { newRecord, type SupervisedTask } from '../../machines/tasks/types.js';

const task = (id: string, deps: string[] = [], extra: Partial<SupervisedTask> = {}): SupervisedTask => ({
  id, deps, priority: 0, rank: 1, modelName: 'm', provider: 'p', model: 'x', maxTokens: 10, prompt: id, tools: [], maxTurns: 1, maxRetries: 1, timeoutMs: 1000, ...extra,
});
const report = (taskId: string, attempt: number, extra: Partial<AttemptReport> = {}): AttemptReport => ({
  taskId, attempt, status: 'completed', output: `out:${taskId}`, usage: ZERO_USAGE, requests: 1, retries: 0, turns: 1, messages: [], ...extra,
});
const failure = (retryable: boolean) => ({ status: 'failed' as const, error: { code: 'server_error' as const, message: 'boom', retryable } });
const restored = (id: string, status: RestoredTask['status']): RestoredTask => ({ id, status, attempts: 1, retries: 0, requests: 1, usage: ZERO_USAGE, costUsd: 0 });

/** Every (status, event) pair of the table, as `status --EVENT--> next`. */
const tableMoves = () =>
  TASK_STATUSES.flatMap((from) => Object.entries(LIFECYCLE[from].on).map(([event, to]) => `${from} --${event}--> ${to}`)).sort();
const ALL_EVENTS = [...new Set(TASK_STATUSES.flatMap((s) => Object.keys(LIFECYCLE[s].on)))] as TaskEvent[];

describe('the lifecycle table', () => {
  it('an illegal move throws an internal error naming the task, the status and the event, and changes nothing', () => {
    const states = new TaskStates();
    const record = newRecord(task('t1'));
    states.added(1);
    let thrown: unknown;
    try {
      states.move(record, 'START'); // pending cannot start: it must be queued first
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TaskLifecycleError);
    expect(thrown).toMatchObject({ code: 'internal', retryable: false, taskId: 't1', from: 'pending', event: 'START' });
    expect((thrown as Error).message).toContain('task "t1" cannot take START while pending');
    expect(record.status).toBe('pending');
    expect(states.counts).toEqual({ pending: 1, queued: 0, running: 0, waiting: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0 });
    expect(states.openTasks).toBe(1);
  });

  it('every pair the table lacks throws, including names Object.prototype lends; every pair it has moves', () => {
    for (const from of TASK_STATUSES) {
      for (const event of [...ALL_EVENTS, 'constructor', 'toString'] as TaskEvent[]) {
        const to = (LIFECYCLE[from].on as Record<string, TaskStatus | undefined>)[event];
        if (typeof to === 'string') expect(nextStatus('t', from, event)).toBe(to);
        else expect(() => nextStatus('t', from, event), `${from} --${event}-->`).toThrow(TaskLifecycleError);
      }
    }
  });

  it('a final status counts the task out of the open ones; a reviewed task sent back counts in again', () => {
    const states = new TaskStates();
    const record = newRecord(task('t'));
    states.added(1);
    for (const event of ['READY', 'START', 'COMPLETE'] as const) states.move(record, event);
    expect(states.openTasks).toBe(0);
    expect(states.move(record, 'REVISE')).toBe('completed');
    expect(states.openTasks).toBe(1);
    expect(states.counts).toMatchObject({ pending: 1, completed: 0 });
  });
});

describe('taskLifecycleMachine', () => {
  it('has the table\'s states and transitions, no more and no fewer; its final states are the dead ends', () => {
    const machineMoves: string[] = [];
    const finals: string[] = [];
    for (const [name, node] of Object.entries(taskLifecycleMachine.root.states)) {
      if (node.type === 'final') finals.push(name);
      for (const [event, transitions] of Object.entries(node.on)) {
        for (const t of transitions) machineMoves.push(`${name} --${event}--> ${t.target!.map((n) => n.key).join(',')}`);
      }
    }
    expect(Object.keys(taskLifecycleMachine.root.states)).toEqual(TASK_STATUSES);
    expect(machineMoves.sort()).toEqual(tableMoves());
    expect(finals).toEqual(TASK_STATUSES.filter((s) => Object.keys(LIFECYCLE[s].on).length === 0));
    expect(taskLifecycleMachine.root.initial.target[0]!.key).toBe('pending');
  });

  it('a graph walk from pending reaches every status', () => {
    const paths = getShortestPaths(taskLifecycleMachine, { events: ALL_EVENTS.map((type) => ({ type })) });
    const reached = new Map(paths.map((p) => [String(p.state.value), p.steps.map((s) => s.event.type as string).filter((t) => t !== 'xstate.init')]));
    expect([...reached.keys()].sort()).toEqual([...TASK_STATUSES].sort());
    expect(reached.get('running')).toEqual(['READY', 'START']);
    expect(reached.get('skipped')).toEqual(['SKIP']);
  });
});

describe('RunTable: every move of the table is one the run makes', () => {
  afterEach(() => vi.restoreAllMocks());

  it('scenarios reach each (status, event) of the table, and nothing else', () => {
    const seen = new Set<string>();
    const move = TaskStates.prototype.move;
    vi.spyOn(TaskStates.prototype, 'move').mockImplementation(function (this: TaskStates, record, event) {
      const from = record.status;
      const out = move.call(this, record, event);
      seen.add(`${from} --${event}--> ${record.status}`);
      return out;
    });

    // READY, START, COMPLETE; RETRY; FAIL then SKIP.
    const a = new RunTable([task('a'), task('b', ['a']), task('c'), task('d', ['c'])]);
    a.settle(report(a.startNext()!.spec.id, 1), { retry: true });
    a.startNext(); // b
    a.startNext(); // c
    expect(a.settle(report('c', 1, failure(true)), { retry: true })).toEqual({ kind: 'retry' });
    a.startNext();
    expect(a.settle(report('c', 2, failure(false)), { retry: true })).toEqual({ kind: 'failed', skipped: ['d'] });
    // CANCEL from running (an agent cancelled).
    expect(a.settle(report('b', 1, { status: 'cancelled' }), { retry: false })).toEqual({ kind: 'cancelled' });

    // REQUEUE (no slot, held by fan-out); CANCEL from queued and from pending.
    const b = new RunTable([task('e'), task('f'), task('g', ['e'])]);
    b.requeue(b.startNext()!.spec.id);
    b.hold(b.startNext()!.spec.id);
    expect(b.cancelNotStarted().sort()).toEqual(['e', 'f', 'g']);

    // WAIT (the reviewer) and REVISE (the draft it sends back).
    const c = new RunTable([task('draft'), task('check', ['draft'], { kind: 'review', reviews: 'draft' })]);
    c.settle(report(c.startNext()!.spec.id, 1), { retry: true });
    c.startNext();
    expect(c.settle(report('check', 1, { output: 'REVISE: shorter' }), { retry: true })).toMatchObject({ kind: 'revise' });

    // AWAIT (an approval asks), then WAIT (rejected with a note: the draft goes back), APPROVE,
    // REJECT (no note), and CANCEL while it waits.
    const approval = (id: string, draft = 'draft') => task(id, [draft], { kind: 'approval', reviews: draft });
    const e = new RunTable([task('draft'), task('d2'), task('d3'), approval('ok'), approval('no', 'd2'), approval('later', 'd3')]);
    for (let i = 0; i < 3; i++) e.settle(report(e.startNext()!.spec.id, 1), { retry: true });
    for (let i = 0; i < 3; i++) {
      const next = e.startNext()!;
      expect(e.awaitDecision(next.spec.id, next.attempt)).toBe(true);
    }
    expect(e.status('ok')).toBe('waiting');
    expect(e.decide('ok', { approved: false, note: 'shorter' }, true)).toMatchObject({ kind: 'revise' });
    expect(e.decide('no', { approved: false }, true)).toMatchObject({ kind: 'failed' });
    expect(e.cancelNotStarted()).toContain('later');
    const f = new RunTable([task('draft'), approval('ok')]);
    f.settle(report(f.startNext()!.spec.id, 1), { retry: true });
    const asked = f.startNext()!;
    f.awaitDecision(asked.spec.id, asked.attempt);
    expect(f.decide('ok', { approved: true, output: 'EDITED' }, true)).toMatchObject({ kind: 'completed' });
    expect(f.output('draft')).toBe('EDITED');
    expect(f.decide('ok', { approved: true }, true)).toEqual({ kind: 'stale' });

    // RESTORE_*: a resume puts final statuses back, and fails a task in flight at too many crashes.
    const d = new RunTable([task('h'), task('i'), task('j'), task('k')], {}, {
      tasks: [restored('h', 'completed'), restored('i', 'failed'), restored('j', 'skipped'), { ...restored('k', 'pending'), retries: 5 }],
      expansions: [],
    });
    expect([d.status('h'), d.status('i'), d.status('j'), d.status('k')]).toEqual(['completed', 'failed', 'skipped', 'failed']);

    expect([...seen].sort()).toEqual(tableMoves());
  });
});

describe('RunTable: one retry budget per task', () => {
  it('retries taken within an attempt count against maxRetries: an attempt that spent them all is not run again', () => {
    const table = new RunTable([task('t', [], { maxRetries: 1 })]);
    expect(table.startNext()).toMatchObject({ attempt: 1, retriesLeft: 1 });
    // Two calls, the second a retry within the attempt: the budget of 1 is spent.
    expect(table.settle(report('t', 1, { ...failure(true), requests: 2, retries: 1 }), { retry: true })).toEqual({ kind: 'failed', skipped: [] });
    expect(table.result('r', 'failed', 0).tasks.t).toMatchObject({ status: 'failed', requests: 2, retries: 1 });
  });

  it('an attempt that spent part of the budget leaves the rest to the next attempt', () => {
    const table = new RunTable([task('t', [], { maxRetries: 3 })]);
    table.startNext();
    expect(table.settle(report('t', 1, { ...failure(true), requests: 2, retries: 1 }), { retry: true })).toEqual({ kind: 'retry' });
    // 1 in the attempt + 1 for the new attempt: 1 of 3 left.
    expect(table.startNext()).toMatchObject({ attempt: 2, retriesLeft: 1 });
    expect(table.settle(report('t', 2, { ...failure(true), requests: 2, retries: 1 }), { retry: true })).toEqual({ kind: 'failed', skipped: [] });
    expect(table.result('r', 'failed', 0).tasks.t).toMatchObject({ requests: 4, retries: 3 });
  });
});
