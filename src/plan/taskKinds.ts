/** The task kinds' registry, under the file name the plan's code has long read it by: see kinds/index.ts. */
export { TASK_KINDS, TASK_KIND_NAMES, foreignFields, taskKindList, taskKindOf, type PlanKind as TaskKindInfo, type TaskKind } from './kinds/index.js';
