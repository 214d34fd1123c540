/**
 * The task kinds are one registry (src/plan/kinds/index.ts): the schema accepts exactly its kinds,
 * and each kind's own fields are refused on the others, with their owners named.
 */
import { describe, expect, it } from 'vitest';
import { validatePlan } from '../../src/plan/index.js';
import { TASK_KINDS, TASK_KIND_NAMES } from '../../src/plan/kinds/index.js';

const plan = (tasks: unknown[]) => ({ providers: { sim: { type: 'sim' } }, models: { m: { provider: 'sim', model: 'sim-fast' } }, tasks });

describe('task kinds, from one registry', () => {
  it('refuses a kind the registry lacks, listing the ones it has', () => {
    const r = validatePlan(plan([{ id: 'a', kind: 'vote', model: 'm', prompt: 'x' }]));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues).toContainEqual({ path: 'tasks[0].kind', message: 'must be "task", "plan", "review", "map", "reduce", "fn" or "approval"' });
    expect(TASK_KIND_NAMES).toEqual(['task', 'plan', 'review', 'map', 'reduce', 'fn', 'approval']);
  });

  it('refuses each kind`s own fields on a plain task, naming the kinds that take it', () => {
    const values: Record<string, unknown> = { reviews: 'x', maxRounds: 2, items: { values: [1] }, as: 'row', maxItems: 3, key: 'id', dedupe: 'text', over: ['x'], fanIn: 2, fn: 'go', approves: 'x' };
    const owned = Object.entries(TASK_KINDS).flatMap(([kind, info]) => Object.keys(info.fields).map((field) => ({ kind, field })));
    expect(owned.length).toBe(14);
    const task = Object.fromEntries(owned.map(({ field }) => [field, values[field]]));
    const r = validatePlan(plan([{ id: 'x', model: 'm', prompt: 'x' }, { id: 'a', model: 'm', prompt: 'x', ...task }]));
    expect(r.ok).toBe(false);
    const issues = r.ok ? [] : r.issues;
    for (const { kind, field } of owned) {
      const message = issues.find((i) => i.path === `tasks[1].${field}`)?.message;
      expect(message, field).toMatch(/^only a task with "kind": /);
      expect(message, field).toContain(`"${kind}"`);
    }
  });
});
