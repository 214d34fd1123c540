/**
 * `definePlan()`: a plan written in TypeScript, checked as it is typed. It returns the plan as
 * given (validation still happens when it runs: `parsePlan`, `swarm.run`); what it adds is the
 * type: fields and defaults as a plan file writes them, each task's fields those of its kind,
 * and each task's own type kept, so a task's literal id (`"summary"`) survives for code that
 * reads `result.tasks`.
 */
import type { z } from 'zod';
import type { PlanInput, PlainTaskInput, TaskInput, TaskInputs } from './planTypes.js';

export type { TaskInput } from './planTypes.js';

/** Arrays anywhere inside may be readonly: a plan written `as const` is accepted as it is. */
type Loose<T> = T extends z.ZodType
  ? T
  : T extends readonly unknown[]
    ? { readonly [I in keyof T]: Loose<T[I]> }
    : T extends (...args: never[]) => unknown
      ? T
      : T extends object
        ? { [K in keyof T]: Loose<T[K]> }
        : T;

/** One task as definePlan takes it: a `TaskInput` whose arrays may be readonly. */
type LooseTask = Loose<TaskInput>;

/**
 * The shape a task is checked against: its kind's (no `kind`, or one that is none: a plain
 * task's); of a map's or a reduce's two shapes, the one `fn` picks (with it, a function's step).
 */
type ShapeOf<T> = T extends { kind: infer K extends keyof TaskInputs } ? OrAll<ByFn<TaskInputs[K], T>, TaskInputs[K]> : PlainTaskInput;

/** The members of `Shape` that name a function if and only if `T` does. */
type ByFn<Shape, T> = Shape extends unknown ? ([T extends { fn: unknown } ? true : false] extends [Shape extends { fn: string } ? true : false] ? Shape : never) : never;
type OrAll<S, All> = [S] extends [never] ? All : S;

/**
 * `T` with every field that `Shape` does not have typed `never`, at every depth: an unknown
 * field in a task, its `output`, `items`, `accept` or `accept.judge` is refused (a generic
 * argument escapes TypeScript's own excess-property check). Where `Shape` is a union (`items`),
 * `T` is held to the members that have all its fields; a zod schema or a free-form object (a
 * JSON Schema, an item's value) is taken as it is.
 */
type Exact<T, Shape> = unknown extends Shape
  ? T
  : T extends z.ZodType | ((...args: never[]) => unknown)
    ? T
    : T extends readonly unknown[]
      ? { [I in keyof T]: Exact<T[I], ElementOf<Shape>> }
      : T extends object
        ? string extends KeysOf<Shape>
          ? T
          : ExactObject<T, Having<NonNullable<Shape>, keyof T>, KeysOf<Shape>>
        : T;

type ExactObject<T, Members, Known> = [Members] extends [never]
  ? { [K in keyof T]: K extends Known ? T[K] : never }
  : { [K in keyof T]: Exact<T[K], FieldOf<Members, K>> };

/** Every field of any member of a union. */
type KeysOf<U> = U extends unknown ? keyof U : never;
/** The members of the union `Shape` that have every field in `Keys`. */
type Having<Shape, Keys> = Shape extends unknown ? ([Exclude<Keys, keyof Shape>] extends [never] ? Shape : never) : never;
type FieldOf<Members, K> = Members extends unknown ? (K extends keyof Members ? Members[K] : never) : never;
type ElementOf<S> = S extends readonly (infer E)[] ? E : never;

/** What an empty `tasks: []` is told: a plan has at least one task (a list of unknown length may be empty: validation says). */
type NonEmpty = PlanInput['tasks'];

/** A plan as written (defaults optional), its tasks typed as given. */
export type DefinedPlan<Tasks extends readonly LooseTask[] = readonly LooseTask[]> = Loose<Omit<PlanInput, 'tasks'>> & { tasks: Tasks };

/**
 * Types a plan written in code; returns it unchanged. A field the plan format does not have, a
 * field of another task kind, a map without `items` (a reduce without `over`, a review without
 * `reviews`, a fn task without `fn`, an approval without `approves`), a model call's field on a
 * step that runs a function, or an empty `tasks` is a compile error.
 *
 * @example
 * const plan = definePlan({
 *   providers: { sim: { type: 'sim' } },
 *   models: { fast: { provider: 'sim', model: 'sim-fast' } },
 *   tasks: [{ id: 'hello', model: 'fast', prompt: 'Say hello' }],
 * });
 * const result = await swarm.run(plan).result; // plan.tasks[0].id is the type "hello"
 */
export function definePlan<const Tasks extends readonly LooseTask[]>(
  plan: DefinedPlan<Tasks> & { tasks: Tasks extends readonly [] ? NonEmpty : { [I in keyof Tasks]: Exact<Tasks[I], ShapeOf<Tasks[I]>> } },
): DefinedPlan<Tasks> {
  return plan;
}
