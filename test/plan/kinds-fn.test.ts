/**
 * `kind: "fn"` in the plan: a task that runs a function, a map whose per-item step is one, a
 * reduce whose merge is one; the fields a function does not take refused one by one; the
 * function's name checked against the functions given (`validatePlan(plan, { functions })`).
 */
import { describe, expect, it } from 'vitest';
import { validatePlan, type PlanIssue } from '../../src/plan/index.js';

const plan = (tasks: unknown[]) => ({ providers: { sim: { type: 'sim' } }, models: { m: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 1 } } }, tasks });
const lines = (tasks: unknown[], opts: Parameters<typeof validatePlan>[1] = {}) => {
  const r = validatePlan(plan(tasks), opts);
  return r.ok ? [] : r.issues.map((i: PlanIssue) => `${i.path}: ${i.message}`);
};

describe('a fn task', () => {
  it('is valid with a name and deps, an output schema, retries, a timeout and a priority; it needs no model nor prompt', () => {
    const r = validatePlan(
      plan([
        { id: 'brief', model: 'm', prompt: 'x' },
        { id: 'fetch', kind: 'fn', fn: 'fetchOrders', deps: ['brief'], output: { schema: { type: 'array' } }, maxRetries: 2, timeoutMs: 5000, priority: 3 },
        { id: 'sum', model: 'm', prompt: 'sum {{fetch}}', deps: ['fetch'] },
        { id: 'dollar', kind: 'fn', fn: '$_x9' },
      ]),
    );
    expect(r.ok, JSON.stringify(!r.ok && r.issues)).toBe(true);
    if (r.ok) expect(r.plan.tasks[1]).toEqual({ id: 'fetch', kind: 'fn', fn: 'fetchOrders', deps: ['brief'], output: { schema: { type: 'array' } }, maxRetries: 2, timeoutMs: 5000, priority: 3, tools: [] });
  });

  it('needs a function name, a JavaScript export name', () => {
    expect(lines([{ id: 'f', kind: 'fn' }, { id: 'g', kind: 'fn', fn: 'fetch-orders' }, { id: 'h', kind: 'fn', fn: '9lives' }, { id: 'i', kind: 'fn', fn: '' }])).toEqual([
      'tasks[1].fn: must be a function\'s name: letters, digits, "_" and "$", not starting with a digit',
      'tasks[2].fn: must be a function\'s name: letters, digits, "_" and "$", not starting with a digit',
      'tasks[3].fn: must be a function\'s name: letters, digits, "_" and "$", not starting with a digit',
      'tasks[0].fn: required: the name of the function this task runs',
    ]);
  });

  it('refuses every field of a model call, each with its own line', () => {
    expect(
      lines([
        {
          id: 'f', kind: 'fn', fn: 'go', model: 'm', system: 's', prompt: 'p', tools: ['t'], maxTurns: 2, maxTokens: 10, maxInputTokens: 10, budgetUsd: 1, accept: { minChars: 3 },
        },
      ]),
    ).toEqual([
      'tasks[0].model: a "fn" task runs a function, not a model: it has no "model"',
      'tasks[0].system: a "fn" task runs a function, not a model: it has no "system"',
      'tasks[0].prompt: a "fn" task runs a function, not a model: it has no "prompt" (the function reads its deps\' outputs in ctx.deps)',
      'tasks[0].tools: a "fn" task runs a function, not a model: it has no "tools" (the function calls what it needs itself)',
      'tasks[0].maxTurns: a "fn" task runs a function, not a model: it has no "maxTurns"',
      'tasks[0].maxTokens: a "fn" task runs a function, not a model: it has no "maxTokens"',
      'tasks[0].maxInputTokens: a "fn" task runs a function, not a model: it has no "maxInputTokens"',
      'tasks[0].budgetUsd: a "fn" task runs a function, not a model: it has no "budgetUsd" (a function costs nothing)',
      'tasks[0].accept: a "fn" task runs a function, not a model: it has no "accept" (check the value with "output": {"schema": ...}, or in the function)',
    ]);
  });

  it('is refused the fields of other kinds, and its own field is refused on a plain task', () => {
    expect(lines([{ id: 'a', model: 'm', prompt: 'x' }, { id: 'f', kind: 'fn', fn: 'go', items: { values: [1] }, reviews: 'a' }, { id: 't', model: 'm', prompt: 'x', fn: 'go' }])).toEqual([
      'tasks[1].reviews: only a task with "kind": "review" reviews another task',
      'tasks[1].items: only a task with "kind": "map" has this field',
      'tasks[2].fn: only a task with "kind": "map", "reduce" or "fn" names a function',
    ]);
  });
});

