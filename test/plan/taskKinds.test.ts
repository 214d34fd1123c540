/**
 * The task kinds are one table (src/plan/taskKinds.ts): the schema accepts exactly its kinds, and
 * each kind's own fields are refused on the others, with the owner named.
 */
import { describe, expect, it } from 'vitest';
import { validatePlan } from '../../src/plan/index.js';
import { TASK_KINDS, TASK_KIND_NAMES } from '../../src/plan/taskKinds.js';

const plan = (tasks: unknown[]) => ({ providers: { sim: { type: 'sim' } }, models: { m: { provider: 'sim', model: 'sim-fast' } }, tasks });

describe('task kinds, from one table', () => {
  it('refuses a kind the table lacks, listing the ones it has', () => {
    const r = validatePlan(plan([{ id: 'a', kind: 'vote', model: 'm', prompt: 'x' }]));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues).toContainEqual({ path: 'tasks[0].kind', message: 'must be "task", "plan", "review", "map" or "reduce"' });
    expect(TASK_KIND_NAMES).toEqual(['task', 'plan', 'review', 'map', 'reduce']);
  });

  it('refuses each kind`s own fields on a plain task, naming the kind', () => {
    const values: Record<string, unknown> = { reviews: 'x', maxRounds: 2, items: { values: [1] }, as: 'row', maxItems: 3, key: 'id', dedupe: 'text', over: ['x'], fanIn: 2 };
    const owned = Object.entries(TASK_KINDS).flatMap(([kind, info]) => Object.keys(info.fields).map((field) => ({ kind, field })));
    const task = Object.fromEntries(owned.map(({ field }) => [field, values[field]]));
    const r = validatePlan(plan([{ id: 'x', model: 'm', prompt: 'x' }, { id: 'a', model: 'm', prompt: 'x', ...task }]));
    expect(r.ok).toBe(false);
    const issues = r.ok ? [] : r.issues;
    for (const { kind, field } of owned) {
      expect(issues.find((i) => i.path === `tasks[1].${field}`)?.message, field).toContain(`only a task with "kind": "${kind}"`);
    }
  });
});
