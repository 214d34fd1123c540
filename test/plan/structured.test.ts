/**
 * Structured outputs and quality gates in a plan: what `validate` says of a schema, an `accept`
 * and a `{{task.field}}` placeholder, and the pure checks an answer meets (src/plan/structured.ts)
 * and the field placement of prompts (machines/prompt.ts).
 */
import { describe, expect, it } from 'vitest';
import { validatePlan, type PlanInput } from '../../src/plan/index.js';
import { checkOutput, fieldPathProblem, parsedOutput, unfenced } from '../../src/plan/structured.js';
import { renderPrompt, fillPlaceholders } from '../../machines/prompt.js';
import { scoreOf } from '../../machines/judge.js';

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string' },
    meta: { type: 'object', properties: { lang: { type: 'string' } }, additionalProperties: false },
    items: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } },
    free: { type: 'object' },
  },
  required: ['title'],
};

function planWith(tasks: unknown[], models: Record<string, unknown> = {}): any {
  const plan: PlanInput = {
    providers: { sim: { type: 'sim' } },
    models: { fast: { provider: 'sim', model: 'sim-fast' } },
    tasks: [{ id: 'a.v1', model: 'fast', prompt: 'A', output: { schema } }],
  };
  const raw = structuredClone(plan) as any;
  Object.assign(raw.models, models);
  raw.tasks.push(...tasks);
  return raw;
}

function lines(raw: unknown): string[] {
  const result = validatePlan(raw, { env: {} });
  if (result.ok) return [];
  return result.issues.map((i) => `${i.path}: ${i.message}`);
}

describe('validate: output, accept and field placeholders', () => {
  it('accepts known field paths, nested and by array index, of a dep whose id has dots', () => {
    const raw = planWith([{ id: 'b', model: 'fast', deps: ['a.v1'], prompt: '{{a.v1.title}} {{a.v1.meta.lang}} {{a.v1.items.0.sku}} {{a.v1.free.anything}} {{a.v1}}' }]);
    expect(lines(raw)).toEqual([]);
    const ok = validatePlan(raw, { env: {} });
    expect(ok.ok && ok.plan.tasks[0]!.output).toEqual({ schema });
  });

  it('rejects a field path the schema does not have, with its path', () => {
    const raw = planWith([
      { id: 'b', model: 'fast', deps: ['a.v1'], prompt: '{{a.v1.titel}} {{a.v1.meta.language}} {{a.v1.title.x}}' },
      { id: 'c', model: 'fast', deps: ['b'], system: 'see {{b.summary}}', prompt: 'C' },
      { id: 'd', model: 'fast', prompt: '{{a.v1.title}}' },
    ]);
    expect(lines(raw)).toEqual([
      'tasks[1].prompt: {{a.v1.titel}}: the output.schema of task "a.v1" has no field "titel" (its fields: title, meta, items, free)',
      'tasks[1].prompt: {{a.v1.meta.language}}: the output.schema of task "a.v1" has no field "language" under "meta" (its fields: lang)',
      'tasks[1].prompt: {{a.v1.title.x}}: the output.schema of task "a.v1" has no field "x" under "title"',
      'tasks[2].system: {{b.summary}} reads field "summary" of task "b", which has no output.schema: give it one, or use {{b}}',
      'tasks[3].prompt: {{a.v1}} names task "a.v1", which is not in deps: add it to deps so its output is ready',
    ]);
  });

  it('rejects a schema that is not a valid JSON Schema, with the path inside it', () => {
    const raw = planWith([
      { id: 'b', model: 'fast', prompt: 'B', output: { schema: { type: 'object', properties: { n: { type: 'numbr' } } } } },
      { id: 'c', model: 'fast', prompt: 'C', output: { schema: { type: 'object', required: 'title' } } },
      { id: 'd', model: 'fast', prompt: 'D', output: { schema: { $ref: '#/definitions/missing' } } },
      { id: 'e', model: 'fast', prompt: 'E', output: { schema: 'object' } },
      { id: 'f', model: 'fast', prompt: 'F', output: {} },
    ]);
    const out = lines(raw);
    expect(out).toContainEqual(expect.stringMatching(/^tasks\[1\]\.output\.schema\.properties\.n\.type: not a valid JSON Schema: /));
    expect(out).toContainEqual(expect.stringMatching(/^tasks\[2\]\.output\.schema\.required: not a valid JSON Schema: must be array/));
    expect(out).toContainEqual(expect.stringMatching(/^tasks\[3\]\.output\.schema: the schema does not compile: .*missing/));
    expect(out).toContainEqual('tasks[4].output.schema: must be a JSON Schema object');
    expect(out).toContainEqual(expect.stringMatching(/^tasks\[5\]\.output\.schema: /));
  });

  it('checks accept: a known judge model, a valid pattern, a threshold in [0, 1], a positive minChars', () => {
    const raw = planWith([
      { id: 'b', model: 'fast', prompt: 'B', accept: { minChars: 0, pattern: '([a-z', judge: { model: 'jugde', prompt: 'good?', threshold: 1.5 } } },
      { id: 'c', model: 'fast', prompt: 'C', accept: { judge: { model: 'fast' } } },
    ]);
    expect(lines(raw)).toEqual(
      expect.arrayContaining([
        'tasks[1].accept.minChars: must be a positive integer',
        expect.stringMatching(/^tasks\[1\]\.accept\.pattern: not a valid regular expression: /),
        'tasks[1].accept.judge.model: unknown model "jugde"',
        'tasks[1].accept.judge.threshold: must be a score in [0, 1]',
        expect.stringMatching(/^tasks\[2\]\.accept\.judge\.prompt: /),
      ]),
    );
    const ok = validatePlan(planWith([{ id: 'b', model: 'fast', prompt: 'B', accept: { judge: { model: 'fast', prompt: 'good?' } } }]), { env: {} });
    expect(ok.ok && ok.plan.tasks[1]!.accept).toEqual({ judge: { model: 'fast', prompt: 'good?', threshold: 0.7 } });
  });
});

