/** tasksToRetry (pure): which tasks a retry sends back, over planners' sub-tasks and reviews, and what it refuses. */
import { describe, expect, it } from 'vitest';
import { parsePlan, type TaskSpec } from '../../src/plan/index.js';
import { retryBasesOf, tasksToRetry } from '../../src/run/retry.js';
import type { StoredTaskStatus, TaskRow } from '../../src/store/index.js';
import { refusal } from '../helpers/retry.js';

const plan = parsePlan({
  providers: { p: { type: 'sim' } },
  models: { m: { provider: 'p', model: 'x' } },
  tasks: [
    { id: 'brief', model: 'm', prompt: 'brief' },
    { id: 'plan', kind: 'plan', model: 'm', deps: ['brief'], prompt: 'plan' },
    { id: 'end', model: 'm', deps: ['plan'], prompt: 'end' },
    { id: 'draft', model: 'm', prompt: 'draft' },
    { id: 'check', kind: 'review', reviews: 'draft', model: 'm', prompt: 'check' },
    { id: 'publish', model: 'm', deps: ['draft'], prompt: 'publish' },
  ],
});

const sub = (id: string, deps: string[] = []): TaskSpec => ({ ...plan.tasks[0]!, id: `plan/${id}`, deps, prompt: id });
const row = (taskId: string, status: StoredTaskStatus, extra: Partial<TaskRow> = {}): TaskRow => ({
  taskId, status, attempts: status === 'pending' ? 0 : 1, output: status === 'completed' ? 'out' : null, error: null, reason: null,
  usage: null, costUsd: null, requests: 1, retries: 0, spec: null, parent: null, extra: null, rejected: null, updatedAt: 0, ...extra,
});

/** The planner completed with two sub-tasks, the second failed; the review failed. */
const rows: TaskRow[] = [
  row('brief', 'completed'),
  row('plan', 'completed', { extra: { subtasks: ['plan/a', 'plan/b'] } }),
  row('plan/a', 'completed', { spec: sub('a'), parent: 'plan' }),
  row('plan/b', 'failed', { spec: sub('b', ['plan/a']), parent: 'plan' }),
  // An older answer's sub-task that never joined the run.
  row('plan/old', 'pending', { spec: sub('old'), parent: 'plan' }),
  row('end', 'skipped'),
  row('draft', 'completed'),
  row('check', 'failed'),
  row('publish', 'skipped'),
];

describe('tasksToRetry', () => {
  it('takes every task that did not complete, a completed planner keeping its sub-tasks', () => {
    expect(tasksToRetry('r', plan.tasks, rows)).toEqual(['end', 'check', 'publish', 'plan/b']);
  });

  it('with tasks: those, and what waits for them (through a planner, behind a reviewer)', () => {
    expect(tasksToRetry('r', plan.tasks, rows, ['plan/b'])).toEqual(['end', 'plan/b']);
    expect(tasksToRetry('r', plan.tasks, rows, ['check'])).toEqual(['check', 'publish']);
  });

  it('refuses a completed task, an unknown one, and one that waits for a failure not retried', () => {
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows, ['plan']))).toMatchObject({ code: 'TASK_COMPLETED', taskId: 'plan' });
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows, ['plan/old']))).toMatchObject({ code: 'UNKNOWN_TASK', taskId: 'plan/old' });
    // `end` waits for the planner's sub-tasks; `publish` for the review of its dependency.
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows, ['end']))).toMatchObject({ code: 'DEPENDENCY_NOT_RETRIED', message: expect.stringContaining('waits for "plan/b"') });
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows, ['publish']))).toMatchObject({ code: 'DEPENDENCY_NOT_RETRIED', message: expect.stringContaining('waits for "check"') });
    const done = rows.map((r) => ({ ...r, status: 'completed' as const }));
    expect(refusal(() => tasksToRetry('r', plan.tasks, done))).toMatchObject({ code: 'NOTHING_TO_RETRY' });
  });

  it('a planner that failed plans again: its old sub-tasks are not tasks of the run', () => {
    const failed = rows.map((r) => (r.taskId === 'plan' ? { ...r, status: 'failed' as const, extra: null } : r));
    expect(tasksToRetry('r', plan.tasks, failed, ['plan'])).toEqual(['plan', 'end']);
    expect(refusal(() => tasksToRetry('r', plan.tasks, failed, ['plan/b']))).toMatchObject({ code: 'UNKNOWN_TASK' });
  });

  it('cancelled tasks run again in any case, as on a resume', () => {
    const cancelled = [...rows, row('draft2', 'cancelled')];
    const withDraft2 = [...plan.tasks, { ...plan.tasks[3]!, id: 'draft2' }];
    expect(tasksToRetry('r', withDraft2, cancelled, ['check'])).toEqual(['check', 'publish', 'draft2']);
  });

  it('reads the retry bases from the run options, the last session winning', () => {
    const options = { seed: 1, retries: [{ at: 1, tasks: ['b'], from: { b: 1 } }, { at: 2, tasks: ['b', 'c'], from: { b: 3, c: 0 } }] };
    expect([...retryBasesOf(options)]).toEqual([['b', 3], ['c', 0]]);
    expect(retryBasesOf({ seed: 1 }).size).toBe(0);
  });
});
