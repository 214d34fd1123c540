/**
 * Branches in the run table (machines/tasks/graph.ts): a task's `when` decides, once, when it
 * would become ready; a false one skips it with the cause `condition` and skips what depends on
 * it, except joins (`after: "any"`), which run once every dep has ended and one completed.
 */
import { describe, expect, it } from 'vitest';
import { ZERO_USAGE, type AttemptReport } from '../../machines/protocol.js';
import type { RestoredTask } from '../../machines/tasks/restore.js';
import { RunTable } from '../../machines/tasks/runTable.js';
import type { SupervisedTask } from '../../machines/tasks/types.js';

const task = (id: string, deps: string[] = [], extra: Partial<SupervisedTask> = {}): SupervisedTask => ({
  id, deps, priority: 0, rank: 1, modelName: 'm', provider: 'p', model: 'x', maxTokens: 10, prompt: id, tools: [], maxTurns: 1, maxRetries: 0, timeoutMs: 1000, ...extra,
});
const schema = { schema: { type: 'object', properties: { urgency: { type: 'string' } } } };
const report = (taskId: string, attempt: number, extra: Partial<AttemptReport> = {}): AttemptReport => ({
  taskId, attempt, status: 'completed', output: `out:${taskId}`, usage: ZERO_USAGE, requests: 1, retries: 0, turns: 1, messages: [], ...extra,
});
const failed = { status: 'failed' as const, error: { code: 'bad_request' as const, message: 'no', retryable: false } };

/** Starts the named ready task (the queue gives them in its order; this takes them until it is found). */
function start(table: RunTable, id: string): void {
  const taken: string[] = [];
  for (;;) {
    const next = table.startNext();
    if (!next) throw new Error(`"${id}" is not ready (took ${taken.join(', ')})`);
    if (next.spec.id === id) break;
    taken.push(next.spec.id);
  }
  for (const other of taken) table.requeue(other);
}

/** classify -> urgent (high) -> notify; classify -> archive (low); reply joins urgent and archive. */
const triage = () => [
  task('classify', [], { output: schema }),
  task('urgent', ['classify'], { when: { task: 'classify', path: 'urgency', in: ['high', 'critical'] } }),
  task('notify', ['urgent']),
  task('archive', ['classify'], { when: { task: 'classify', path: 'urgency', equals: 'low' } }),
  task('reply', ['urgent', 'archive'], { after: 'any' }),
];

