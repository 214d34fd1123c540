/**
 * Types for plans written in code: each task's output is typed in the result by its kind and
 * schema (`OutputOf`): `result.tasks.extract.output` is `z.output<typeof schema>` for a zod
 * `output.schema`, an array of those for a map. At run time the zod schema becomes a JSON Schema
 * (`z.toJSONSchema`) before the plan is validated.
 *
 * @example
 * const Product = z.object({ name: z.string(), price: z.number() });
 * const run = swarm.run({ ...base, tasks: [{ id: 'extract', model: 'fast', prompt: '...', output: { schema: Product } }] });
 * const { output } = (await run.result).tasks.extract; // { name: string; price: number } | undefined
 */
import type { z } from 'zod';
import { zod } from './zod.js';
import type { RunResult, TaskResult } from '../../machines/tasks/results.js';
import type { ApprovalOutput } from './planTypes.js';
import { isRecord } from './issues.js';

/**
 * The output type of one task as written in a plan, as the result holds it:
 * - a map (`kind: "map"`): the array of its items' outputs, in item order. Each item answers with
 *   the map's `output.schema` (its items inherit it): typed by a zod schema, else `unknown` (an
 *   item's answer is parsed when it is JSON, else kept as text; a function's value is JSON);
 * - a function's value (`kind: "fn"`, or a reduce naming `fn`): a zod `output.schema`'s output
 *   type, else `unknown` (JSON, never text);
 * - an approval (`kind: "approval"`): the person's decision, `ApprovalOutput`;
 * - a reduce (`kind: "reduce"`): its root's output, one call's answer like any task's;
 * - any other task: a zod `output.schema`'s output type, `unknown` for a JSON Schema, the text
 *   (`string`) without a schema.
 * A task type that may or may not have an `output` (e.g. `TaskInput`) gives `unknown`.
 */
export type OutputOf<T> = T extends { kind: 'map' }
  ? ItemOutputOf<T>[]
  : T extends { kind: 'approval' }
    ? ApprovalOutput
    : T extends { kind: 'fn' } | { kind: 'reduce'; fn: string }
      ? ItemOutputOf<T>
      : AnswerOf<T>;

/** What one call of the task answers: its schema's type, or its text. */
type AnswerOf<T> = T extends { output: { schema: infer S } }
  ? S extends z.ZodType
    ? z.output<S>
    : unknown
  : // A task type whose output may or may not be given (e.g. TaskInput's): it may be a parsed value.
    'output' extends keyof T
    ? unknown
    : string;

/** A value read as JSON (one item's output in a map's array, a function's value): `unknown` unless a zod schema types it. */
type ItemOutputOf<T> = T extends { output: { schema: infer S extends z.ZodType } } ? z.output<S> : unknown;

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
    return { ...t, output: { ...t.output, schema: zod().toJSONSchema(t.output.schema) } };
  });
  return { ...raw, tasks };
}

function isZod(x: unknown): x is z.ZodType {
  // Its `_zod` internals, not `instanceof`: the application's zod may be another instance (zod.ts).
  return isRecord(x) && '_zod' in x;
}
