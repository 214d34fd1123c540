/**
 * `kind: "plan"`: a planner. Its answer is a list of sub-tasks (src/plan/subtasks.ts checks it),
 * which join the run as `<id>/<sub-task id>`.
 */
import { modelAndPrompt, NONE, textUnlessSchema } from './common.js';
import type { PlanKind } from './types.js';

export const plan: PlanKind = {
  doc: 'a planner: its answer is a list of sub-tasks, which run next',
  fields: {},
  callsModel: true,
  runs: 'model',
  asSubTask: true,
  requires: {},
  required: (t) => modelAndPrompt(t),
  refused: () => NONE,
  madeUnder: (id) => `planner "${id}", whose sub-tasks the run names "${id}/<id>"`,
  output: textUnlessSchema,
  noArray: () => "a planner's output is its sub-tasks",
};
