/**
 * The plan as a file or code writes it: every field with a default may be left out, and each task
 * has the shape of its kind (one member per module of src/plan/kinds/). Re-exported by
 * planTypes.ts.
 */
import type { z } from 'zod';
import type { PlanSchema } from './schema.js';
import type { AcceptSpec, JudgeSpec, TaskKind, TaskSpec } from './planTypes.js';


/**
 * The plan as a file or code writes it: every field with a default may be left out, a task's
 * shape depends on its `kind` (`TaskInput`), and there is at least one task. What validation
 * checks beyond shapes (ids that exist, cycles, models, value ranges) it does not say.
 */
export interface PlanInput extends Omit<z.input<PlanSchema>, 'tasks'> {
  tasks: [TaskInput, ...TaskInput[]];
}

/**
 * One task as written, by its `kind` (absent: a plain task). A field of another kind, or a
 * missing `items` (map), `over` (reduce), `reviews` (review), `fn` (fn) or `approves` (approval),
 * does not fit any member.
 */
export type TaskInput = TaskInputs[TaskKind];

/** The written shape of each task kind (one entry per module of src/plan/kinds/). */
export interface TaskInputs {
  task: PlainTaskInput;
  plan: PlannerTaskInput;
  review: ReviewTaskInput;
  map: MapTaskInput;
  reduce: ReduceTaskInput;
  fn: FnTaskInput;
  approval: ApprovalTaskInput;
}

/** The fields every kind takes (each as in `TaskSpec`); those with a default are optional. */
export interface TaskInputCommon extends Pick<TaskSpec, 'id' | 'timeoutMs'>, Partial<Pick<TaskSpec, 'deps' | 'priority' | 'when' | 'after'>> {}

/** The fields of a task that calls a model: its `model` and `prompt` required. */
export interface ModelCallInput extends Pick<TaskSpec, 'system' | 'maxTurns' | 'maxTokens' | 'maxInputTokens'>, Partial<Pick<TaskSpec, 'tools'>> {
  model: string;
  prompt: string;
  output?: OutputInput;
  accept?: AcceptInput;
}

/** The fields every kind that calls a model takes (each as in `TaskSpec`); those with a default are optional. */
export interface TaskInputBase extends TaskInputCommon, ModelCallInput, Pick<TaskSpec, 'maxRetries'> {}

/** The fields of a model call, which a step that runs a function does not take. */
type ModelCallFields = Exclude<keyof ModelCallInput, 'output'> | 'budgetUsd';

/**
 * `kind` absent or `"task"`: one model call (with its tools) on its prompt. The fields of the
 * other kinds are `never` here: without a `kind` to tell the members apart, TypeScript would
 * otherwise take `items` on a plain task as a field of some member.
 */
export interface PlainTaskInput extends TaskInputBase, Pick<TaskSpec, 'budgetUsd'>, Partial<Record<OtherKindsFields, never>> {
  kind?: 'task';
}

/** Every field of any member of a union. */
type KeysOf<U> = U extends unknown ? keyof U : never;

/** The fields only reviews, maps, reduces, fn tasks and approvals take. */
type OtherKindsFields = Exclude<KeysOf<ReviewTaskInput | MapTaskInput | ReduceTaskInput | FnTaskInput | ApprovalTaskInput>, keyof TaskInputBase | 'kind' | 'budgetUsd'>;

/** `kind: "plan"`: its answer is a list of sub-tasks, which run next. */
export interface PlannerTaskInput extends TaskInputBase, Pick<TaskSpec, 'budgetUsd'> {
  kind: 'plan';
}

/** `kind: "review"`: reviews the task named in `reviews` (required). */
export interface ReviewTaskInput extends TaskInputBase, Pick<TaskSpec, 'budgetUsd' | 'maxRounds'> {
  kind: 'review';
  /** The task reviewed (added to deps if missing). */
  reviews: string;
}

