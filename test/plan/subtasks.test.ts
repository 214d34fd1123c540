import { describe, expect, it } from 'vitest';
import { parsePlan, parseSubtasks, type PlannerContext } from '../../src/plan/index.js';

const plan = parsePlan({
  providers: { p: { type: 'sim' } },
  models: { fast: { provider: 'p', model: 'sim-fast' } },
  limits: { maxSubtasks: 3 },
  tasks: [{ id: 'pre', model: 'fast', prompt: 'x' }, { id: 'plan', kind: 'plan', model: 'fast', deps: ['pre'], prompt: 'y' }],
});
const ctx: PlannerContext = { plan, planner: { id: 'plan', deps: ['pre'], depth: 0 }, existing: new Set(['pre', 'plan', 'plan/taken']), tools: ['search'] };

describe('parseSubtasks', () => {
  it('reads a fenced JSON list, renames sub-tasks under the planner, and keeps deps on the planner deps', () => {
    const out = '```json\n[{"id":"a","model":"fast","prompt":"use {{pre}}","deps":["pre"]},{"id":"b","model":"fast","deps":["a"],"prompt":"after {{a}}","tools":["search"]}]\n```';
    const r = parseSubtasks(out, ctx);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.tasks.map((t) => [t.id, t.deps, t.prompt])).toEqual([
      ['plan/a', ['pre'], 'use {{pre}}'],
      ['plan/b', ['plan/a'], 'after {{plan/a}}'],
    ]);
  });

  it('accepts {"tasks": [...]} with text around it', () => {
    const r = parseSubtasks('Sure! {"tasks": [{"id": "a", "model": "fast", "prompt": "p"}]} Done.', ctx);
    expect(r.ok && r.tasks.map((t) => t.id)).toEqual(['plan/a']);
  });

  it('lists every problem with its path', () => {
    const r = parseSubtasks(
      JSON.stringify([
        { id: 'a', prompt: 'p' },
        { id: 'b', model: 'slow', prompt: 'p', deps: ['elsewhere'], tools: ['nope'] },
        { id: 'taken', model: 'fast', prompt: 'p', budgetUsd: 1 },
        { id: 'c', model: 'fast', prompt: 'p', kind: 'plan' },
      ]),
      ctx,
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const text = r.issues.join('\n');
    for (const part of ['at most 3 sub-tasks', 'tasks[0].model', 'tasks[1].model', 'tasks[1].deps[0]', 'tasks[1].tools[0]', 'tasks[2].budgetUsd', 'tasks[2].id', 'tasks[3].kind']) {
      expect(text).toContain(part);
    }
  });

  it('says what is expected when the answer holds no JSON list', () => {
    const r = parseSubtasks('I would split it in three parts.', ctx);
    expect(r).toEqual({ ok: false, issues: [expect.stringContaining('JSON list of tasks')] });
  });
});