describe('when', () => {
  it('a false condition skips the task (cause condition) and its dependents (cause dependency); a join runs once its other branch completes', () => {
    const table = new RunTable(triage());
    start(table, 'classify');
    expect(table.settle(report('classify', 1, { output: '{"urgency":"low"}' }), { retry: true })).toEqual({ kind: 'completed', unlocked: ['archive'], skipped: ['urgent', 'notify'] });
    expect(table.skipOf('urgent')).toEqual({ cause: 'condition', reason: 'its condition is false: classify.urgency in ["high","critical"]; classify.urgency is "low"' });
    expect(table.skipOf('notify')).toEqual({ cause: 'dependency', reason: 'depends on "urgent", which was skipped' });
    // The join waits for archive, the branch still running.
    expect(table.status('reply')).toBe('pending');
    start(table, 'archive');
    expect(table.settle(report('archive', 1), { retry: true })).toEqual({ kind: 'completed', unlocked: ['reply'] });
    start(table, 'reply');
    expect(table.settle(report('reply', 1), { retry: true })).toEqual({ kind: 'completed', unlocked: [] });
    const result = table.result('r', 'partial', 0);
    expect(Object.fromEntries(Object.values(result.tasks).map((t) => [t.id, [t.status, t.cause]]))).toEqual({
      classify: ['completed', undefined],
      urgent: ['skipped', 'condition'],
      notify: ['skipped', 'dependency'],
      archive: ['completed', undefined],
      reply: ['completed', undefined],
    });
    expect(result.tasks.urgent!.error).toEqual({ code: 'skipped', message: 'skipped: its condition is false: classify.urgency in ["high","critical"]; classify.urgency is "low"', retryable: false });
  });

  it('the other branch: the condition holds, the task runs; a text output is compared whole', () => {
    const table = new RunTable([...triage(), task('echo', ['reply'], { when: { task: 'reply', equals: 'out:reply' } })]);
    start(table, 'classify');
    expect(table.settle(report('classify', 1, { output: '{"urgency":"critical"}' }), { retry: true })).toEqual({ kind: 'completed', unlocked: ['urgent'], skipped: ['archive'] });
    expect(table.skipOf('archive').cause).toBe('condition');
    start(table, 'urgent');
    // The join's last branch ended (archive was skipped), and one completed.
    expect(table.settle(report('urgent', 1), { retry: true })).toEqual({ kind: 'completed', unlocked: ['notify', 'reply'] });
    start(table, 'reply');
    expect(table.settle(report('reply', 1), { retry: true })).toEqual({ kind: 'completed', unlocked: ['echo'] });
  });

  it('a join none of whose deps completed is skipped (cause dependency), and so is what depends on it', () => {
    const table = new RunTable([...triage(), task('after', ['reply'])]);
    start(table, 'classify');
    expect(table.settle(report('classify', 1, { output: '{"urgency":"low"}' }), { retry: true })).toMatchObject({ kind: 'completed', unlocked: ['archive'] });
    start(table, 'archive');
    expect(table.settle(report('archive', 1, failed), { retry: true })).toEqual({ kind: 'failed', skipped: ['reply', 'after'] });
    expect(table.skipOf('reply')).toEqual({ cause: 'dependency', reason: 'none of its deps completed ("urgent" was skipped, "archive" failed); it joins them with after: "any"' });
    expect(table.openTasks).toBe(0);
  });

  it('a failed branch does not stop a join whose other branch completes; its placeholders read nothing of the failed one', () => {
    const table = new RunTable([task('a'), task('b'), task('j', ['a', 'b'], { after: 'any' })]);
    start(table, 'a');
    // A rejected answer is kept on the failed task, but a join does not read it.
    expect(table.settle(report('a', 1, { status: 'failed', output: 'bad draft', error: { code: 'rejected_output', message: 'no', retryable: false } }), { retry: true })).toEqual({ kind: 'failed', skipped: [] });
    expect(table.outputText('a')).toBe('');
    expect(table.absentDeps(table.spec('a'))).toBeUndefined();
    start(table, 'b');
    expect(table.settle(report('b', 1), { retry: true })).toEqual({ kind: 'completed', unlocked: ['j'] });
    expect([...table.absentDeps(table.spec('j'))!]).toEqual(['a']);
    expect(table.outputText('b')).toBe('out:b');
  });

  it('a join whose last dep fails, another having completed, runs (the failure unlocks it)', () => {
    const table = new RunTable([task('a'), task('b'), task('j', ['a', 'b'], { after: 'any' })]);
    start(table, 'a');
    table.settle(report('a', 1), { retry: true });
    start(table, 'b');
    expect(table.settle(report('b', 1, failed), { retry: true })).toEqual({ kind: 'failed', skipped: [], unlocked: ['j'] });
    expect(table.status('j')).toBe('queued');
  });

  it('reads a structured output parsed (a map\'s as its array), any other as its text', () => {
    const table = new RunTable([
      task('s', [], { output: schema }),
      task('t'),
      task('yes', ['s', 't'], { when: { all: [{ task: 's', path: 'urgency', equals: 'low' }, { task: 't', equals: '{"urgency":"low"}' }] } }),
      task('no', ['t'], { when: { task: 't', path: 'urgency', exists: true } }),
    ]);
    start(table, 's');
    table.settle(report('s', 1, { output: '{"urgency":"low"}' }), { retry: true });
    start(table, 't');
    expect(table.settle(report('t', 1, { output: '{"urgency":"low"}' }), { retry: true })).toEqual({ kind: 'completed', unlocked: ['yes'], skipped: ['no'] });
  });

  it('reads a function step\'s output (kind fn) parsed, schema or not', () => {
    // `fn` steps return JSON (their kind is another part of the runtime: cast here).
    const table = new RunTable([task('f', [], { kind: 'fn' as never }), task('yes', ['f'], { when: { task: 'f', path: '0.id', equals: 7 } })]);
    start(table, 'f');
    expect(table.settle(report('f', 1, { output: '[{"id":7}]' }), { retry: true })).toEqual({ kind: 'completed', unlocked: ['yes'] });
  });

  it('a condition is decided once: an aggregator waiting again for its items, or a reviewer for a revised draft, is not judged again', () => {
    const table = new RunTable([
      task('c', [], { output: schema }),
      task('draft', ['c'], { when: { task: 'c', path: 'urgency', equals: 'high' } }),
      task('rev', ['draft', 'c'], { kind: 'review', reviews: 'draft', when: { task: 'c', path: 'urgency', equals: 'high' } }),
    ]);
    start(table, 'c');
    table.settle(report('c', 1, { output: '{"urgency":"high"}' }), { retry: true });
    start(table, 'draft');
    table.settle(report('draft', 1), { retry: true });
    start(table, 'rev');
    expect(table.settle(report('rev', 1, { output: 'REVISE: more' }), { retry: true })).toMatchObject({ kind: 'revise' });
    start(table, 'draft');
    expect(table.settle(report('draft', 2), { retry: true })).toEqual({ kind: 'completed', unlocked: ['rev'] });
  });
});

describe('when, on a resume', () => {
  const restored = (id: string, status: RestoredTask['status'], extra: Partial<RestoredTask> = {}): RestoredTask => ({ id, status, attempts: status === 'completed' ? 1 : 0, retries: 0, requests: 0, usage: ZERO_USAGE, costUsd: 0, ...extra });

  it('a task skipped by its condition stays so, with its cause; a dependent the journal had not skipped yet is skipped; a join decides again', () => {
    const table = new RunTable(triage(), {}, {
      tasks: [
        restored('classify', 'completed', { output: '{"urgency":"low"}' }),
        restored('urgent', 'skipped', { skip: { cause: 'condition', reason: 'its condition is false' } }),
        restored('notify', 'pending'),
        restored('archive', 'completed', { output: 'archived' }),
        restored('reply', 'pending'),
      ],
      expansions: [],
    });
    expect(table.initiallySkipped).toEqual(['notify']);
    expect(table.initiallyReady).toEqual(['reply']);
    expect(table.skipOf('urgent')).toEqual({ cause: 'condition', reason: 'its condition is false' });
    expect(table.skipOf('notify')).toEqual({ cause: 'dependency', reason: 'depends on "urgent", which was skipped' });
    expect(table.result('r', 'partial', 0).tasks.urgent).toMatchObject({ status: 'skipped', cause: 'condition' });
  });

  it('a task whose deps completed before the crash has its condition decided on the resume', () => {
    const table = new RunTable(triage(), {}, {
      tasks: [restored('classify', 'completed', { output: '{"urgency":"high"}' })],
      expansions: [],
    });
    expect(table.initiallyReady).toEqual(['urgent']);
    expect(table.initiallySkipped).toEqual(['archive']);
    expect(table.skipOf('archive').cause).toBe('condition');
  });
});
