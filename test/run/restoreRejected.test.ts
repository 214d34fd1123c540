/**
 * restoreOf (src/durable.ts, pure) on task rows that kept a rejected answer: an unfinished task
 * gets the `output` feedback back (over a review's, which the rejection replaced), a failed one
 * its kept output, a completed one nothing of it.
 */
import { describe, expect, it } from 'vitest';
import { restoreOf } from '../../src/durable.js';
import type { PlanExpander } from '../../src/planner.js';
import type { StoredTaskStatus, TaskRow } from '../../src/store/index.js';

const row = (taskId: string, status: StoredTaskStatus, extra: Partial<TaskRow> = {}): TaskRow => ({
  taskId, status, attempts: 1, output: null, error: null, reason: null, usage: null, costUsd: null, requests: 1,
  retries: 0, spec: null, parent: null, extra: null, rejected: null, updatedAt: 0, ...extra,
});
// No planner made sub-tasks: the expander is never asked.
const expander = {} as PlanExpander;
const invalid = { code: 'invalid_output', message: 'not JSON', retryable: true, problems: ['the answer is not valid JSON'] };
const restore = (rows: TaskRow[]) =>
  Object.fromEntries(restoreOf(rows, [], {}, expander, new Set(rows.map((r) => r.taskId))).tasks.map((t) => [t.id, t]));

describe('restoreOf with rejected answers', () => {
  it('an unfinished task resumes with the rejected answer and its problems as its feedback, whatever failed after it', () => {
    const tasks = restore([
      row('queued', 'queued', { output: 'draft 1', error: invalid, rejected: { code: 'invalid_output', problems: invalid.problems } }),
      // A timeout after the rejection: the run table kept the rejection's feedback, and so does the row.
      row('timedOut', 'cancelled', { output: 'too short', error: { code: 'task_timeout', message: 't', retryable: true }, rejected: { code: 'rejected_output', problems: ['shorter than 40 characters'] } }),
    ]);
    expect(tasks.queued).toMatchObject({ status: 'pending', output: 'draft 1', feedback: { kind: 'output', code: 'invalid_output', draft: 'draft 1', problems: ['the answer is not valid JSON'] } });
    expect(tasks.timedOut!.feedback).toEqual({ kind: 'output', code: 'rejected_output', draft: 'too short', problems: ['shorter than 40 characters'] });
  });

  it("a rejection after a review's findings replaces them; without one the findings stand", () => {
    const findings = { rounds: 1, feedback: { round: 1, maxRounds: 3, findings: 'add tests' } };
    const tasks = restore([
      row('rejected', 'queued', { output: 'revision', extra: findings, rejected: { code: 'invalid_output', problems: ['p'] } }),
      row('reviewed', 'queued', { output: 'draft', extra: findings }),
    ]);
    expect(tasks.rejected!.feedback).toEqual({ kind: 'output', code: 'invalid_output', draft: 'revision', problems: ['p'] });
    expect(tasks.reviewed!.feedback).toEqual({ kind: 'review', round: 1, maxRounds: 3, findings: 'add tests', draft: 'draft' });
  });

  it('a task that failed for good keeps its last answer and no feedback; a completed one has none', () => {
    const tasks = restore([
      row('failed', 'failed', { output: '{"title": 7}', error: invalid, rejected: { code: 'invalid_output', problems: ['p'] } }),
      row('done', 'completed', { output: 'ok' }),
    ]);
    expect(tasks.failed).toMatchObject({ status: 'failed', output: '{"title": 7}', error: invalid });
    expect(tasks.failed!.feedback).toBeUndefined();
    expect(tasks.done!.feedback).toBeUndefined();
  });
});
