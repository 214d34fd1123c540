/**
 * What a task kind is, for the plan: one module per kind (src/plan/kinds/<kind>.ts) implements
 * `PlanKind`, and the registry (index.ts) lists them. The schema, validate, the planner's checks
 * and the public result read a kind only through this interface; what a kind does when it runs
 * is its run-time module's (machines/, src/resolve.ts).
 */
import type { PlanIssue } from '../validate.js';

/** A task as written: unparsed input, read field by field (checks run on plans that failed the schema too). */
export type RawTask = Record<string, unknown>;

export type Path = (string | number)[];

/** A field of the task and what is wrong with it. */
export interface FieldProblem {
  readonly field: string;
  readonly message: string;
}

/** A task the kind reads without its being listed in `deps`, and the field that names it (for a cycle's path). */
export interface ImplicitDep {
  readonly id: string;
  readonly path: Path;
}

/**
 * A field naming another task whose output this kind acts on, and may send back (review's
 * `reviews`, approval's `approves`). The task named is an implicit dep, has at most one watcher
 * of each kind, and its other dependents wait for the watcher: they must not read an output that
 * may still change.
 */
export interface WatchRule {
  readonly field: string;
  /** Watchers of one task act in this order (a review before an approval): a later one waits for an earlier one, never the reverse. */
  readonly stage: number;
  /** Said when the task names itself. */
  readonly self: string;
  /** Said when the task named has a watcher of this kind already: `task "x" ${taken} (tasks[3])`. */
  readonly taken: string;
  /** Why a task of `kind` (id `id`) cannot be watched by this kind, or undefined. */
  refuses(kind: string, id: string): string | undefined;
  /** Added to a cycle's line when the cycle goes through the wait of the watched task's dependents. */
  readonly waitNote: string;
}

/** What a kind's own checks are given about the whole plan. */
export interface KindContext {
  /** Every task of the list with a string id, by id. */
  readonly byId: ReadonlyMap<string, RawTask>;
  /** Where a map's relative items file is read from. */
  readonly baseDir: string | undefined;
  /** A map's items as the plan lists them (a file, inline), read once; undefined for items from a task or none. */
  itemsOf(map: RawTask): ItemsRead | undefined;
  /** Why a task's output cannot be a JSON array, or undefined when it may be one (its kind's `noArray`). */
  noArrayOf(t: RawTask): string | undefined;
  /** A path under this task: `at('items', 'from')` is `['tasks', i, 'items', 'from']`. */
  at(...path: Path): Path;
  readonly out: PlanIssue[];
}

export type ItemsRead = { ok: true; items: unknown[] } | { ok: false; message: string };

/** How a kind gets its output. */
export type KindRuns =
  /** A model call on its `prompt` (with its tools): `model` and `prompt` required. */
  | 'model'
  /** A function (`fn`): the fields of a model call refused. */
  | 'fn'
  /** Its steps call a model, or run the function named in `fn` when there is one (map, reduce). */
  | 'model-or-fn'
  /** A person decides. */
  | 'person';

export interface PlanKind {
  /** One line for the docs. */
  readonly doc: string;
  /**
   * The fields only some kinds take, each with what the refusal says the others lack ("has this
   * field"). A field several kinds list (`fn`, `maxRounds`) is refused on the other kinds only.
   */
  readonly fields: Readonly<Record<string, string>>;
  /** It makes model calls of its own (a map's and a reduce's are their sub-tasks'). */
  readonly callsModel: boolean;
  readonly runs: KindRuns;
  /** A planner may list it among its sub-tasks: true, or why not. */
  readonly asSubTask: true | string;
  /** Its own fields it requires (`items`, `over`, `reviews`, `fn`, `approves`), each with the line said when missing. */
  readonly requires: Readonly<Record<string, string>>;
  /** The shared fields the schema requires of this task, with their lines (`model`, `prompt`): checked as the structure is. */
  required(t: RawTask): readonly FieldProblem[];
  /** The fields every kind has that this one does not take (on this task), each with why. */
  refused(t: RawTask): readonly FieldProblem[];
  /** Tasks it reads without listing them in `deps` (a map's `items.from`, a reduce's `over`). */
  implicitDeps?(t: RawTask): readonly ImplicitDep[];
  /** The task whose output it acts on (review, approval). */
  readonly watches?: WatchRule;
  /** What the run names the tasks it makes under its own id, for a task whose id would be one of them. */
  madeUnder?(id: string): string;
  /** Whether the result holds its output parsed (`json`: always JSON) or as text (parsed only with an output schema). */
  output(t: { kind?: unknown; fn?: unknown; output?: unknown }): 'json' | 'text';
  /** Why its output cannot be a JSON array (for a map's `items.from`, a reduce's `over`), or undefined when it may be one. */
  noArray(t: RawTask): string | undefined;
  /** Its own checks across fields and tasks, after the shared ones. */
  check?(t: RawTask, ctx: KindContext): void;
}
