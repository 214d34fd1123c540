/** `kind: "task"` (the default): one model call, with its tools, on its prompt. */
import { modelAndPrompt, NONE, schemaNoArray, textUnlessSchema } from './common.js';
import type { PlanKind } from './types.js';

export const task: PlanKind = {
  doc: 'one model call (with its tools) on its prompt: the default',
  fields: {},
  callsModel: true,
  runs: 'model',
  asSubTask: true,
  requires: {},
  required: (t) => modelAndPrompt(t),
  refused: () => NONE,
  output: textUnlessSchema,
  noArray: schemaNoArray,
};
