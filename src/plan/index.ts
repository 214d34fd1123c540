/** The plan format: schema, validation and critical-path ranks. See docs/plan-format.md. */
export * from './schema.js';
export * from './validate.js';
export * from './ranks.js';
export { formatPath } from './issues.js';
export * from './subtasks.js';
export { definePlan, type DefinedPlan, type TaskInput } from './define.js';
