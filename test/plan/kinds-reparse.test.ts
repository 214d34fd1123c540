/**
 * A parsed plan parses again: the journal keeps the parsed plan (with the schema's defaults, such
 * as `tools: []` on every task) and a resume reads it back through the same checks. A kind that
 * refuses the fields of a model call must not refuse those defaults.
 */
import { describe, expect, it } from 'vitest';
import { parsePlan } from '../../src/index.js';

const plan = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'fetch', kind: 'fn', fn: 'fetchOrders' },
    { id: 'draft', model: 'fast', deps: ['fetch'], prompt: 'draft {{fetch}}' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
  ],
};

describe('a parsed plan with fn and approval tasks', () => {
  it('parses again as it was', () => {
    const once = parsePlan(plan, { functions: ['fetchOrders'] });
    expect(once.tasks.find((t) => t.id === 'ok')!.tools).toEqual([]);
    expect(parsePlan(JSON.parse(JSON.stringify(once)), { functions: ['fetchOrders'] })).toEqual(once);
  });

  it('still refuses tools an approval was given', () => {
    expect(() => parsePlan({ ...plan, tasks: plan.tasks.map((t) => (t.id === 'ok' ? { ...t, tools: ['search'] } : t)) })).toThrow(/tasks\[2\]\.tools: an approval asks a person, not a model: it has no "tools"/);
  });
});
