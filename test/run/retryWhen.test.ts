/** tasksToRetry (pure) and branches: a task skipped by its condition is settled, unless a dep of it runs again. */
import { describe, expect, it } from 'vitest';
import { parsePlan } from '../../src/plan/index.js';
import { tasksToRetry } from '../../src/run/retry.js';
import type { StoredTaskStatus, TaskRow } from '../../src/store/index.js';
import { refusal } from '../helpers/retry.js';

const schema = { type: 'object', properties: { urgency: { type: 'string' } } };
const plan = parsePlan({
  providers: { p: { type: 'sim' } },
  models: { m: { provider: 'p', model: 'x' } },
  tasks: [
    { id: 'classify', model: 'm', prompt: 'c', output: { schema } },
    { id: 'urgent', model: 'm', prompt: 'u', deps: ['classify'], when: { task: 'classify', path: 'urgency', equals: 'high' } },
    { id: 'notify', model: 'm', prompt: 'n', deps: ['urgent'] },
    { id: 'archive', model: 'm', prompt: 'a', deps: ['classify'], when: { task: 'classify', path: 'urgency', equals: 'low' } },
    { id: 'reply', model: 'm', prompt: 'r', deps: ['urgent', 'archive'], after: 'any' },
  ],
});

const row = (taskId: string, status: StoredTaskStatus, extra: Partial<TaskRow> = {}): TaskRow => ({
  taskId, status, attempts: status === 'completed' || status === 'failed' ? 1 : 0, output: status === 'completed' ? 'out' : null, error: null, reason: null,
  usage: null, costUsd: null, requests: 1, retries: 0, spec: null, parent: null, extra: null, rejected: null, updatedAt: 0, ...extra,
});
const byCondition = { extra: { skipped: 'condition' } };

describe('tasksToRetry and conditions', () => {
  it('a run whose only skips come from conditions has nothing to retry', () => {
    const rows = [row('classify', 'completed'), row('urgent', 'skipped', byCondition), row('notify', 'skipped'), row('archive', 'completed'), row('reply', 'completed')];
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows))).toMatchObject({
      code: 'NOTHING_TO_RETRY',
      message: 'run r: every task completed or was skipped by a condition; there is nothing to retry',
    });
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows, ['urgent']))).toMatchObject({ code: 'CONDITION_SKIPPED', taskId: 'urgent' });
    expect(refusal(() => tasksToRetry('r', plan.tasks, rows, ['notify']))).toMatchObject({
      code: 'CONDITION_SKIPPED',
      message: 'task "notify" of run r was skipped because of tasks skipped by their conditions, which its deps\' outputs decided: it runs again only when a dep of it does (retry that one)',
    });
  });

  it('a failed branch is retried, with the join after it; the branch its condition skipped stays so and does not block them', () => {
    const rows = [row('classify', 'completed'), row('urgent', 'skipped', byCondition), row('notify', 'skipped'), row('archive', 'failed'), row('reply', 'skipped')];
    expect(tasksToRetry('r', plan.tasks, rows)).toEqual(['archive', 'reply']);
    expect(tasksToRetry('r', plan.tasks, rows, ['archive'])).toEqual(['archive', 'reply']);
  });

  it('a condition-skipped task runs again when a dep of it does', () => {
    const rows = [row('classify', 'failed'), row('urgent', 'skipped'), row('notify', 'skipped'), row('archive', 'skipped'), row('reply', 'skipped')];
    expect(tasksToRetry('r', plan.tasks, rows)).toEqual(['classify', 'urgent', 'notify', 'archive', 'reply']);
    // A journal where classify's retry left urgent skipped by its condition, then archive failed: urgent is settled.
    const later = [row('classify', 'completed'), row('urgent', 'skipped', byCondition), row('notify', 'skipped'), row('archive', 'failed'), row('reply', 'skipped')];
    expect(tasksToRetry('r', plan.tasks, later)).not.toContain('urgent');
  });
});
