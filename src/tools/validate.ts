/**
 * Checks a tool call's arguments against the tool's JSON Schema before it goes out, so a model
 * that got them wrong hears why in words it can act on, without a round trip to the server.
 */
import type { ValidateFunction } from 'ajv';
import { compileOutputSchema } from '../plan/outputSchema.js';
import { PatternTimeoutError, withPatternBudget } from '../plan/userPattern.js';
import { describeErrors, instanceFor } from './ajv.js';

/** Returns a readable message when the arguments are invalid, undefined when they are fine. */
export type ArgsValidator = ((args: unknown) => string | undefined) & {
  /** Why the schema could not be compiled: the validator then accepts anything. */
  readonly schemaError?: string;
};

/**
 * A validator of a tool's arguments. `name` (`fs.read`) is used in the messages.
 *
 * The schema compiles as an output schema does (plan/outputSchema.ts): on an ajv of its own, so
 * tools sharing an `$id` (or one server listed by two runs) never clash; copies of one schema
 * share one compiled validator; `$ref` loops are refused. The arguments are a model's, so
 * patterns run in linear time, or on a backtracking engine within PATTERN_TIME_BOUND_MS per call
 * (plan/userPattern.ts).
 *
 * @example
 * const check = createArgsValidator({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }, 'fs.read');
 * check({ path: 1 }); // 'invalid arguments for "fs.read": /path must be string'
 * check({ path: 'a' }); // undefined
 */
export function createArgsValidator(schema: unknown, name = 'tool'): ArgsValidator {
  const compiled = compile(schema);
  if (typeof compiled !== 'function') {
    return Object.assign(() => undefined, { schemaError: compiled.error });
  }
  const validate = compiled;
  const invalid = (why: string) => `invalid arguments for "${name}": ${why}`;
  return (args: unknown) => {
    try {
      return withPatternBudget(() => (validate(args) ? undefined : invalid(describeErrors(validate.errors ?? []))));
    } catch (error) {
      if (error instanceof PatternTimeoutError) return invalid(error.message);
      // Arguments nested deeper than the stack (a recursive schema lets them through to ajv).
      if (error instanceof RangeError) return invalid('they are nested too deeply to check: send a flatter value');
      throw error;
    }
  };
}

function compile(schema: unknown): ValidateFunction | { error: string } {
  // `true` / `false` are whole JSON Schemas (accept all / nothing): no `$id`, no pattern.
  if (typeof schema === 'boolean') return instanceFor({}).compile(schema);
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    return { error: `schema must be a JSON Schema object, got ${schema === null ? 'null' : Array.isArray(schema) ? 'an array' : typeof schema}` };
  }
  return compileOutputSchema(schema);
}
