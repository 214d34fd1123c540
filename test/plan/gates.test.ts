/**
 * The quality gates as one table (src/plan/gates.ts): the plan's schema, the JSON Schema,
 * validate and the answer's check all read it, so a gate is one entry. These tests hold the
 * surfaces to the table, and check each gate's own behaviour through the public functions.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validatePlan } from '../../src/index.js';
import { GATES, TEXT_GATES } from '../../src/plan/gates.js';
import { checkOutput, outputCheckOf } from '../../src/plan/structured.js';

const plan = (accept: unknown) => ({
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' }, judge: { provider: 'sim', model: 'sim-judge' } },
  tasks: [{ id: 'a', model: 'fast', prompt: 'p', accept }],
});

describe('quality gates', () => {
  it('are the fields of accept in the shipped JSON Schema and in plan-format.md, in the same order', () => {
    const schema = JSON.parse(readFileSync('schema/plan.schema.json', 'utf8')) as { properties: { tasks: { items: { properties: { accept: { properties: Record<string, unknown> } } } } } };
    expect(Object.keys(schema.properties.tasks.items.properties.accept.properties)).toEqual(['minChars', 'pattern', 'judge']);
    expect(GATES.map((g) => g.field)).toEqual(['minChars', 'pattern', 'judge']);
    const doc = readFileSync('docs/plan-format.md', 'utf8');
    const section = doc.slice(doc.indexOf('### Quality gates (`accept`)'));
    for (const gate of GATES) expect(section).toMatch(new RegExp(`^\\| \`${gate.field}(\\.\\w+)?\` \\|`, 'm'));
  });

  it('run on the text here (minChars, pattern) or as a model call (judge)', () => {
    expect(TEXT_GATES.map((g) => g.field)).toEqual(['minChars', 'pattern']);
    // Only the text gates reach the answer's check; the judge goes to the agent.
    expect(outputCheckOf(undefined, { minChars: 3, pattern: 'x', judge: { model: 'judge', prompt: 'p', threshold: 0.5 } })).toEqual({ minChars: 3, pattern: 'x' });
    expect(outputCheckOf(undefined, {})).toBeUndefined();
  });

  it('each says what is wrong with an answer, every failing gate at once', () => {
    expect(checkOutput('ab', { minChars: 3, pattern: '^z' })).toEqual({
      ok: false,
      code: 'rejected_output',
      problems: ['the answer has 2 characters, fewer than the 3 required', 'the answer does not match the pattern /^z/'],
    });
    // minChars counts the answer trimmed; pattern reads the compact JSON of a structured one.
    expect(checkOutput('  abc  ', { minChars: 3 })).toEqual({ ok: true, text: '  abc  ' });
    expect(checkOutput('{ "a" : 1 }', { schema: { type: 'object' }, pattern: '^\\{"a":1\\}$' })).toEqual({ ok: true, text: '{"a":1}' });
  });

  it('are checked by validate, each at its path: a shape, a pattern that cannot run, a judge model not in models', () => {
    const result = validatePlan(plan({ minChars: 0, pattern: '(', judge: { model: 'judeg', prompt: 'p' } }));
    expect(result.ok).toBe(false);
    const messages = result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
    expect(messages).toContain('tasks[0].accept.minChars: must be a positive integer');
    expect(messages.some((m) => m.startsWith('tasks[0].accept.pattern: '))).toBe(true);
    expect(messages).toContain('tasks[0].accept.judge.model: unknown model "judeg" (did you mean "judge"?)');
    expect(validatePlan(plan({ nope: 1 })).ok).toBe(false);
    const ok = validatePlan(plan({ minChars: 1, pattern: 'a', judge: { model: 'judge', prompt: 'p' } }));
    expect(ok.ok).toBe(true);
    if (ok.ok) expect(ok.plan.tasks[0]!.accept).toEqual({ minChars: 1, pattern: 'a', judge: { model: 'judge', prompt: 'p', threshold: 0.7 } });
  });
});
