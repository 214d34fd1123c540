/**
 * The pure parts of planner, review and cache-aware fan-out: verdicts, cache groups, and the
 * run table's review rounds, plan expansion and held tasks.
 */
import { describe, expect, it } from 'vitest';
import { CacheGroups, cacheGroupKey } from '../../machines/cacheGroups.js';
import { ZERO_USAGE, type AttemptReport } from '../../machines/protocol.js';
import { verdictOf } from '../../machines/review.js';
import { RunTable } from '../../machines/tasks/runTable.js';
import type { SupervisedTask } from '../../machines/tasks/types.js';

const task = (id: string, deps: string[] = [], extra: Partial<SupervisedTask> = {}): SupervisedTask => ({
  id, deps, priority: 0, rank: 1, modelName: 'm', provider: 'p', model: 'x', maxTokens: 10, prompt: id, tools: [], maxTurns: 1, maxRetries: 1, timeoutMs: 1000, ...extra,
});
const done = (taskId: string, attempt: number, output = `out:${taskId}`): AttemptReport => ({
  taskId, attempt, status: 'completed', output, usage: ZERO_USAGE, requests: 1, retries: 0, turns: 1, messages: [],
});
const startAll = (t: RunTable) => {
  const out: { id: string; attempt: number }[] = [];
  for (let n = t.startNext(); n; n = t.startNext()) out.push({ id: n.spec.id, attempt: n.attempt });
  return out;
};

describe('verdictOf', () => {
  it.each([
    ['APPROVE', 'approve', undefined],
    ['Approved. Nice work.', 'approve', undefined],
    ['**LGTM**', 'approve', undefined],
    ['REVISE: add tests\nand docs', 'revise', 'add tests\nand docs'],
    ['Changes requested - the intro is wrong', 'revise', 'the intro is wrong'],
    ['{"verdict": "approve"}', 'approve', undefined],
    ['Here: {"approved": false, "findings": ["a", "b"]}', 'revise', 'a\nb'],
    ['I think it is fine overall', 'revise', 'I think it is fine overall'],
  ])('%j -> %s', (text, verdict, findings) => {
    const v = verdictOf(text);
    expect(v.verdict).toBe(verdict);
    if (findings !== undefined) expect(v.findings).toBe(findings);
  });
});

describe('CacheGroups', () => {
  it('leads once, holds the rest, releases them warm, then lets later tasks straight through until the TTL', () => {
    const g = new CacheGroups(1000);
    const key = cacheGroupKey('p/m', [], 'brief');
    expect(g.admit(key, 'a', 1, 0)).toBe('lead');
    expect(g.admit(key, 'b', 1, 0)).toBe('hold');
    expect(g.admit(key, 'c', 1, 0)).toBe('hold');
    expect(g.heldCount).toBe(2);
    expect(g.release('a', 2, true, 5)).toBeUndefined(); // another attempt of the leader: not its lead
    expect(g.release('a', 1, true, 5)).toEqual({ key, released: ['b', 'c'] });
    expect(g.heldCount).toBe(0);
    expect(g.admit(key, 'd', 1, 500)).toBe('go');
    expect(g.admit(key, 'e', 1, 1400)).toBe('go'); // the read at 500 refreshed it
    expect(g.admit(key, 'f', 1, 2401)).toBe('lead'); // expired: cold again
  });

  it('a leader that fails releases its group cold: the next task leads', () => {
    const g = new CacheGroups();
    const key = cacheGroupKey('p/m', ['t'], 'brief');
    g.admit(key, 'a', 1, 0);
    g.admit(key, 'b', 1, 0);
    expect(g.release('a', 1, false, 10)!.released).toEqual(['b']);
    expect(g.admit(key, 'b', 1, 10)).toBe('lead');
  });

  it('different routes, tools or systems are different groups', () => {
    const keys = new Set([cacheGroupKey('p/m', [], 's'), cacheGroupKey('p/n', [], 's'), cacheGroupKey('p/m', ['t'], 's'), cacheGroupKey('p/m', [], 's2')]);
    expect(keys.size).toBe(4);
  });
});

describe('RunTable: held tasks', () => {
  it('a held task leaves the queue without an attempt and comes back on release', () => {
    const t = new RunTable([task('a'), task('b')]);
    const first = t.startNext()!;
    t.hold(first.spec.id);
    expect(t.status(first.spec.id)).toBe('queued');
    expect(t.readyCount).toBe(1);
    t.release([first.spec.id]);
    expect(t.readyCount).toBe(2);
    const again = startAll(t).find((s) => s.id === first.spec.id)!;
    expect(again.attempt).toBe(1);
  });

  it('cancelling the run cancels held tasks too', () => {
    const t = new RunTable([task('a')]);
    t.hold(t.startNext()!.spec.id);
    expect(t.cancelNotStarted()).toEqual(['a']);
    expect(t.openTasks).toBe(0);
  });
});

