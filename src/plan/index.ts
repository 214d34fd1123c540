/** The plan format: schema, validation and critical-path ranks. See docs/plan-format.md. */
export * from './schema.js';
export * from './validate.js';
export * from './ranks.js';
export { formatPath } from './issues.js';
export * from './subtasks.js';
export { parsedOutput } from './structured.js';
export type { OutputOf, OutputsOf, ResultOf, TypedRunResult } from './typed.js';
export { DEFAULT_FAN_IN, DEFAULT_MAX_ITEMS } from './mapreduce.js';
export { definePlan, type DefinedPlan, type TaskInput } from './define.js';
