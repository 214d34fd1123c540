/**
 * `kind: "fn"`: a code step. It runs the function named in `fn` (given to createSwarm, or by the
 * CLI's `--functions` module) with its deps' outputs; its return value, JSON, is its output. It
 * calls no model, so the fields of a model call are refused.
 */
import { FN_HINTS, MODEL_CALL_FIELDS, NONE, refusals, schemaNoArray } from './common.js';
import type { PlanKind } from './types.js';

export const fn: PlanKind = {
  doc: 'runs the function named in `fn` (code, no model) on its deps\' outputs; its return value (JSON) is its output',
  fields: { fn: 'names a function' },
  callsModel: false,
  runs: 'fn',
  // A planner is a model: what code the run executes is for the plan's author to say.
  asSubTask: "a function runs code in the run's process: only the plan itself names one",
  requires: { fn: 'required: the name of the function this task runs' },
  required: () => NONE,
  refused: (t) => refusals(t, MODEL_CALL_FIELDS, 'a "fn" task runs a function, not a model', { ...FN_HINTS, prompt: "the function reads its deps' outputs in ctx.deps" }),
  output: () => 'json',
  noArray: schemaNoArray,
};