describe('a map or a reduce naming a function', () => {
  it('is valid without model and prompt: a map runs it on each item, a reduce once on all inputs', () => {
    const r = validatePlan(
      plan([
        { id: 'each', kind: 'map', items: { values: [{ id: 1 }, { id: 2 }] }, key: 'id', fn: 'enrich', output: { schema: { type: 'object' } } },
        { id: 'all', kind: 'reduce', over: 'each', fn: 'mergeAll' },
      ]),
    );
    expect(r.ok, JSON.stringify(!r.ok && r.issues)).toBe(true);
  });

  it('refuses a model call`s fields beside the function, `as` on a map and `fanIn` on a reduce', () => {
    expect(
      lines([
        { id: 'each', kind: 'map', items: { values: [1] }, fn: 'enrich', model: 'm', prompt: 'about {{item}}', as: 'row' },
        { id: 'all', kind: 'reduce', over: 'each', fn: 'mergeAll', prompt: 'merge {{inputs}}', fanIn: 4, tools: ['t'] },
      ]),
    ).toEqual([
      'tasks[0].model: this map runs function "enrich" on each item, not a model: it has no "model"',
      'tasks[0].prompt: this map runs function "enrich" on each item, not a model: it has no "prompt" (the function reads the item in ctx.item)',
      'tasks[0].as: this map runs function "enrich" on each item, not a model: it has no "as" (the function reads the item in ctx.item)',
      'tasks[1].prompt: this reduce runs function "mergeAll" once on all its inputs, not a model: it has no "prompt" (the function reads the inputs in ctx.inputs)',
      'tasks[1].tools: this reduce runs function "mergeAll" once on all its inputs, not a model: it has no "tools" (the function calls what it needs itself)',
      'tasks[1].fanIn: this reduce runs function "mergeAll" once on all its inputs, not a model: it has no "fanIn" (there is no tree of calls: ctx.inputs holds every input)',
    ]);
  });

  it('without a function needs a model and a prompt, and says a function would do', () => {
    expect(lines([{ id: 'each', kind: 'map', items: { values: [1] } }, { id: 'all', kind: 'reduce', over: 'each', model: 'm' }])).toEqual([
      'tasks[0].model: required (or "fn": a function to run on each item)',
      'tasks[0].prompt: required (or "fn": a function to run on each item)',
      'tasks[1].prompt: required (or "fn": a function that merges the inputs)',
    ]);
  });
});

describe('the functions given', () => {
  const tasks = [
    { id: 'fetch', kind: 'fn', fn: 'fetchOrders' },
    { id: 'each', kind: 'map', items: { from: 'fetch' }, fn: 'enrich' },
    { id: 'all', kind: 'reduce', over: 'each', fn: 'mergeAll' },
  ];

  it('are not checked when none are given', () => {
    expect(lines(tasks)).toEqual([]);
  });

  it('name every function of the plan: names as a list or as the functions themselves', () => {
    expect(lines(tasks, { functions: ['fetchOrders', 'enrich', 'mergeAll'] })).toEqual([]);
    const fn = () => null;
    expect(lines(tasks, { functions: { fetchOrders: fn, enrich: fn, mergeAll: fn, extra: fn } })).toEqual([]);
  });

  it('report each name not among them, at its path, with the names given', () => {
    expect(lines(tasks, { functions: ['fetchOrder', 'enrich'] })).toEqual([
      'tasks[0].fn: no function "fetchOrders" (did you mean "fetchOrder"?): the functions given are fetchOrder, enrich',
      'tasks[2].fn: no function "mergeAll": the functions given are fetchOrder, enrich',
    ]);
  });

  it('an empty set, or a record whose entry is not a function, gives none of those names', () => {
    expect(lines(tasks.slice(0, 1), { functions: [] })).toEqual([
      'tasks[0].fn: no function "fetchOrders": no functions were given (createSwarm({ functions }) in code, --functions <file> on the command line)',
    ]);
    expect(lines(tasks.slice(0, 1), { functions: { fetchOrders: 'not a function' } as never })).toEqual([
      'tasks[0].fn: no function "fetchOrders": no functions were given (createSwarm({ functions }) in code, --functions <file> on the command line)',
    ]);
  });

  it('lists at most 20 names given', () => {
    const many = Array.from({ length: 25 }, (_, i) => `f${i}`);
    expect(lines(tasks.slice(0, 1), { functions: many })).toEqual([
      `tasks[0].fn: no function "fetchOrders": the functions given are ${many.slice(0, 20).join(', ')} and 5 more`,
    ]);
  });
});