/**
 * `kind: "map"`: one step per item of `items` (required): a model call on its prompt, or the
 * function named in `fn`. It calls no model itself: no `budgetUsd`.
 */
export type MapTaskInput = MapModelTaskInput | MapFnTaskInput;

interface MapFields extends Pick<TaskSpec, 'maxItems' | 'key' | 'dedupe'> {
  kind: 'map';
  items: MapItemsInput;
}

/** A map whose items each make a model call on its prompt (`{{item}}`, or `{{<as>}}`). */
export interface MapModelTaskInput extends TaskInputBase, MapFields, Pick<TaskSpec, 'as'> {
  fn?: never;
}

/** A map whose items each run the function named in `fn`, with the item in `ctx.item`. */
export interface MapFnTaskInput extends TaskInputCommon, MapFields, Pick<TaskSpec, 'maxRetries'>, Partial<Record<ModelCallFields | 'as', never>> {
  fn: string;
  output?: OutputInput;
}

/**
 * `kind: "reduce"`: merges the outputs named in `over` (required): in a tree of model calls, or
 * in one call of the function named in `fn`. It calls no model itself: no `budgetUsd`.
 */
export type ReduceTaskInput = ReduceModelTaskInput | ReduceFnTaskInput;

interface ReduceFields {
  kind: 'reduce';
  /** A map (its items), a task with a JSON array output (its elements), or a non-empty list of tasks. */
  over: string | [string, ...string[]];
}

/** A reduce that merges in a tree of model calls, `fanIn` inputs per call. */
export interface ReduceModelTaskInput extends TaskInputBase, ReduceFields, Pick<TaskSpec, 'fanIn'> {
  fn?: never;
}

/** A reduce that merges in one call of the function named in `fn`, every input in `ctx.inputs`. */
export interface ReduceFnTaskInput extends TaskInputCommon, ReduceFields, Pick<TaskSpec, 'maxRetries'>, Partial<Record<ModelCallFields | 'fanIn', never>> {
  fn: string;
  output?: OutputInput;
}

/** `kind: "fn"`: runs the function named in `fn` on its deps' outputs; no model, so none of a model call's fields. */
export interface FnTaskInput extends TaskInputCommon, Pick<TaskSpec, 'maxRetries'>, Partial<Record<ModelCallFields, never>> {
  kind: 'fn';
  /** The function's name: a key of `createSwarm({ functions })`, or a named export of `--functions`. */
  fn: string;
  /** The value's JSON Schema (or a zod schema in code): the returned value is checked against it, and typed by it. */
  output?: OutputInput;
}

/** `kind: "approval"`: a person approves the output of the task named in `approves`, answering `prompt`. */
export interface ApprovalTaskInput extends TaskInputCommon, Pick<TaskSpec, 'maxRounds'>, Partial<Record<Exclude<ModelCallFields, 'prompt'> | 'maxRetries' | 'output', never>> {
  kind: 'approval';
  /** The task whose output is approved (added to deps if missing). */
  approves: string;
  /** The question the person answers, e.g. "Send this reply?" (`{{draft}}` places the approved output). */
  prompt: string;
}

/** An approval's output in the result: the person's decision. */
export interface ApprovalOutput {
  approved: boolean;
  /** What the person said with it (a rejection's note goes back to the approved task). */
  note?: string;
}

/** A map's items as written: exactly one of `file`, `from` and `values` (see `MapItems`). */
export type MapItemsInput =
  | { file: string; from?: never; values?: never }
  | { from: string; file?: never; values?: never }
  | { values: unknown[]; file?: never; from?: never };

/** `output` as written: in code, the schema may also be a zod schema (src/plan/typed.ts). */
export interface OutputInput {
  schema: Record<string, unknown> | z.ZodType;
}

/** `accept` as written: a judge's `threshold` may be left out (default 0.7). */
export interface AcceptInput extends Omit<AcceptSpec, 'judge'> {
  judge?: Omit<JudgeSpec, 'threshold'> & { threshold?: number };
}
