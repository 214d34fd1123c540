/**
 * `kind: "approval"` in the plan: a person decides on the output of the task named in `approves`
 * (an implicit dep, as `reviews` is for a review), and the approved task's other dependents wait
 * for the decision, which can close a cycle. The fields of a model call are refused.
 */
import { describe, expect, it } from 'vitest';
import { validatePlan, type PlanIssue } from '../../src/plan/index.js';

const plan = (tasks: unknown[]) => ({ providers: { sim: { type: 'sim' } }, models: { m: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 1 } } }, tasks });
const lines = (tasks: unknown[]) => {
  const r = validatePlan(plan(tasks));
  return r.ok ? [] : r.issues.map((i: PlanIssue) => `${i.path}: ${i.message}`);
};

describe('an approval', () => {
  it('is valid with approves and a prompt (which may place the approved output), maxRounds, timeoutMs, deps and priority', () => {
    const r = validatePlan(
      plan([
        { id: 'draft', model: 'm', prompt: 'Write a reply' },
        { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?\n{{draft}}', maxRounds: 3, timeoutMs: 60000, priority: 1 },
        { id: 'send', kind: 'fn', fn: 'send', deps: ['draft', 'ok'] },
      ]),
    );
    expect(r.ok, JSON.stringify(!r.ok && r.issues)).toBe(true);
    if (r.ok) expect(r.plan.tasks[1]).toEqual({ id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?\n{{draft}}', maxRounds: 3, timeoutMs: 60000, priority: 1, deps: [], tools: [] });
  });

  it('needs approves and the question it asks', () => {
    expect(lines([{ id: 'ok', kind: 'approval' }])).toEqual([
      'tasks[0].prompt: required: the question the person answers (e.g. "Send this reply?")',
      'tasks[0].approves: required: the id of the task a person approves',
    ]);
  });

  it('refuses the fields of a model call, each with its own line', () => {
    expect(
      lines([
        { id: 'draft', model: 'm', prompt: 'x' },
        {
          id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send?', model: 'm', system: 's', tools: ['t'], maxTurns: 2, maxTokens: 9, maxInputTokens: 9, budgetUsd: 1, maxRetries: 1,
          output: { schema: { type: 'object' } }, accept: { minChars: 1 },
        },
      ]),
    ).toEqual([
      'tasks[1].model: an approval asks a person, not a model: it has no "model"',
      'tasks[1].system: an approval asks a person, not a model: it has no "system"',
      'tasks[1].tools: an approval asks a person, not a model: it has no "tools"',
      'tasks[1].maxTurns: an approval asks a person, not a model: it has no "maxTurns"',
      'tasks[1].maxTokens: an approval asks a person, not a model: it has no "maxTokens"',
      'tasks[1].maxInputTokens: an approval asks a person, not a model: it has no "maxInputTokens"',
      'tasks[1].budgetUsd: an approval asks a person, not a model: it has no "budgetUsd" (a decision costs nothing)',
      'tasks[1].maxRetries: an approval is not retried: a rejection with a note sends the approved task back, "maxRounds" times at most',
      'tasks[1].output: an approval\'s output is the person\'s decision, {"approved": true|false, "note"?: "..."}: it has no "output"',
      'tasks[1].accept: an approval asks a person, not a model: it has no "accept" (the person is the gate)',
    ]);
  });

  it('approves a task of the plan: not itself, not an unknown one, not one approved already, not an approval, a map, a reduce, a planner or a review', () => {
    expect(
      lines([
        { id: 'draft', model: 'm', prompt: 'x' },
        { id: 'self', kind: 'approval', approves: 'self', prompt: 'ok?' },
        { id: 'ghost', kind: 'approval', approves: 'drat', prompt: 'ok?' },
        { id: 'ok1', kind: 'approval', approves: 'draft', prompt: 'ok?' },
        { id: 'ok2', kind: 'approval', approves: 'draft', prompt: 'ok?' },
        { id: 'ok3', kind: 'approval', approves: 'ok1', prompt: 'ok?' },
        { id: 'each', kind: 'map', items: { values: [1] }, model: 'm', prompt: '{{item}}' },
        { id: 'ok4', kind: 'approval', approves: 'each', prompt: 'ok?' },
        { id: 'all', kind: 'reduce', over: 'each', model: 'm', prompt: '{{inputs}}' },
        { id: 'ok5', kind: 'approval', approves: 'all', prompt: 'ok?' },
        { id: 'p', kind: 'plan', model: 'm', prompt: 'plan' },
        { id: 'ok6', kind: 'approval', approves: 'p', prompt: 'ok?' },
        { id: 'rev', kind: 'review', reviews: 'draft', model: 'm', prompt: 'review' },
        { id: 'ok7', kind: 'approval', approves: 'rev', prompt: 'ok?' },
      ]),
    ).toEqual([
      'tasks[1].approves: an approval cannot approve itself',
      'tasks[2].approves: unknown task "drat" (did you mean "draft"?)',
      'tasks[4].approves: task "draft" already has an approval (tasks[3])',
      'tasks[5].approves: task "ok1" is an approval: a person decides on the task that made the output, approve that one',
      'tasks[7].approves: task "each" is a map, whose output its items make: approve a task that reads it',
      'tasks[9].approves: task "all" is a reduce, whose output its groups make: approve a task that reads it',
      'tasks[11].approves: task "p" is a planner: its sub-tasks cannot be taken back, approve a task that reads its output',
      'tasks[13].approves: task "rev" is a review: approve the task it reviews (the approval then waits for the review)',
    ]);
  });

  it('a review does not review an approval', () => {
    expect(lines([{ id: 'draft', model: 'm', prompt: 'x' }, { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'ok?' }, { id: 'rev', kind: 'review', reviews: 'ok', model: 'm', prompt: 'r' }])).toEqual([
      'tasks[2].reviews: task "ok" is an approval: review the task it approves',
    ]);
  });

  it('holds back the approved task`s other dependents, which can close a cycle; a review of the same task comes first, no cycle', () => {
    expect(
      lines([
        { id: 'draft', model: 'm', prompt: 'x' },
        // send reads draft, so it waits for draft's approval, which waits for send: a cycle.
        { id: 'send', model: 'm', prompt: 'send', deps: ['draft'] },
        { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'ok?', deps: ['send'] },
      ]),
    ).toEqual(['tasks[1].deps: cycle: send -> ok -> send (a task that depends on an approved task also waits for its approval)']);
    expect(
      lines([
        { id: 'b', model: 'm', prompt: 'x', deps: ['ok'] },
        { id: 'draft', model: 'm', prompt: 'x', deps: ['b'] },
        { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'ok?' },
      ]),
    ).toEqual(['tasks[0].deps[0]: cycle: b -> ok -> draft -> b']);
    expect(
      lines([
        { id: 'draft', model: 'm', prompt: 'x' },
        { id: 'rev', kind: 'review', reviews: 'draft', model: 'm', prompt: 'review {{draft}}' },
        { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'ok? {{draft}}' },
        { id: 'send', kind: 'fn', fn: 'send', deps: ['draft'] },
      ]),
    ).toEqual([]);
  });

  it('names the cycle at `approves` when the approval closes it there', () => {
    expect(
      lines([
        { id: 'draft', model: 'm', prompt: 'x', deps: ['ok'] },
        { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'ok?' },
      ]),
    ).toEqual(['tasks[0].deps[0]: cycle: draft -> ok -> draft']);
  });
});
