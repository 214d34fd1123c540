/**
 * Structured outputs and quality gates: the checks a task's answer meets before it counts, and
 * the reading of a structured output's fields (`{{id.field}}`, the public result).
 *
 * A structured output stays text inside the runtime (its compact JSON); only the public result
 * and field placeholders parse it. Schemas compile once each (outputSchema.ts); patterns run on
 * a linear-time engine (userPattern.ts).
 */
import { describeErrors, instanceFor, withoutUnknownMeta } from '../tools/ajv.js';
import type { OutputCheckSpec as OutputCheck, OutputVerdict } from '../../machines/protocol.js';
import type { AcceptSpec, OutputSpec } from './schema.js';
import { compileOutputSchema, schemaShapeProblems, type SchemaPath, type SchemaProblem } from './outputSchema.js';
import { PatternTimeoutError, withPatternBudget } from './userPattern.js';
import { TEXT_GATES } from './gates.js';
import { unfenced } from '../../machines/mapReduce.js';
import { kindOfTask } from './kinds/index.js';
import { textUnlessSchema } from './kinds/common.js';

export { unfenced };

/** What a task's answers are checked against: its output schema, and its gates that run on the text (gates.ts). */
export function outputCheckOf(output: OutputSpec | undefined, accept: AcceptSpec | undefined): OutputCheck | undefined {
  const check: OutputCheck = {};
  if (output) check.schema = output.schema;
  for (const gate of TEXT_GATES) if (accept?.[gate.field] !== undefined) check[gate.field] = accept[gate.field];
  return Object.keys(check).length > 0 ? check : undefined;
}

/**
 * Checks an answer: with a schema it must be JSON (a ```json fence around it is accepted) that
 * the schema accepts; then the gates, on the text kept. Its patterns share one time bound
 * (userPattern.ts): one that runs out of it fails the check.
 */
export function checkOutput(answer: string, check: OutputCheck): OutputVerdict {
  return withPatternBudget(() => checked(answer, check));
}

function checked(answer: string, check: OutputCheck): OutputVerdict {
  let text = answer;
  if (check.schema) {
    let value: unknown;
    try {
      // As answerJson reads it, but the parser's own words go back to the model.
      value = JSON.parse(unfenced(answer));
    } catch (error) {
      return { ok: false, code: 'invalid_output', problems: [`the answer is not valid JSON (${(error as Error).message}): answer with the JSON value alone`] };
    }
    const validate = compileOutputSchema(check.schema);
    if (typeof validate !== 'function') return { ok: false, code: 'invalid_output', problems: [`the output schema does not compile: ${validate.error}`] };
    try {
      if (!validate(value)) return { ok: false, code: 'invalid_output', problems: describeErrors(validate.errors ?? []).split('; ').map((p) => `the JSON ${p.startsWith('/') ? `at ${p}` : p}`) };
      text = JSON.stringify(value);
    } catch (error) {
      if (error instanceof PatternTimeoutError) return { ok: false, code: 'invalid_output', problems: [error.message] };
      // A value nested deeper than the stack (a recursive schema lets it through to ajv).
      if (error instanceof RangeError) return { ok: false, code: 'invalid_output', problems: ['the JSON is nested too deeply to check: answer with a flatter value'] };
      throw error;
    }
  }
  const problems: string[] = [];
  for (const gate of TEXT_GATES) {
    const value = check[gate.field];
    if (value === undefined) continue;
    try {
      problems.push(...gate.test!(value as never, text, answer));
    } catch (error) {
      // A pattern past its time bound fails the check, and says so.
      if (!(error instanceof PatternTimeoutError)) throw error;
      problems.push(error.message);
    }
  }
  return problems.length > 0 ? { ok: false, code: 'rejected_output', problems } : { ok: true, text };
}

/**
 * Problems of a schema given in a plan, each with its path inside the schema: it must be a valid
 * JSON Schema that compiles, no deeper than MAX_SCHEMA_DEPTH, without `$ref` loops, and with
 * patterns that compile.
 */
export function schemaProblems(schema: Record<string, unknown>): SchemaProblem[] {
  const shape = schemaShapeProblems(schema);
  if (shape.length > 0) return shape;
  const ajv = instanceFor(schema);
  const cleaned = withoutUnknownMeta(schema);
  let valid: boolean;
  try {
    valid = ajv.validateSchema(cleaned) as boolean;
  } catch (error) {
    return [{ path: [], message: `not a valid JSON Schema: ${(error as Error).message}` }];
  }
  if (!valid) {
    // The meta-schema says one thing several ways (enum, then type, then anyOf): the first per place.
    const first = new Map<string, string>();
    for (const e of ajv.errors ?? []) {
      if (first.has(e.instancePath)) continue;
      const allowed = e.keyword === 'enum' ? (e.params as { allowedValues?: unknown[] }).allowedValues : undefined;
      first.set(e.instancePath, `not a valid JSON Schema: ${allowed ? `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}` : (e.message ?? e.keyword)}`);
    }
    return [...first].slice(0, 8).map(([pointer, message]) => ({ path: segmentsOf(pointer), message }));
  }
  const compiled = compileOutputSchema(schema);
  return typeof compiled === 'function' ? [] : [{ path: [], message: `the schema does not compile: ${compiled.error}` }];
}

/** `/properties/a~1b` -> `['properties', 'a/b']` */
function segmentsOf(pointer: string): SchemaPath {
  return pointer.split('/').filter((s) => s !== '').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/**
 * A task's output in the public result: parsed where its kind says the output is JSON (a map's
 * array, a function's value, an approval's decision) or it has an output schema; else its text.
 */
export function parsedOutput(spec: { output?: OutputSpec; kind?: string; fn?: string } | undefined, text: string): unknown {
  if (spec === undefined || (kindOfTask(spec)?.output(spec) ?? textUnlessSchema(spec)) === 'text') return text;
  try {
    return JSON.parse(text);
  } catch {
    // A kept output that failed its schema may not be JSON at all: it is shown as it came.
    return text;
  }
}

/**
 * Why `path` is not a field the schema gives, or undefined when it is. Follows `properties`
 * (and `items` / `prefixItems` for a numeric segment); a schema that allows anything there
 * (no `properties`, or `additionalProperties` not false) lets the rest of the path through.
 */
export function fieldPathProblem(schema: unknown, path: readonly string[]): string | undefined {
  let node = schema;
  for (let i = 0; i < path.length; i++) {
    const key = path[i]!;
    if (node === true || node === undefined) return undefined;
    if (node === false || node === null || typeof node !== 'object') return `has no field "${path.slice(0, i + 1).join('.')}"`;
    const s = node as Record<string, unknown>;
    const properties = s.properties as Record<string, unknown> | undefined;
    if (/^\d+$/.test(key) && (s.type === 'array' || s.items !== undefined || s.prefixItems !== undefined)) {
      const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : undefined;
      node = prefix && Number(key) < prefix.length ? prefix[Number(key)] : Array.isArray(s.items) ? undefined : s.items;
      continue;
    }
    if (properties && typeof properties === 'object' && Object.hasOwn(properties, key)) {
      node = properties[key];
      continue;
    }
    const closed = s.additionalProperties === false || (properties !== undefined && s.additionalProperties === undefined && s.type === 'object');
    if (closed || (s.type !== undefined && s.type !== 'object')) {
      const known = properties ? Object.keys(properties) : [];
      const at = path.slice(0, i).join('.');
      return `has no field "${key}"${at ? ` under "${at}"` : ''}${known.length > 0 ? ` (its fields: ${known.join(', ')})` : ''}`;
    }
    return undefined;
  }
  return undefined;
}
