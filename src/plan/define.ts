/**
 * `definePlan()`: a plan written in TypeScript, checked as it is typed. It returns the plan as
 * given (validation still happens when it runs: `parsePlan`, `swarm.run`); what it adds is the
 * type: fields and defaults as a plan file writes them, and each task's own type kept, so a
 * task's literal id (`"summary"`) survives for code that reads `result.tasks`.
 */
import type { PlanInput } from './schema.js';

/** Arrays anywhere inside may be readonly: a plan written `as const` is accepted as it is. */
type Loose<T> = T extends readonly (infer E)[]
  ? readonly Loose<E>[]
  : T extends (...args: never[]) => unknown
    ? T
    : T extends object
      ? { [K in keyof T]: Loose<T[K]> }
      : T;

/** One task as a plan writes it: only `id`, `model` and `prompt` are required. */
export type TaskInput = Loose<PlanInput['tasks'][number]>;

/** A task with a field the plan format does not have is refused (the field's type becomes `never`). */
type Exact<T, Shape> = T & { [K in Exclude<keyof T, keyof Shape>]: never };

/** A plan as written (defaults optional), its tasks typed as given. */
export type DefinedPlan<Tasks extends readonly TaskInput[] = readonly TaskInput[]> = Loose<Omit<PlanInput, 'tasks'>> & { tasks: Tasks };

/**
 * Types a plan written in code; returns it unchanged.
 *
 * @example
 * const plan = definePlan({
 *   providers: { sim: { type: 'sim' } },
 *   models: { fast: { provider: 'sim', model: 'sim-fast' } },
 *   tasks: [{ id: 'hello', model: 'fast', prompt: 'Say hello' }],
 * });
 * const result = await swarm.run(plan).result; // plan.tasks[0].id is the type "hello"
 */
export function definePlan<const Tasks extends readonly TaskInput[]>(plan: DefinedPlan<Tasks> & { tasks: { [I in keyof Tasks]: Exact<Tasks[I], TaskInput> } }): DefinedPlan<Tasks> {
  return plan;
}
