/**
 * `kind: "reduce"`: merges the outputs named in `over`: in a tree of model calls, `fanIn` inputs
 * per call, or in one call of the function named in `fn` with every input in `ctx.inputs`. Its
 * checks and its groups are src/plan/mapreduce.ts.
 */
import { checkReduce } from '../mapreduce.js';
import { FN_HINTS, fnOf, MODEL_CALL_FIELDS, modelAndPrompt, NONE, refusals, schemaNoArray, textUnlessSchema } from './common.js';
import { noOwnBudget } from './map.js';
import type { PlanKind } from './types.js';

const OWN = 'has this field';
const MODEL_ONLY = [...MODEL_CALL_FIELDS.filter((f) => f !== 'budgetUsd'), 'fanIn'];

export const reduce: PlanKind = {
  doc: 'merges the outputs named in `over`: in a tree of calls, `fanIn` per call, or in one call of the function named in `fn`',
  fields: { over: OWN, fanIn: OWN, fn: 'names a function' },
  callsModel: false,
  runs: 'model-or-fn',
  asSubTask: 'give the plan itself the map or reduce',
  requires: { over: 'required: the map (or task with a JSON array output, or list of tasks) whose outputs this reduce merges' },
  required: (t) => (fnOf(t) === undefined ? modelAndPrompt(t, 'required (or "fn": a function that merges the inputs)') : NONE),
  refused(t) {
    const out = noOwnBudget(t, 'reduce');
    const fn = fnOf(t);
    if (fn !== undefined) {
      out.push(...refusals(t, MODEL_ONLY, `this reduce runs function "${fn}" once on all its inputs, not a model`, {
        ...FN_HINTS,
        prompt: 'the function reads the inputs in ctx.inputs',
        fanIn: 'there is no tree of calls: ctx.inputs holds every input',
      }));
    }
    return out;
  },
  implicitDeps(t) {
    // A group's inputs may be elements of a task's array output (`<id>#<n>`): it depends on the task.
    const over = typeof t.over === 'string' ? [t.over] : Array.isArray(t.over) ? t.over.filter((x): x is string => typeof x === 'string') : [];
    return [...new Set(over.map((x) => x.split('#')[0]!))].map((id) => ({ id, path: ['over'] }));
  },
  madeUnder: (id) => `reduce "${id}", whose groups the run names "${id}/L<level>/<n>"`,
  output: (t) => (t.fn !== undefined ? 'json' : textUnlessSchema(t)),
  noArray: (t) => (fnOf(t) !== undefined ? schemaNoArray(t) : 'a reduce gives one merged text'),
  check: checkReduce,
};