describe('checkOutput', () => {
  it('keeps a valid answer as compact JSON, fenced or not', () => {
    expect(checkOutput('{ "title": "x" }', { schema })).toEqual({ ok: true, text: '{"title":"x"}' });
    expect(checkOutput('```json\n{"title": "x"}\n```', { schema })).toEqual({ ok: true, text: '{"title":"x"}' });
    expect(unfenced('  ```\n[1, 2]\n```  ')).toBe('[1, 2]');
  });

  it('names every problem of an invalid answer', () => {
    const verdict = checkOutput('{"meta": {"lang": 1, "x": 2}}', { schema });
    expect(verdict.ok).toBe(false);
    if (verdict.ok) return;
    expect(verdict.code).toBe('invalid_output');
    expect(verdict.problems).toEqual(
      expect.arrayContaining(["the JSON must have required property 'title'", 'the JSON at /meta/lang must be string', "the JSON at /meta must NOT have additional property 'x'"]),
    );
    expect(checkOutput('sure! {"title": "x"}', { schema })).toMatchObject({ ok: false, code: 'invalid_output' });
  });

  it('applies minChars and pattern after the schema', () => {
    expect(checkOutput('abc', { minChars: 4 })).toEqual({ ok: false, code: 'rejected_output', problems: ['the answer has 3 characters, fewer than the 4 required'] });
    expect(checkOutput('abcd', { minChars: 4, pattern: '^a' })).toEqual({ ok: true, text: 'abcd' });
    expect(checkOutput('{"title":"no"}', { schema, pattern: '"title":"yes"' })).toMatchObject({ ok: false, code: 'rejected_output' });
  });

  it('parsedOutput: the value of a structured output, the text otherwise', () => {
    expect(parsedOutput({ output: { schema } }, '{"title":"x"}')).toEqual({ title: 'x' });
    expect(parsedOutput({}, '{"title":"x"}')).toBe('{"title":"x"}');
    expect(parsedOutput({ output: { schema } }, 'not json')).toBe('not json');
  });

  it('fieldPathProblem follows properties and items', () => {
    expect(fieldPathProblem(schema, ['items', '3', 'sku'])).toBeUndefined();
    expect(fieldPathProblem(schema, ['items', 'x'])).toMatch(/has no field "x" under "items"/);
  });
});

describe('field placeholders in prompts', () => {
  const outputs: Record<string, string> = { 'a.v1': '{"title":"T","meta":{"lang":"en"},"items":[{"sku":"S1"}],"n":3}', a: 'plain', b: 'B' };
  const outputOf = (id: string) => outputs[id]!;

  it('places one field (the longest dep id prefix wins), a string as it is, anything else as JSON', () => {
    expect(renderPrompt('{{a.v1.title}} {{a.v1.meta}} {{a.v1.items.0.sku}} {{a.v1.n}} {{a.v1.nope}}', ['a', 'a.v1'], outputOf)).toBe(
      'T {"lang":"en"} S1 3 \n\n<dep id="a">\nplain\n</dep>',
    );
  });

  it('a dep read by field is placed (not appended); other deps still are', () => {
    expect(renderPrompt('x {{a.v1.title}}', ['a.v1', 'b'], outputOf)).toBe('x T\n\n<dep id="b">\nB\n</dep>');
    expect(fillPlaceholders('{{a.v1.title}} {{other.x}}', ['a.v1'], outputOf)).toBe('T {{other.x}}');
  });
});

describe('judge scores', () => {
  it('reads {"score"} or the first number, in [0, 1] only', () => {
    expect(scoreOf('0.8')).toEqual({ score: 0.8 });
    expect(scoreOf('Score: 1')).toEqual({ score: 1 });
    expect(scoreOf('{"score": 0.4, "reason": "thin"}')).toEqual({ score: 0.4, reason: 'thin' });
    expect(scoreOf('8/10')).toEqual({});
    expect(scoreOf('great')).toEqual({});
  });
});
