/**
 * The ajv instances JSON Schemas compile on (tool arguments, output schemas) and the wording of
 * their errors. One shared instance per draft checks schemas against their meta-schema; each
 * schema then compiles on an instance of its own (plan/outputSchema.ts).
 */
import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, Options } from 'ajv';
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

const MAX_ERRORS_SHOWN = 8;

// Formats are hints here (the server checks what it cares about), and ajv must not log.
const options = { allErrors: true, strict: false, validateFormats: false, logger: false } as const;
let draft07: Ajv | undefined;
let draft2019: Ajv2019 | undefined;
let draft2020: Ajv2020 | undefined;

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
