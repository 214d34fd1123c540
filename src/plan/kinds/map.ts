/**
 * `kind: "map"`: one step per item of `items` (a file, a task's output, inline): a model call on
 * the prompt with the item filled in, or the function named in `fn` with the item in `ctx.item`.
 * Its output is the array of its items' outputs. Its checks and expansion are src/plan/mapreduce.ts.
 */
import { isRecord } from '../problems.js';
import { checkMap } from '../mapreduce.js';
import { FN_HINTS, fnOf, MODEL_CALL_FIELDS, modelAndPrompt, NONE, refusals } from './common.js';
import type { FieldProblem, PlanKind } from './types.js';

const OWN = 'has this field';
const ON_ITEM = 'the function reads the item in ctx.item';
const MODEL_ONLY = [...MODEL_CALL_FIELDS.filter((f) => f !== 'budgetUsd'), 'as'];

/** Map and reduce: a task that calls no model itself, only its sub-tasks do. */
export function noOwnBudget(t: Record<string, unknown>, kind: string): FieldProblem[] {
  return t.budgetUsd === undefined ? [] : [{ field: 'budgetUsd', message: `a ${kind} calls no model itself: its sub-tasks' calls count against the run's and the models' budgets` }];
}

export const map: PlanKind = {
  doc: 'one step per item of `items`: a model call on its prompt, or the function named in `fn`',
  fields: { items: OWN, as: OWN, maxItems: OWN, key: OWN, dedupe: OWN, fn: 'names a function' },
  callsModel: false,
  runs: 'model-or-fn',
  asSubTask: 'give the plan itself the map or reduce',
  requires: { items: 'required: {"file": "items.jsonl"}, {"from": "<task id>"} or {"values": [...]}' },
  required: (t) => (fnOf(t) === undefined ? modelAndPrompt(t, 'required (or "fn": a function to run on each item)') : NONE),
  refused(t) {
    const out = noOwnBudget(t, 'map');
    const fn = fnOf(t);
    if (fn !== undefined) out.push(...refusals(t, MODEL_ONLY, `this map runs function "${fn}" on each item, not a model`, { ...FN_HINTS, prompt: ON_ITEM, as: ON_ITEM }));
    return out;
  },
  implicitDeps: (t) => (isRecord(t.items) && typeof t.items.from === 'string' ? [{ id: t.items.from, path: ['items'] }] : []),
  madeUnder: (id) => `map "${id}", whose items the run names "${id}/<index>" or "${id}/<key>"`,
  output: () => 'json',
  noArray: () => undefined,
  check: checkMap,
};
