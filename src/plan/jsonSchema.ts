/**
 * The plan's JSON Schema, generated from the zod schema (schema.ts) so the two cannot drift:
 * `npm run build` writes it to schema/plan.schema.json, which the package ships. Editors use it
 * for completion and checks when a plan says `"$schema": "<path or URL of that file>"`.
 *
 * It describes the plan as written (defaults not applied). The checks that span fields (a model
 * naming a provider that exists, cycles, keys present in the environment) are validatePlan's.
 * Draft-07, which every common editor reads.
 */
import type { z } from 'zod';
import { planSchemas } from './schema.js';
import { zod } from './zod.js';
import { foreignFields, PLAN_KINDS, TASK_KIND_NAMES, type PlanKind } from './kinds/index.js';

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
  const json = zod().toJSONSchema(schema, {
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

/**
 * Each kind's rules, as `if kind is k then ...`: the fields it requires, and those it does not
 * take (another kind's, or refused by it) as `false`. Read from the kind modules: a task with
 * every field is shown to each (with and without `fn`), and what it refuses is what it says.
 */
function kindRules(): Json[] {
  const fields = Object.keys(planSchemas().TaskSchema.shape);
  const probe = (withFn: boolean) => Object.fromEntries(fields.filter((f) => withFn || f !== 'fn').map((f) => [f, f === 'fn' ? 'f' : true]));
  const refusedBy = (kind: PlanKind, withFn: boolean) => new Set(kind.refused(probe(withFn)).map((p) => p.field));
  const no = (names: Iterable<string>) => Object.fromEntries([...names].map((f) => [f, false]));
  return TASK_KIND_NAMES.map((name) => {
    const kind: PlanKind = PLAN_KINDS[name];
    const foreign = foreignFields(Object.fromEntries(fields.map((f) => [f, true])), name).map((p) => p.field);
    const base = refusedBy(kind, false);
    const then: Json = {
      required: [...Object.keys(kind.requires), ...(kind.runs === 'model-or-fn' ? [] : kind.required({}).map((p) => p.field))],
      properties: no([...foreign, ...base]),
    };
    if (kind.runs === 'model-or-fn') {
      const withFn = [...refusedBy(kind, true)].filter((f) => !base.has(f));
      then.anyOf = [
        { required: ['fn'], properties: no(withFn) },
        { required: kind.required({}).map((p) => p.field), properties: no(['fn']) },
      ];
    }
    // No `kind` is a plain task: `properties` applies only to a field that is there.
    return { if: { properties: { kind: { const: name } }, ...(name === 'task' ? {} : { required: ['kind'] }) }, then };
  });
}

export function planJsonSchema(): Json {
  const body = strip(convert(planSchemas().PlanSchema));
  const properties = (body.properties ?? {}) as Json;
  const tasks = properties.tasks as Json | undefined;
  if (tasks && typeof tasks.items === 'object') tasks.items = { ...(tasks.items as Json), allOf: kindRules() };
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'swarmstate plan',
    description: 'A swarmstate plan: providers, models and a DAG of tasks (docs/plan-format.md).',
    ...body,
    // For the editor: where this schema is. The run ignores it.
    properties: { $schema: { type: 'string', description: 'The path or URL of this JSON Schema, for editors.' }, ...properties },
  };
}
