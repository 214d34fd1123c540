/**
 * Checks a tool call's arguments against the tool's JSON Schema before it goes out, so a model
 * that got them wrong hears why in words it can act on, without a round trip to the server.
 */
import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, Options, ValidateFunction } from 'ajv';
import type { Ajv2019 } from 'ajv/dist/2019.js';
import type { Ajv2020 } from 'ajv/dist/2020.js';

// ajv loads with the first schema compiled, not with `import 'swarmstate'` (a tenth of a second).
const require = createRequire(import.meta.url);
const ajv = {
  draft07: (extra?: Options): Ajv => {
    const { Ajv: Draft07 } = require('ajv') as { Ajv: typeof Ajv };
    return new Draft07({ ...options, ...extra });
  },
  draft2019: (extra?: Options): Ajv2019 => {
    const { Ajv2019: Draft2019 } = require('ajv/dist/2019.js') as { Ajv2019: typeof Ajv2019 };
    return new Draft2019({ ...options, ...extra });
  },
  draft2020: (extra?: Options): Ajv2020 => {
    const { Ajv2020: Draft2020 } = require('ajv/dist/2020.js') as { Ajv2020: typeof Ajv2020 };
    return new Draft2020({ ...options, ...extra });
  },
};

/** Returns a readable message when the arguments are invalid, undefined when they are fine. */
export type ArgsValidator = ((args: unknown) => string | undefined) & {
  /** Why the schema could not be compiled: the validator then accepts anything. */
  readonly schemaError?: string;
};

const MAX_ERRORS_SHOWN = 8;

// Formats are hints here (the server checks what it cares about), and ajv must not log.
const options = { allErrors: true, strict: false, validateFormats: false, logger: false } as const;
let draft07: Ajv | undefined;
let draft2019: Ajv2019 | undefined;
let draft2020: Ajv2020 | undefined;

/** Compiled validators by schema object: a tool's schema is compiled once, however many calls. */
const cache = new WeakMap<object, ValidateFunction | { error: string }>();

/**
 * A validator of a tool's arguments. `name` (`fs.read`) is used in the messages.
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
  return (args: unknown) => {
    if (validate(args)) return undefined;
    return `invalid arguments for "${name}": ${describeErrors(validate.errors ?? [])}`;
  };
}

/** A compiled schema (cached by schema object), or why it does not compile. */
export function compile(schema: unknown): ValidateFunction | { error: string } {
  // `true` / `false` are whole JSON Schemas (accept all / nothing); a WeakMap cannot hold them.
  if (typeof schema === 'boolean') return (draft07 ??= ajv.draft07()).compile(schema);
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    return { error: `schema must be a JSON Schema object, got ${schema === null ? 'null' : Array.isArray(schema) ? 'an array' : typeof schema}` };
  }
  const hit = cache.get(schema);
  if (hit) return hit;
  let result: ValidateFunction | { error: string };
  try {
    result = instanceFor(schema as Record<string, unknown>).compile(withoutUnknownMeta(schema as Record<string, unknown>));
  } catch (error) {
    result = { error: error instanceof Error ? error.message : String(error) };
  }
  cache.set(schema, result);
  return result;
}

/** The schema's draft: MCP servers send draft-07 (zod) and 2020-12 (the spec's default). */
function draftOf(schema: Record<string, unknown>): keyof typeof ajv {
  const meta = typeof schema.$schema === 'string' ? schema.$schema : '';
  return meta.includes('2020-12') ? 'draft2020' : meta.includes('2019-09') ? 'draft2019' : 'draft07';
}

/** The shared ajv of the schema's draft. */
export function instanceFor(schema: Record<string, unknown>): Ajv | Ajv2019 | Ajv2020 {
  const draft = draftOf(schema);
  if (draft === 'draft2020') return (draft2020 ??= ajv.draft2020());
  if (draft === 'draft2019') return (draft2019 ??= ajv.draft2019());
  return (draft07 ??= ajv.draft07());
}

/**
 * A new ajv of the schema's draft with `extra` options, for one schema alone: ajv registers a
 * compiled schema's `$id`s, so a shared instance refuses another schema (or a copy) with the same.
 */
export function newInstanceFor(schema: Record<string, unknown>, extra: Options): Ajv | Ajv2019 | Ajv2020 {
  return ajv[draftOf(schema)](extra);
}

/** Drops a `$schema` ajv has no meta-schema for (draft-04, typos): it would refuse the whole schema. */
export function withoutUnknownMeta(schema: Record<string, unknown>): Record<string, unknown> {
  const meta = schema.$schema;
  if (typeof meta !== 'string' || /draft-0[67]|2019-09|2020-12/.test(meta)) return schema;
  const { $schema: _dropped, ...rest } = schema;
  return rest;
}

/** `/path must be string; must have required property 'path'` */
export function describeErrors(errors: ErrorObject[]): string {
  const lines = errors.slice(0, MAX_ERRORS_SHOWN).map(describeError);
  const unique = [...new Set(lines)];
  const more = errors.length > MAX_ERRORS_SHOWN ? ` (and ${errors.length - MAX_ERRORS_SHOWN} more)` : '';
  return unique.join('; ') + more;
}

function describeError(error: ErrorObject): string {
  const where = error.instancePath === '' ? '' : `${error.instancePath} `;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties':
      return `${where}must NOT have additional property '${String(params.additionalProperty)}'`;
    case 'enum':
      return `${where}must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${where}must be ${JSON.stringify(params.allowedValue)}`;
    default:
      return `${where}${error.message ?? `fails ${error.keyword}`}`;
  }
}