describe('RunTable: review rounds', () => {
  it('revise sends the target back (with findings) and holds its other dependents until approval', () => {
    const t = new RunTable([task('draft'), task('check', ['draft'], { kind: 'review', reviews: 'draft', maxRounds: 3 }), task('publish', ['draft'])]);
    expect(startAll(t)).toEqual([{ id: 'draft', attempt: 1 }]);
    expect(t.settle(done('draft', 1), { retry: true })).toEqual({ kind: 'completed', unlocked: ['check'] });
    expect(startAll(t)).toEqual([{ id: 'check', attempt: 1 }]); // publish waits for the review
    const revise = t.settle(done('check', 1, 'REVISE: shorter'), { retry: true });
    expect(revise).toMatchObject({ kind: 'revise', review: { target: 'draft', round: 1, verdict: 'revise', findings: 'shorter', final: false } });
    expect(t.status('draft')).toBe('queued');
    expect(t.status('check')).toBe('pending');
    const next = t.startNext()!;
    expect(next.spec.id).toBe('draft');
    expect(next.attempt).toBe(2);
    expect(next.feedback).toEqual({ kind: 'review', round: 1, maxRounds: 3, draft: 'out:draft', findings: 'shorter' });
    expect(t.settle(done('draft', 2, 'v2'), { retry: true })).toEqual({ kind: 'completed', unlocked: ['check'] });
    t.startNext();
    const approved = t.settle(done('check', 2, 'APPROVE'), { retry: true });
    expect(approved).toMatchObject({ kind: 'completed', unlocked: ['publish'], review: { round: 2, verdict: 'approve', final: true } });
    t.startNext();
    t.settle(done('publish', 1), { retry: true });
    expect(t.openTasks).toBe(0);
    const result = t.result('r', 'completed', 0);
    expect(result.tasks.check!.review).toEqual({ target: 'draft', rounds: 2, approved: true });
    expect(result.tasks.draft!.revisions).toBe(1);
    expect(result.tasks.draft!.output).toBe('v2');
  });
});

describe('RunTable: plan expansion', () => {
  it('sub-tasks join, the planner completes, and its dependents also wait for the leaves', () => {
    const t = new RunTable([task('pre'), task('plan', ['pre'], { kind: 'plan' }), task('after', ['plan'])]);
    t.startNext();
    t.settle(done('pre', 1), { retry: true });
    t.startNext();
    expect(t.settle(done('plan', 1, '[...]'), { retry: true })).toEqual({ kind: 'plan', output: '[...]' });
    expect(t.status('plan')).toBe('running'); // until the output is checked
    const s = t.expand('plan', 1, [task('plan/a', ['pre']), task('plan/b', ['plan/a']), task('plan/c')]);
    expect(s).toEqual({ kind: 'completed', unlocked: ['plan/a', 'plan/c'] });
    expect(t.spec('after').deps).toEqual(['plan', 'plan/b', 'plan/c']);
    expect(t.size).toBe(6);
    for (const id of ['plan/a', 'plan/c', 'plan/b']) {
      const n = t.startNext()!;
      expect(n.spec.id).toBe(id);
      t.settle(done(id, 1), { retry: true });
    }
    expect(t.status('after')).toBe('queued');
    expect(t.expand('plan', 1, [])).toEqual({ kind: 'stale' });
  });

  it('a rejected plan is retried with the problems as feedback, then fails and skips its dependents', () => {
    const t = new RunTable([task('plan', [], { kind: 'plan', maxRetries: 1 }), task('after', ['plan'])]);
    t.startNext();
    t.settle(done('plan', 1, 'nonsense'), { retry: true });
    const error = { code: 'invalid_plan' as const, message: 'bad', retryable: true };
    expect(t.rejectPlan('plan', 1, error, ['tasks[0].model: required'], { retry: true })).toEqual({ kind: 'retry' });
    const next = t.startNext()!;
    expect(next.feedback).toEqual({ kind: 'plan', issues: ['tasks[0].model: required'] });
    t.settle(done('plan', 2, 'nonsense'), { retry: true });
    expect(t.rejectPlan('plan', 2, error, ['x'], { retry: true })).toEqual({ kind: 'failed', skipped: ['after'] });
  });
});
