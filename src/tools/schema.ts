/**
 * A tool's input schema as the embedder gives it, turned into the JSON Schema the model is
 * offered and the arguments are checked against (validate.ts), plus the schema's own parse when
 * it has one: a zod tool's handler gets what zod makes of the arguments (defaults filled in,
 * transforms applied), as the AI SDK gives its tools.
 *
 * Accepted: JSON Schema; a zod 4 schema (classic or mini); any Standard Schema whose
 * `~standard.jsonSchema` writes JSON Schema; an AI SDK `jsonSchema(...)` / `zodSchema(...)`
 * wrapper (its JSON Schema on `.jsonSchema`) or `lazySchema(...)`. zod writes the JSON Schema
 * itself: through the schema's own `~standard.jsonSchema` (zod >= 4.2 classic), else with
 * `z.toJSONSchema`, loaded only then (plan/zod.ts): `import('swarmstate')` loads no zod.
 */
import { isRecord, kindOf } from '../plan/issues.js';
import { zod } from '../plan/zod.js';

/** What a schema's own parse made of arguments ajv accepted: the value, or why not. */
export type ParseOutcome = { value: unknown } | { issues: string };

export interface ToolInput {
  /** JSON Schema, `type: "object"`: offered to the model, checked by ajv. */
  jsonSchema: Record<string, unknown>;
  /** The schema's own validation, after ajv's check: its value is what the tool runs with. */
  parse?: (args: unknown) => ParseOutcome | Promise<ParseOutcome>;
}

/** How the AI SDK marks its schema wrappers (`jsonSchema()`, `zodSchema()`): a registered symbol. */
const AI_SDK_SCHEMA = Symbol.for('vercel.ai.schema');
/** The JSON Schema draft asked of converters: the one ajv checks by default and providers take. */
const TARGET = 'draft-07';

/**
 * The JSON Schema (and parse) of a tool's input schema, or what is wrong with it.
 *
 * @example
 * toolInputOf(z.object({ sku: z.string() }));
 * // { jsonSchema: { $schema: '...draft-07...', type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] }, parse }
 * toolInputOf(z.string()); // { problem: 'inputSchema is not an object schema (type "string"): ...' }
 */
export function toolInputOf(schema: unknown): ToolInput | { problem: string } {
  const converted = convert(schema);
  if ('problem' in converted) return converted;
  const jsonSchema = asObjectSchema(converted.jsonSchema);
  return typeof jsonSchema === 'string' ? { problem: jsonSchema } : { ...converted, jsonSchema };
}

function convert(schema: unknown): ToolInput | { problem: string } {
  if (schema === undefined) return { jsonSchema: { type: 'object' } };
  // The AI SDK's lazySchema(): a function that makes the wrapper on first use.
  if (typeof schema === 'function') {
    let made: unknown;
    try {
      made = (schema as () => unknown)();
    } catch (error) {
      return { problem: `inputSchema is a function (an AI SDK lazySchema?) that threw: ${messageOf(error)}` };
    }
    if (!isAiSdkSchema(made)) return { problem: 'inputSchema is a function that does not make an AI SDK schema: give JSON Schema, a zod schema or an AI SDK jsonSchema()' };
    return fromAiSdk(made);
  }
  if (!isRecord(schema)) return { problem: `inputSchema is ${kindOf(schema)}: give JSON Schema, a zod schema or an AI SDK jsonSchema()` };
  if (isAiSdkSchema(schema)) return fromAiSdk(schema);
  const standard = schema['~standard'];
  if (isRecord(standard) || '_zod' in schema) return fromStandard(schema, isRecord(standard) ? standard : undefined);
  if (isRecord(schema._def) && 'typeName' in schema._def) return { problem: zod3 };
  const values = Object.values(schema);
  if (values.length > 0 && values.every((v) => isRecord(v) && ('_zod' in v || '~standard' in v))) {
    return { problem: 'inputSchema is an object of zod schemas (the MCP SDK\'s shape): wrap it in z.object({ ... })' };
  }
  return { jsonSchema: schema };
}

const zod3 = 'inputSchema is a zod 3 schema, which has no JSON Schema of its own: use zod 4 (`zod` >= 4, or `zod/v4` in zod 3.25) or give JSON Schema';

function isAiSdkSchema(value: unknown): value is Record<string | symbol, unknown> {
  return isRecord(value) && (value as Record<symbol, unknown>)[AI_SDK_SCHEMA] === true;
}

