/**
 * Every task `kind` a plan may name, in one table: its line of documentation, the fields only it
 * takes, whether it calls a model itself, and whether a planner may emit it as a sub-task. The
 * plan's schema and checks read it; what a kind does when it runs is in machines/ (the
 * supervisor's dispatch: `machines/mapReduceSteps.ts`, `machines/review.ts`) and src/resolve.ts.
 *
 * Adding a kind: a row here, its checks in their own file (as mapreduce.ts is for map and
 * reduce), and its run-time steps.
 */

export interface TaskKindInfo {
  /** One line for the docs. */
  readonly doc: string;
  /** The fields only this kind takes, each with what the error says another kind lacks. */
  readonly fields: Readonly<Record<string, string>>;
  /** It makes model calls of its own (map and reduce only make their sub-tasks'). */
  readonly callsModel: boolean;
  /** A planner may list it among its sub-tasks. */
  readonly asSubTask: boolean;
}

const OWN_FIELD = 'has this field';

export const TASK_KINDS = {
  task: { doc: 'one model call (with its tools) on its prompt: the default', fields: {}, callsModel: true, asSubTask: true },
  plan: { doc: 'a planner: its answer is a list of sub-tasks, which run next', fields: {}, callsModel: true, asSubTask: true },
  review: {
    doc: 'reviews the task named in `reviews` and sends it back with feedback, `maxRounds` times at most',
    fields: { reviews: 'reviews another task', maxRounds: 'has rounds' },
    callsModel: true,
    asSubTask: true,
  },
  map: { doc: 'one sub-task per item of `items`', fields: { items: OWN_FIELD, as: OWN_FIELD, maxItems: OWN_FIELD, key: OWN_FIELD, dedupe: OWN_FIELD }, callsModel: false, asSubTask: false },
  reduce: { doc: 'merges the outputs named in `over` in a tree of calls, `fanIn` per call', fields: { over: OWN_FIELD, fanIn: OWN_FIELD }, callsModel: false, asSubTask: false },
} as const satisfies Record<string, TaskKindInfo>;

export type TaskKind = keyof typeof TASK_KINDS;

export const TASK_KIND_NAMES = Object.keys(TASK_KINDS) as [TaskKind, ...TaskKind[]];

/** The row of `kind`; undefined for a name that is not a task kind (unparsed input). */
export function taskKindOf(kind: unknown): TaskKindInfo | undefined {
  return typeof kind === 'string' && Object.hasOwn(TASK_KINDS, kind) ? TASK_KINDS[kind as TaskKind] : undefined;
}

/** `"task", "plan", "review", "map" or "reduce"`, for messages. */
export function taskKindList(): string {
  const quoted = TASK_KIND_NAMES.map((k) => `"${k}"`);
  return `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

/** Every kind's own fields, flat, with their messages: read for each task of a plan, so built once. */
const OWNED_FIELDS = (Object.entries(TASK_KINDS) as [TaskKind, TaskKindInfo][]).flatMap(([owner, info]) =>
  Object.entries(info.fields).map(([field, what]) => ({ owner, field, message: `only a task with "kind": "${owner}" ${what}` })),
);

const NONE: readonly { field: string; message: string }[] = [];

/** The fields of `task` that belong to another kind than `kind` (of the owners `of` picks), each with its message. */
export function foreignFields(task: Record<string, unknown>, kind: string, of: (owner: TaskKind) => boolean = () => true): readonly { field: string; message: string }[] {
  let out: { field: string; message: string }[] | undefined;
  for (const owned of OWNED_FIELDS) {
    if (task[owned.field] === undefined || owned.owner === kind || !of(owned.owner)) continue;
    (out ??= []).push({ field: owned.field, message: owned.message });
  }
  return out ?? NONE;
}
