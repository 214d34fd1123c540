/**
 * The names a plan gives: task ids, task kinds, functions. A leaf module: the schema reads them
 * as it is built, before the kind modules (src/plan/kinds/) are loaded.
 */

export const TASK_ID_PATTERN = /^[A-Za-z0-9_.:/-]+$/;
export const TASK_ID_MAX_LENGTH = 200;

/** A plan function's name (`"fn": "fetchOrders"`): a JavaScript export name. */
export const FN_NAME_PATTERN = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** The task kinds, in the order messages and docs list them (`task` first: the default). Each is a module in src/plan/kinds/. */
export const TASK_KIND_NAMES = ['task', 'plan', 'review', 'map', 'reduce', 'fn', 'approval'] as const;

export type TaskKind = (typeof TASK_KIND_NAMES)[number];

/** `"task", "plan", ... or "approval"`, for messages. */
export function taskKindList(): string {
  const quoted = TASK_KIND_NAMES.map((k) => `"${k}"`);
  return `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}
