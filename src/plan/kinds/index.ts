/**
 * Every task `kind` a plan may name: one module each, listed here once. The schema's `kind`, the
 * checks of validate and of a planner's sub-tasks, and the public result's parsing read a kind
 * only through this registry and the `PlanKind` interface (types.ts).
 *
 * Adding a kind: its module beside these (its doc line, fields, what it requires and refuses,
 * its implicit deps, its checks, what its output is), its line here, its written shape in
 * planTypes.ts (`TaskInputs`); and its run-time module.
 */
import { approval } from './approval.js';
import { fn } from './fn.js';
import { map } from './map.js';
import { plan } from './plan.js';
import { reduce } from './reduce.js';
import { review } from './review.js';
import { task } from './task.js';
import type { FieldProblem, PlanKind, RawTask, WatchRule } from './types.js';
import type { TaskKind } from '../names.js';

export { TASK_KIND_NAMES, taskKindList, type TaskKind } from '../names.js';

export type { FieldProblem, ImplicitDep, KindContext, KindRuns, PlanKind, RawTask, WatchRule } from './types.js';

/** The kinds, by name: one for each of TASK_KIND_NAMES (src/plan/names.ts), in its order (the compiler holds the two equal). */
export const PLAN_KINDS: Readonly<Record<TaskKind, PlanKind>> = { task, plan, review, map, reduce, fn, approval } satisfies Record<TaskKind, PlanKind>;

/** The registry under the name the plan's code has long read it by. */
export const TASK_KINDS = PLAN_KINDS;

/** The kind named `kind`; undefined for a name that is not a task kind (unparsed input). */
export function kindOf(kind: unknown): PlanKind | undefined {
  return typeof kind === 'string' && Object.hasOwn(PLAN_KINDS, kind) ? PLAN_KINDS[kind as TaskKind] : undefined;
}

/** The kind of a task as written: no `kind` is a plain task; an unknown one, undefined. */
export function kindOfTask(t: RawTask): PlanKind | undefined {
  return kindOf(t.kind ?? 'task');
}

/** Each field some kinds own, with its owners and the line said when another kind has it: built once. */
const OWNED_FIELDS: readonly { field: string; owners: readonly string[]; message: string }[] = (() => {
  const owners = new Map<string, { owners: string[]; what: string }>();
  for (const [name, kind] of Object.entries(PLAN_KINDS)) {
    for (const [field, what] of Object.entries(kind.fields)) {
      const entry = owners.get(field);
      if (entry) entry.owners.push(name);
      else owners.set(field, { owners: [name], what });
    }
  }
  return [...owners].map(([field, { owners: names, what }]) => {
    const quoted = names.map((n) => `"${n}"`);
    const list = quoted.length === 1 ? quoted[0] : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
    return { field, owners: names, message: `only a task with "kind": ${list} ${what}` };
  });
})();

/** The fields of `task` that belong to other kinds than `kind`, each with its line. */
export function foreignFields(task: RawTask, kind: string): readonly FieldProblem[] {
  const out: FieldProblem[] = [];
  for (const owned of OWNED_FIELDS) {
    if (task[owned.field] !== undefined && !owned.owners.includes(kind)) out.push({ field: owned.field, message: owned.message });
  }
  return out;
}

/** The kinds that act on another task's output, and their rules, in the order they act on one task. */
export const WATCH_RULES: readonly WatchRule[] = Object.values(PLAN_KINDS)
  .flatMap((k) => (k.watches ? [k.watches] : []))
  .sort((a, b) => a.stage - b.stage);

/**
 * The tasks `t` reads without listing them in `deps`: the task it reviews or approves, a map's
 * `items.from`, a reduce's `over`. The run adds them to its deps.
 */
export function implicitDepsOf(t: RawTask): string[] {
  const kind = kindOfTask(t);
  if (!kind) return [];
  const out = new Set<string>();
  const watched = kind.watches ? t[kind.watches.field] : undefined;
  if (typeof watched === 'string') out.add(watched);
  for (const dep of kind.implicitDeps?.(t) ?? []) out.add(dep.id);
  return [...out];
}

/** Why a task's output cannot be a JSON array, or undefined when it may be one. */
export function noArrayOf(t: RawTask): string | undefined {
  return kindOfTask(t)?.noArray(t);
}

/** The task runs a function (a fn task, a map or a reduce naming one): its prompt and system are refused, not read. */
export function runsFunction(t: RawTask): boolean {
  const kind = kindOfTask(t);
  return kind?.runs === 'fn' || (kind?.runs === 'model-or-fn' && typeof t.fn === 'string');
}