function fromAiSdk(wrapper: Record<string | symbol, unknown>): ToolInput | { problem: string } {
  let json: unknown;
  try {
    json = wrapper.jsonSchema;
  } catch (error) {
    return { problem: `inputSchema (an AI SDK schema) could not give its JSON Schema: ${messageOf(error)}` };
  }
  if (isRecord(json) && typeof json.then === 'function') {
    return { problem: 'inputSchema is an AI SDK jsonSchema() of a promise: createSwarm takes tools as they are, give the JSON Schema itself' };
  }
  if (!isRecord(json)) return { problem: `inputSchema is an AI SDK schema whose JSON Schema is ${kindOf(json)}` };
  const validate = wrapper.validate;
  if (typeof validate !== 'function') return { jsonSchema: json };
  type Result = { success: true; value: unknown } | { success: false; error: unknown };
  const outcome = (r: Result): ParseOutcome => (r.success ? { value: r.value } : { issues: messageOf(r.error) });
  return {
    jsonSchema: json,
    parse: (args) => {
      const result = (validate as (v: unknown) => Result | PromiseLike<Result>).call(wrapper, args);
      return isThenable(result) ? Promise.resolve(result).then(outcome) : outcome(result);
    },
  };
}

interface StandardIssue {
  message: string;
  path?: readonly (PropertyKey | { key: PropertyKey })[];
}
type StandardResult = { value: unknown; issues?: undefined } | { issues: readonly StandardIssue[] };

function fromStandard(schema: Record<string, unknown>, standard: Record<string, unknown> | undefined): ToolInput | { problem: string } {
  const vendor = typeof standard?.vendor === 'string' ? standard.vendor : 'zod';
  const converter = isRecord(standard?.jsonSchema) ? standard.jsonSchema : undefined;
  let json: unknown;
  try {
    if (typeof converter?.input === 'function') json = (converter.input as (o: { target: string }) => unknown)({ target: TARGET });
    // zod 4 without the converter on the schema (zod/mini, zod < 4.2): zod's own z.toJSONSchema.
    else if ('_zod' in schema) json = zod().toJSONSchema(schema as never, { target: TARGET, io: 'input' });
    else if (vendor === 'zod') return { problem: zod3 };
    else return { problem: `inputSchema is a ${vendor} schema that cannot write JSON Schema (its ~standard has no jsonSchema): give JSON Schema or a zod schema` };
  } catch (error) {
    return { problem: `${vendor} cannot express inputSchema in JSON Schema: ${messageOf(error)}` };
  }
  if (!isRecord(json)) return { problem: `inputSchema's JSON Schema (from ${vendor}) is ${kindOf(json)}` };
  const validate = standard?.validate;
  if (typeof validate !== 'function') return { jsonSchema: json };
  const outcome = (r: StandardResult): ParseOutcome => (r.issues ? { issues: r.issues.map(describeIssue).join('; ') } : { value: r.value });
  return {
    jsonSchema: json,
    parse: (args) => {
      const result = (validate as (v: unknown) => StandardResult | PromiseLike<StandardResult>).call(standard, args);
      return isThenable(result) ? Promise.resolve(result).then(outcome) : outcome(result);
    },
  };
}

function describeIssue(issue: StandardIssue): string {
  const path = (issue.path ?? []).map((p) => String(typeof p === 'object' ? p.key : p));
  return path.length > 0 ? `/${path.join('/')} ${issue.message}` : issue.message;
}

/**
 * The schema with `type: "object"` at the top, or why it cannot have it: a tool's arguments are
 * one JSON object, and the providers require it said.
 */
function asObjectSchema(json: Record<string, unknown>): Record<string, unknown> | string {
  if (json.type === undefined) {
    // Only keywords of objects (or none: `{}`): an object schema that forgot to say so.
    if (Object.keys(json).every((k) => OBJECT_KEYWORDS.has(k))) return { type: 'object', ...json };
    return `inputSchema has no "type": "object" at the top: a tool's arguments are one object (wrap a union in an object property)`;
  }
  if (json.type !== 'object') return `inputSchema is not an object schema (type ${JSON.stringify(json.type)}): a tool's arguments are one object, e.g. z.object({ ... }) or { type: 'object', properties: { ... } }`;
  return json;
}

const OBJECT_KEYWORDS = new Set(['$schema', '$id', '$defs', 'definitions', 'title', 'description', 'properties', 'required', 'additionalProperties', 'patternProperties', 'propertyNames', 'minProperties', 'maxProperties', 'dependencies', 'dependentRequired', 'dependentSchemas', 'unevaluatedProperties', 'examples', 'default']);

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return isRecord(value) && typeof value.then === 'function';
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
