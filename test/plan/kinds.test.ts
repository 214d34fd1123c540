/**
 * Task kinds as modules (src/plan/kinds/): one file per kind behind one interface, one registry
 * that the schema, validate and the planner's checks read. What a kind says of itself (its
 * implicit deps, what its output is, whether a planner may emit it) is read through the registry.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parsePlan, parsedOutput, parseSubtasks, validatePlan, type PlannerContext } from '../../src/plan/index.js';
import { PLAN_KINDS, TASK_KIND_NAMES, implicitDepsOf, kindOf } from '../../src/plan/kinds/index.js';

const plan = (tasks: unknown[]) => ({ providers: { sim: { type: 'sim' } }, models: { m: { provider: 'sim', model: 'sim-fast' } }, tasks });
const lines = (tasks: unknown[], functions?: readonly string[]) => {
  const r = validatePlan(plan(tasks), functions ? { functions } : {});
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
};

describe('the kinds registry', () => {
  it('is one module per kind in src/plan/kinds/, and the schema takes exactly those kinds', () => {
    const modules = readdirSync('src/plan/kinds').filter((f) => !['index.ts', 'types.ts', 'common.ts', 'check.ts', 'watch.ts'].includes(f)).map((f) => f.replace(/\.ts$/, ''));
    expect(modules.sort()).toEqual(['approval', 'fn', 'map', 'plan', 'reduce', 'review', 'task']);
    expect(TASK_KIND_NAMES).toEqual(['task', 'plan', 'review', 'map', 'reduce', 'fn', 'approval']);
    expect(Object.keys(PLAN_KINDS)).toEqual(TASK_KIND_NAMES);
    expect(lines([{ id: 'a', kind: 'vote', model: 'm', prompt: 'x' }])).toEqual(['tasks[0].kind: must be "task", "plan", "review", "map", "reduce", "fn" or "approval"']);
  });

  it('says of each kind whether it calls a model and whether a planner may emit it', () => {
    const facts = Object.fromEntries(TASK_KIND_NAMES.map((k) => [k, [kindOf(k)!.callsModel, kindOf(k)!.asSubTask === true]]));
    expect(facts).toEqual({
      task: [true, true],
      plan: [true, true],
      review: [true, true],
      map: [false, false],
      reduce: [false, false],
      fn: [false, false],
      approval: [false, false],
    });
    expect(kindOf('vote')).toBeUndefined();
    expect(kindOf('constructor')).toBeUndefined();
  });

  it('gives each kind`s implicit deps: reviews, approves, items.from, over (an element ref as its task)', () => {
    expect(implicitDepsOf({ id: 'r', kind: 'review', reviews: 'a', deps: [] })).toEqual(['a']);
    expect(implicitDepsOf({ id: 'ok', kind: 'approval', approves: 'draft' })).toEqual(['draft']);
    expect(implicitDepsOf({ id: 'm', kind: 'map', items: { from: 'list' } })).toEqual(['list']);
    expect(implicitDepsOf({ id: 'm', kind: 'map', items: { values: [1] } })).toEqual([]);
    expect(implicitDepsOf({ id: 's', kind: 'reduce', over: ['a', 'b#2', 'b#3'] })).toEqual(['a', 'b']);
    expect(implicitDepsOf({ id: 's', kind: 'reduce', over: 'm' })).toEqual(['m']);
    expect(implicitDepsOf({ id: 'f', kind: 'fn', fn: 'go', deps: ['x'] })).toEqual([]);
    expect(implicitDepsOf({ id: 't', reviews: 'a' })).toEqual([]);
  });

  it('says what each kind`s output is in the result: JSON for fn, approval, map and a reduce with fn; text without a schema otherwise', () => {
    expect(parsedOutput({ kind: 'fn' }, '{"n":1}')).toEqual({ n: 1 });
    expect(parsedOutput({ kind: 'fn' }, '"text"')).toBe('text');
    expect(parsedOutput({ kind: 'approval' }, '{"approved":false,"note":"shorter"}')).toEqual({ approved: false, note: 'shorter' });
    expect(parsedOutput({ kind: 'map' }, '[1,2]')).toEqual([1, 2]);
    expect(parsedOutput({ kind: 'reduce', fn: 'merge' }, '[1,2]')).toEqual([1, 2]);
    expect(parsedOutput({ kind: 'reduce' }, '[1,2]')).toBe('[1,2]');
    expect(parsedOutput({ kind: 'task' }, '{"n":1}')).toBe('{"n":1}');
    expect(parsedOutput({ kind: 'task', output: { schema: {} } }, '{"n":1}')).toEqual({ n: 1 });
    expect(parsedOutput(undefined, '{"n":1}')).toBe('{"n":1}');
  });

  it('a map reads items from a fn task`s output, and a reduce merges one: fn outputs are JSON, so they may be arrays', () => {
    expect(
      lines([
        { id: 'fetch', kind: 'fn', fn: 'fetchOrders' },
        { id: 'each', kind: 'map', items: { from: 'fetch' }, model: 'm', prompt: 'about {{item}}' },
        { id: 'sum', kind: 'reduce', over: 'fetch', model: 'm', prompt: 'merge {{inputs}}' },
        { id: 'obj', kind: 'fn', fn: 'one', output: { schema: { type: 'object' } } },
        { id: 'each2', kind: 'map', items: { from: 'obj' }, model: 'm', prompt: '{{item}}' },
        { id: 'ok', kind: 'approval', approves: 'fetch', prompt: 'Fine?' },
        { id: 'each3', kind: 'map', items: { from: 'ok' }, model: 'm', prompt: '{{item}}' },
      ]),
    ).toEqual([
      'tasks[4].items.from: task "obj" cannot give a list of items: its output schema is not of type "array"',
      'tasks[6].items.from: task "ok" cannot give a list of items: an approval gives a decision',
    ]);
  });
});

describe('loading', () => {
  it('each plan module loads first in a fresh process (the kinds, the schema and the checks import each other)', async () => {
    // The build the global setup keeps current: a module that reads another before it is set up fails here.
    const modules = [
      ...readdirSync('src/plan/kinds').map((f) => `plan/kinds/${f}`),
      ...readdirSync('src/plan').filter((f) => f.endsWith('.ts')).map((f) => `plan/${f}`),
      'cli/functions.ts',
    ].map((f) => `./dist/src/${f.replace(/\.ts$/, '.js')}`);
    const outputs = await Promise.all(
      modules.map((m) => promisify(execFile)(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(m)}).catch((e) => console.log(e.message))`], { encoding: 'utf8' })),
    );
    const failed = outputs.flatMap(({ stdout }, i) => (stdout.trim() === '' ? [] : [`${modules[i]}: ${stdout.trim()}`]));
    expect(failed).toEqual([]);
  });
});

describe('a planner`s sub-tasks', () => {
  const base = parsePlan(plan([{ id: 'p', kind: 'plan', model: 'm', prompt: 'plan' }]));
  const ctx: PlannerContext = { plan: base, planner: { id: 'p', deps: [], depth: 0 }, existing: new Set(['p']), tools: [] };
  it('may not be a fn task nor an approval, nor carry their fields on another kind', () => {
    const r = parseSubtasks(
      JSON.stringify([
        { id: 'a', model: 'm', prompt: 'x' },
        { id: 'f', kind: 'fn', fn: 'anything' },
        { id: 'ok', kind: 'approval', approves: 'a', prompt: 'Fine?' },
        { id: 'b', model: 'm', prompt: 'x', fn: 'go', approves: 'a' },
      ]),
      ctx,
    );
    expect(r.ok ? [] : r.issues).toEqual([
      'tasks[3].fn: only a task with "kind": "map", "reduce" or "fn" names a function',
      'tasks[3].approves: only a task with "kind": "approval" approves another task',
      'tasks[1].kind: a sub-task cannot be a fn task (a function runs code in the run\'s process: only the plan itself names one)',
      'tasks[2].kind: a sub-task cannot be an approval task (only the plan itself asks a person to decide)',
    ]);
  });
});
