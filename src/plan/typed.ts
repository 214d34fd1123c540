/**
 * Types for plans written in code: a task whose `output.schema` is a zod schema gets its output
 * typed in the result (`result.tasks.extract.output` is `z.output<typeof schema>`). At run time
 * the zod schema becomes a JSON Schema (`z.toJSONSchema`) before the plan is validated.
 *
 * @example
 * const Product = z.object({ name: z.string(), price: z.number() });
 * const run = swarm.run({ ...base, tasks: [{ id: 'extract', model: 'fast', prompt: '...', output: { schema: Product } }] });
 * const { output } = (await run.result).tasks.extract; // { name: string; price: number } | undefined
 */
import { z } from 'zod';
import type { RunResult, TaskResult } from '../../machines/tasks/results.js';
import { isRecord } from './issues.js';

/**
 * The output type of one task as written in a plan: a zod schema's output type, `unknown` for a
 * JSON Schema (parsed, but not typed) or a task type that may have one, the text otherwise.
 */
export type OutputOf<T> = T extends { output: { schema: infer S } }
  ? S extends z.ZodType
    ? z.output<S>
    : unknown
  : // A task type whose output may or may not be given (e.g. PlanInput's): it may be a parsed value.
    'output' extends keyof T
    ? unknown
    : string;

/** Output types by task id, from a plan's tasks. */
export type OutputsOf<Tasks> = Tasks extends readonly (infer T)[] ? { [K in T as K extends { id: infer Id extends string } ? Id : never]: OutputOf<K> } : never;

/** A run result whose tasks' outputs have the given types (other ids, such as sub-tasks, stay untyped). */
export type TypedRunResult<O> = Omit<RunResult, 'tasks'> & {
  tasks: { [K in keyof O]: Omit<TaskResult, 'output'> & { output?: O[K] } } & Record<string, TaskResult>;
};

/** What `swarm.run(plan)` resolves with: typed outputs for a plan object written in code, RunResult otherwise. */
export type ResultOf<P> = 0 extends 1 & P ? RunResult : P extends { tasks: infer Tasks } ? TypedRunResult<OutputsOf<Tasks>> : RunResult;

/**
 * The plan with every zod `output.schema` replaced by its JSON Schema (a copy: the caller's
 * objects are not changed). Anything else is returned as it is, for validation to judge.
 */
export function withJsonSchemas(raw: unknown): unknown {
  if (!isRecord(raw) || !Array.isArray(raw.tasks) || !raw.tasks.some((t) => isRecord(t) && isRecord(t.output) && isZod(t.output.schema))) return raw;
  const tasks = raw.tasks.map((t: unknown) => {
    if (!isRecord(t) || !isRecord(t.output) || !isZod(t.output.schema)) return t;
    return { ...t, output: { ...t.output, schema: z.toJSONSchema(t.output.schema) } };
  });
  return { ...raw, tasks };
}

function isZod(x: unknown): x is z.ZodType {
  return x instanceof z.ZodType || (isRecord(x) && '_zod' in x);
}
