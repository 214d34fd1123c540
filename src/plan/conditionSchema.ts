/**
 * A task's `when` as the plan's schema reads it: a test of one dep's output, or tests combined
 * (machines/when.ts evaluates it). Beside schema.ts, which uses it in `TaskSchema`. Built on
 * first use, with zod (zod.ts).
 */
import type { z } from 'zod';
import { zod } from './zod.js';
import { WHEN_COMBINATORS, WHEN_OPERATORS, type Condition } from '../../machines/when.js';

/** A value JSON can hold (a plan written in code could give a function, a Date, NaN...). */
function isJsonValue(x: unknown, depth = 0): boolean {
  if (x === null || typeof x === 'string' || typeof x === 'boolean') return true;
  if (typeof x === 'number') return Number.isFinite(x);
  if (depth > 64 || typeof x !== 'object') return false;
  if (Array.isArray(x)) return x.every((v) => isJsonValue(v, depth + 1));
  const proto = Object.getPrototypeOf(x) as unknown;
  return (proto === Object.prototype || proto === null) && Object.values(x).every((v) => isJsonValue(v, depth + 1));
}

let built: z.ZodType<Condition, Condition> | undefined;

/** `when`'s schema: checked as one object with optional fields; its parsed value is a `Condition`. */
export function conditionSchema(): z.ZodType<Condition, Condition> {
  return (built ??= buildConditionSchema());
}

function buildConditionSchema(): z.ZodType<Condition, Condition> {
  const z = zod();
  const JsonValueSchema = z.unknown().refine((x) => x === undefined || isJsonValue(x), { error: 'must be a JSON value (a string, number, boolean, null, array or object)' });

  const quoted = (names: readonly string[]) => names.map((n) => `"${n}"`).join(' and ');

  /**
   * `when`: a test of one dep's output, or tests combined (machines/when.ts). One object with every
   * field optional, its form checked after: a union's error would not say which field is wrong.
   */
  const ConditionObject = z
    .strictObject(
      {
        task: z.string().min(1, { error: 'must name a dep' }).optional(),
        path: z.string().regex(/^[^.]+(\.[^.]+)*$/, { error: 'must be a dotted path of field names and array indexes, e.g. "items.0.id"' }).optional(),
        equals: JsonValueSchema.optional(),
        notEquals: JsonValueSchema.optional(),
        in: z.array(JsonValueSchema, { error: '"in" takes an array of values, e.g. ["high", "critical"]' }).optional(),
        exists: z.boolean().optional(),
        get all() {
          return z.array(ConditionSchema).min(1, { error: 'must list at least one condition' }).optional();
        },
        get any() {
          return z.array(ConditionSchema).min(1, { error: 'must list at least one condition' }).optional();
        },
        get not() {
          return ConditionSchema.optional();
        },
      },
      {
        error: (iss) =>
          iss.code === 'invalid_type' && iss.input !== undefined
            ? 'a condition is an object: a test {"task", "path", and one of "equals", "notEquals", "in", "exists"}, or {"all": [...]}, {"any": [...]}, {"not": {...}}'
            : undefined,
      },
    )
    .check((payload) => {
      // Its fields' own problems first (an unknown field, a wrong type): the form is told once they are fixed.
      if (payload.issues.length > 0) return;
      const c = payload.value as Record<string, unknown>;
      const problem = (message: string, path: string[] = []) => payload.issues.push({ code: 'custom', message, input: c, path });
      const present = (k: string) => c[k] !== undefined;
      const combinators = WHEN_COMBINATORS.filter(present);
      const operators = WHEN_OPERATORS.filter(present);
      if (combinators.length > 0) {
        if (combinators.length > 1) problem(`one combination per condition, this one has ${quoted(combinators)}: nest them`);
        else if (present('task') || present('path') || operators.length > 0) {
          problem(`"${combinators[0]}" combines conditions and takes no other field: put "task", "path" and the operator in a condition inside it`);
        }
        return;
      }
      if (!present('task')) problem('required: the dep whose output the test reads', ['task']);
      if (operators.length === 0) problem('a test needs one operator: "equals", "notEquals", "in" or "exists"');
      else if (operators.length > 1) problem(`a test takes one operator, this one has ${quoted(operators)} (combine tests with "all")`);
      })
    // Named in the plan's JSON Schema (schema/plan.schema.json), where it refers to itself.
    .meta({ id: 'condition' });
  const ConditionSchema = ConditionObject as unknown as z.ZodType<Condition, Condition>;
  return ConditionSchema;
}
