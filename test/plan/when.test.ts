/**
 * `when` and `after` in a plan (src/plan/when.ts, schema.ts): what validation accepts, and each
 * bad input as one line naming its path, every problem at once, before anything runs.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { validatePlan, type PlanInput } from '../../src/plan/index.js';
import { parseSubtasks } from '../../src/plan/subtasks.js';
import { checkWhen } from '../../src/plan/when.js';
import { resolveTask } from '../../src/resolve.js';
import { ROOT } from '../store/helpers.js';

const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv');

const ENV = { KEY_A: 'k' };
const classify = {
  type: 'object',
  properties: { urgency: { type: 'string', enum: ['low', 'high'] }, tags: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' } }, additionalProperties: false } } },
  required: ['urgency'],
  additionalProperties: false,
};

function plan(tasks: unknown[]): any {
  return {
    providers: { main: { type: 'anthropic', keys: [{ env: 'KEY_A' }] } },
    models: { fast: { provider: 'main', model: 'claude-haiku-4-5' } },
    tasks: [
      { id: 'classify', model: 'fast', prompt: 'Classify', output: { schema: classify } },
      { id: 'text', model: 'fast', prompt: 'Say something' },
      { id: 'items', kind: 'map', model: 'fast', items: { values: [1, 2] }, prompt: 'do {{item}}', output: { schema: { type: 'object', properties: { id: { type: 'string' } } } } },
      ...tasks,
    ],
  };
}

const lines = (tasks: unknown[]) => {
  const result = validatePlan(plan(tasks), { env: ENV });
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
};

const task = (extra: Record<string, unknown>) => ({ id: 't', model: 'fast', prompt: 'go', deps: ['classify', 'text', 'items'], ...extra });

describe('valid conditions and joins', () => {
  it('accepts every operator, the combinators, paths into schemas and a map\'s array, whole outputs, and joins', () => {
    expect(
      lines([
        task({ id: 'a', when: { task: 'classify', path: 'urgency', in: ['high'] } }),
        task({ id: 'b', when: { all: [{ task: 'classify', path: 'tags.0.id', exists: true }, { not: { task: 'text', equals: 'no' } }] } }),
        task({ id: 'c', when: { any: [{ task: 'items', path: '1.id', notEquals: null }, { task: 'items', equals: [] }, { task: 'classify', equals: { urgency: 'low' } }] } }),
        { id: 'j', model: 'fast', prompt: 'join', deps: ['a', 'b'], after: 'any' },
        { id: 'k', model: 'fast', prompt: 'all', deps: ['a'], after: 'all' },
      ]),
    ).toEqual([]);
  });

  it('resolves when and after onto the supervised task (after only when it is "any")', () => {
    const result = validatePlan(plan([task({ id: 'a', when: { task: 'classify', path: 'urgency', equals: 'high' } }), { id: 'j', model: 'fast', prompt: 'j', deps: ['a', 'text'], after: 'any' }]), { env: ENV });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const [a, j, text] = ['a', 'j', 'text'].map((id) => resolveTask(result.plan, result.plan.tasks.find((t) => t.id === id)!, 1, {}));
    expect(a).toMatchObject({ when: { task: 'classify', path: 'urgency', equals: 'high' } });
    expect(a).not.toHaveProperty('after');
    expect(j).toMatchObject({ after: 'any' });
    expect(text).not.toHaveProperty('when');
  });

  it('reads a zod output schema as the JSON Schema it becomes', () => {
    const p = plan([task({ id: 'z', deps: ['zod'], when: { task: 'zod', path: 'level', equals: 2 } })]);
    p.tasks.push({ id: 'zod', model: 'fast', prompt: 'p', output: { schema: z.object({ level: z.number() }) } });
    expect(validatePlan(p, { env: ENV }).ok).toBe(true);
    p.tasks[3].when.path = 'lvl';
    const result = validatePlan(p, { env: ENV });
    expect(result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'tasks[3].when.path: the output.schema of task "zod" has no field "lvl" (its fields: level)',
    ]);
  });
});

describe('bad input: one line each, naming its path', () => {
  it('a task not in deps, an unknown task, the task itself', () => {
    expect(lines([task({ deps: ['text'], when: { task: 'classify', path: 'urgency', equals: 'high' } })])).toEqual([
      'tasks[3].when.task: "classify" is not in deps: a condition reads a dep\'s output (add "classify" to deps)',
    ]);
    expect(lines([task({ when: { any: [{ task: 'clasify', equals: 1 }, { task: 't', exists: true }] } })])).toEqual([
      'tasks[3].when.any[0].task: unknown task "clasify" (did you mean "classify"?)',
      'tasks[3].when.any[1].task: a condition reads a dep\'s output, not the task\'s own',
    ]);
  });

  it('a path the dep\'s schema does not have, a path into a text output, a path that is not a dotted path', () => {
    expect(
      lines([
        task({ id: 'p1', when: { task: 'classify', path: 'urgncy', equals: 'high' } }),
        task({ id: 'p2', when: { task: 'classify', path: 'tags.0.name', exists: true } }),
        task({ id: 'p3', when: { task: 'text', path: 'answer', equals: 'yes' } }),
        task({ id: 'p4', when: { task: 'items', path: 'first', exists: true } }),
        task({ id: 'p5', when: { task: 'classify', path: 'a..b', exists: true } }),
      ]),
    ).toEqual([
      'tasks[7].when.path: must be a dotted path of field names and array indexes, e.g. "items.0.id"',
      'tasks[3].when.path: the output.schema of task "classify" has no field "urgncy" (its fields: urgency, tags)',
      'tasks[4].when.path: the output.schema of task "classify" has no field "name" under "tags.0" (its fields: id)',
      'tasks[5].when.path: task "text" has no output.schema: its output is text, with no fields (leave "path" out to compare the whole text, or give "text" an output schema)',
      'tasks[6].when.path: the output of map "items" is the array of its items\' outputs: it has no field "first"',
    ]);
  });

  it('an operator missing, two operators, an unknown one, in not an array, exists not a boolean, a value that is not JSON', () => {
    expect(
      lines([
        task({ id: 'o1', when: { task: 'classify' } }),
        task({ id: 'o2', when: { task: 'classify', equals: 1, in: [1] } }),
        task({ id: 'o3', when: { task: 'classify', equal: 1 } }),
        task({ id: 'o4', when: { task: 'classify', path: 'urgency', in: 'high' } }),
        task({ id: 'o5', when: { task: 'classify', exists: 'yes' } }),
        task({ id: 'o6', when: { task: 'classify', equals: 1, all: [{ task: 'text', exists: true }] } }),
        task({ id: 'o7', when: { any: [] } }),
        task({ id: 'o8', when: { equals: 1 } }),
        task({ id: 'o9', when: 'urgent' }),
      ]),
    ).toEqual([
      'tasks[3].when: a test needs one operator: "equals", "notEquals", "in" or "exists"',
      'tasks[4].when: a test takes one operator, this one has "equals" and "in" (combine tests with "all")',
      'tasks[5].when.equal: unknown field (did you mean "equals"?)',
      'tasks[6].when.in: "in" takes an array of values, e.g. ["high", "critical"]',
      'tasks[7].when.exists: expected a boolean, got a string',
      'tasks[8].when: "all" combines conditions and takes no other field: put "task", "path" and the operator in a condition inside it',
      'tasks[9].when.any: must list at least one condition',
      'tasks[10].when.task: required: the dep whose output the test reads',
      'tasks[11].when: a condition is an object: a test {"task", "path", and one of "equals", "notEquals", "in", "exists"}, or {"all": [...]}, {"any": [...]}, {"not": {...}}',
    ]);
    const p = plan([task({ when: { task: 'classify', equals: () => 1 } })]);
    const result = validatePlan(p, { env: ENV });
    expect(result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`)).toEqual(['tasks[3].when.equals: must be a JSON value (a string, number, boolean, null, array or object)']);
  });

  it('a condition that can never be true; a join with fewer than 2 deps; a join no branch can reach; after neither all nor any', () => {
    expect(
      lines([
        task({ id: 'never', when: { task: 'classify', path: 'urgency', in: [] } }),
        task({ id: 'never2', when: { all: [{ task: 'classify', exists: true }, { any: [{ task: 'text', in: [] }] }] } }),
        { id: 'one', model: 'fast', prompt: 'j', deps: ['classify'], after: 'any' },
        { id: 'dead', model: 'fast', prompt: 'j', deps: ['never', 'after-never'], after: 'any' },
        { id: 'after-never', model: 'fast', prompt: 'x', deps: ['never2', 'text'] },
        { id: 'odd', model: 'fast', prompt: 'j', deps: ['classify', 'text'], after: 'some' },
      ]),
    ).toEqual([
      'tasks[8].after: must be "all" (the default: every dep completes first) or "any" (a join: once every dep has ended and one completed)',
      'tasks[3].when: can never be true ("in": [] matches nothing): the task would always be skipped',
      'tasks[4].when: can never be true ("in": [] matches nothing): the task would always be skipped',
      'tasks[5].after: "any" joins branches: a join needs at least 2 deps (it has 1)',
      'tasks[6].after: no branch can reach this join: none of its deps can complete ("never", "after-never"), a condition that can never be true is on the way of each',
    ]);
  });

  it('a planner\'s sub-tasks are checked alike, and their conditions name the sub-tasks as they run', () => {
    const result = validatePlan(plan([]), { env: ENV });
    if (!result.ok) throw new Error('the base plan is valid');
    const ctx = { plan: result.plan, planner: { id: 'pl', deps: ['classify'], depth: 0 }, existing: new Set(['classify', 'pl']), tools: [] };
    const good = parseSubtasks(
      JSON.stringify([
        { id: 'a', model: 'fast', prompt: 'a', output: { schema: { type: 'object', properties: { ok: { type: 'boolean' } } } } },
        { id: 'b', model: 'fast', prompt: 'b', deps: ['a', 'classify'], when: { all: [{ task: 'a', path: 'ok', equals: true }, { task: 'classify', path: 'anything', exists: true }] } },
      ]),
      ctx,
    );
    expect(good.ok && good.tasks[1]!.when).toEqual({ all: [{ task: 'pl/a', path: 'ok', equals: true }, { task: 'classify', path: 'anything', exists: true }] });
    const bad = parseSubtasks(JSON.stringify([{ id: 'a', model: 'fast', prompt: 'a' }, { id: 'b', model: 'fast', prompt: 'b', when: { task: 'a', path: 'x', equals: 1 } }]), ctx);
    expect(bad).toEqual({ ok: false, issues: ['tasks[1].when.task: "a" is not in deps: a condition reads a dep\'s output (add "a" to deps)'] });
  });
});

describe('a function step\'s output', () => {
  it('is JSON: without an output.schema any path into it passes, with one the schema says', () => {
    const tasks = [
      { id: 'f', kind: 'fn', fn: 'pick' },
      { id: 'g', kind: 'fn', fn: 'pick', output: { schema: { type: 'object', properties: { ok: { type: 'boolean' } }, additionalProperties: false } } },
      { id: 'a', model: 'fast', prompt: 'a', deps: ['f', 'g'], when: { all: [{ task: 'f', path: '0.id', exists: true }, { task: 'g', path: 'nope', exists: true }] } },
    ];
    const out: { path: string; message: string }[] = [];
    checkWhen(tasks[2]!, 2, new Set(['f', 'g']), new Map([['f', 0], ['g', 1], ['a', 2]]), tasks, out);
    expect(out).toEqual([{ path: 'tasks[2].when.all[1].path', message: 'the output.schema of task "g" has no field "nope" (its fields: ok)' }]);
  });
});

describe('the plan\'s JSON Schema (schema/plan.schema.json)', () => {
  it('takes when (nested, to any depth) and after, and refuses an unknown operator or after value', () => {
    const shipped = JSON.parse(readFileSync(join(ROOT, 'schema/plan.schema.json'), 'utf8')) as Record<string, unknown>;
    const check = new Ajv({ allErrors: true, strict: false, validateFormats: false }).compile(shipped);
    const withTask = (extra: Record<string, unknown>) => plan([task(extra)]);
    const deep = { all: [{ any: [{ not: { task: 'classify', path: 'tags.0.id', in: ['a', null, { x: [1] }] } }, { task: 'text', exists: false }] }] };
    expect(check(withTask({ when: deep, after: 'any' })), JSON.stringify(check.errors)).toBe(true);
    expect(check(withTask({ when: { task: 'classify', equal: 1 } }))).toBe(false);
    expect(check(withTask({ when: { all: [{ task: 'classify', equals: 1, bogus: true }] } }))).toBe(false);
    expect(check(withTask({ after: 'some' }))).toBe(false);
  });
});

describe('types', () => {
  it('a plan written in code takes when and after on every kind', () => {
    const p: PlanInput = {
      providers: { main: { type: 'sim' } },
      models: { fast: { provider: 'main', model: 'm' } },
      tasks: [
        { id: 'a', model: 'fast', prompt: 'a' },
        { id: 'b', model: 'fast', prompt: 'b', deps: ['a'], when: { task: 'a', equals: 'yes' } },
        { id: 'c', kind: 'reduce', model: 'fast', prompt: 'c', over: ['a', 'b'], after: 'any' },
      ],
    };
    expect(validatePlan(p, { env: ENV }).ok).toBe(true);
  });
});
