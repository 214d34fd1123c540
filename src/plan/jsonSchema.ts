/**
 * The plan's JSON Schema, generated from the zod schema (schema.ts) so the two cannot drift:
 * `npm run build` writes it to schema/plan.schema.json, which the package ships. Editors use it
 * for completion and checks when a plan says `"$schema": "<path or URL of that file>"`.
 *
 * It describes the plan as written (defaults not applied). The checks that span fields (a model
 * naming a provider that exists, cycles, keys present in the environment) are validatePlan's.
 * Draft-07, which every common editor reads.
 */
import { z } from 'zod';
import { PlanSchema } from './schema.js';

type Json = Record<string, unknown>;

const OPTIONS = { io: 'input', unrepresentable: 'any', target: 'draft-7' } as const;

/** zod's internal definition of a schema node (what toJSONSchema's override is handed). */
type Def = { type: string; in?: { _zod: { def: Def } }; out?: { _zod: { def: Def } }; keyType?: z.ZodType; valueType?: z.ZodType };

/** The map inside a plan table (schema.ts `nameRecord`: preprocess -> map -> transform), if `def` is one. */
function tableOf(def: Def): Def | undefined {
  if (def.type === 'map') return def;
  if (def.type !== 'pipe') return undefined;
  return tableOf(def.in!._zod.def) ?? tableOf(def.out!._zod.def);
}

function convert(schema: z.ZodType): Json {
  const json = z.toJSONSchema(schema, {
    ...OPTIONS,
    // A table keyed by names is read as a Map (so `__proto__` stays a key): to JSON it is an object.
    override: (ctx) => {
      const table = tableOf(ctx.zodSchema._zod.def as unknown as Def);
      if (table === undefined) return;
      for (const key of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as Json)[key];
      Object.assign(ctx.jsonSchema, {
        type: 'object',
        propertyNames: strip(convert(table.keyType!)),
        additionalProperties: strip(convert(table.valueType!)),
      });
    },
  }) as Json;
  return json;
}

function strip(json: Json): Json {
  const { $schema: _drop, ...rest } = json;
  return rest;
}

export function planJsonSchema(): Json {
  const body = strip(convert(PlanSchema));
  const properties = (body.properties ?? {}) as Json;
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'swarmstate plan',
    description: 'A swarmstate plan: providers, models and a DAG of tasks (docs/plan-format.md).',
    ...body,
    // For the editor: where this schema is. The run ignores it.
    properties: { $schema: { type: 'string', description: 'The path or URL of this JSON Schema, for editors.' }, ...properties },
  };
}
