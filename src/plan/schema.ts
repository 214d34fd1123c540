/**
 * The plan format: what a run is asked to do, as one JSON object (the same for the API and the CLI).
 *
 * The types (the documentation) are in planTypes.ts, re-exported here; this file holds the zod
 * schemas that check the structure and apply the defaults. Cross-references (deps, models,
 * providers, fallbacks, environment variables, tools) are checked by `validate.ts` and
 * `checkTasks.ts`, which report every problem at once.
 *
 * Objects are strict: an unknown field is an error, because a typo (`promt`, `maxRetires`) would
 * otherwise be silently ignored and the run would do something else than what was written.
 *
 * The schemas are built when first used (`planSchemas()`), and zod loads then (zod.ts): not
 * with `import 'swarmstate'` (issue 27).
 */
import type { z } from 'zod';
import { PROVIDER_TYPE_NAMES } from '../providers/providerTypes.js';
import { conditionSchema } from './conditionSchema.js';
import { zod } from './zod.js';
import { acceptShape } from './gates.js';
import type { AcceptSpec, Plan, PlanDefaults } from './planTypes.js';
import type { AcceptInput } from './taskInputs.js';
import { FN_NAME_PATTERN, TASK_ID_MAX_LENGTH, TASK_ID_PATTERN, TASK_KIND_NAMES, taskKindList } from './names.js';
// Read only when a task is parsed (the refinement): the kind modules load after this schema.
import { kindOfTask } from './kinds/index.js';

export type * from './planTypes.js';

// ---------------------------------------------------------------------------------------------
// Names and numbers
// ---------------------------------------------------------------------------------------------

export { TASK_ID_MAX_LENGTH, TASK_ID_PATTERN };
/** Provider and model names end up in actor ids (`pool:<provider>`), so no `/` or `:`. */
export const NAME_PATTERN = /^[A-Za-z0-9_.-]+$/;
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const PLAN_DEFAULTS: Readonly<PlanDefaults> = Object.freeze({
  maxInFlight: 5,
  maxRetries: 4,
  taskTimeoutMs: 600_000,
  onFailure: 'continue',
  maxTurns: 8,
});
export const DEFAULT_MODEL_MAX_TOKENS = 1024;

function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x) as unknown;
  return proto === Object.prototype || proto === null;
}

let built: PlanSchemas | undefined;

/** The plan's zod schemas, built on their first use (zod loads then). */
export function planSchemas(): PlanSchemas {
  return (built ??= buildSchemas());
}

export type PlanSchemas = ReturnType<typeof buildSchemas>;
/** The whole plan's schema: what `validatePlan` parses. */
export type PlanSchema = PlanSchemas['PlanSchema'];

function buildSchemas() {
  const z = zod();
  const positiveInt = () => z.int().min(1, { error: 'must be a positive integer' });
  const nonNegativeInt = () => z.int().min(0, { error: 'must be a non-negative integer' });
  /** Node's timers fire at once for 2^31 ms or more: a longer duration is refused, not shortened to 1 ms. */
  const MAX_DURATION_MS = 2 ** 31 - 1;
  const durationMs = (min: 0 | 1 = 1) =>
    (min === 1 ? positiveInt() : nonNegativeInt()).max(MAX_DURATION_MS, { error: `must be at most ${MAX_DURATION_MS} ms (about 24.8 days)` });
  const price = () => z.number().min(0, { error: 'must be a non-negative number (USD per million tokens)' });
  const name = (what: string) =>
    z
      .string()
      .min(1, { error: `${what} name must not be empty`, abort: true })
      .max(100, { error: `${what} name must be at most 100 characters` })
      .regex(NAME_PATTERN, { error: `${what} name may use only letters, digits, "_", "." and "-"` });

  // ---------------------------------------------------------------------------------------------
  // Schemas
  // ---------------------------------------------------------------------------------------------

  /**
   * A table keyed by names the plan gives (providers, models, servers, ...). zod's records drop a
   * `__proto__` key without a word, and a plain object's lookups see `constructor` and friends
   * from its prototype: read as a Map (every key kept, the same paths in issues), the table comes
   * out as a null-prototype object, where every name is only what the plan says it is.
   */
  function nameRecord<K extends z.ZodType<string, string>, V extends z.ZodType>(key: K, value: V, params?: Parameters<typeof z.map>[2]) {
    const schema = z
      .preprocess((input) => (isPlainObject(input) ? new Map(Object.entries(input)) : input), z.map(key, value, params))
      .transform((entries) => {
        const table = Object.create(null) as Record<string, z.output<V>>;
        for (const [k, v] of entries) table[k] = v;
        return table;
      });
    return schema as unknown as z.ZodType<Record<string, z.output<V>>, Record<string, z.input<V>>>;
  }


  /** A non-empty string without whitespace. The message names no value: the input is a secret. */
  const InlineKeySchema = z
    .string()
    .min(1, { error: 'an inline key must not be empty' })
    .refine((s) => !/\s/.test(s), { error: 'an inline key must not contain whitespace' });

  const EnvKeySchema = z.strictObject({
    env: z.string().regex(ENV_NAME_PATTERN, { error: 'must be an environment variable name (letters, digits, "_")' }),
  });

  const KeySchema = z.union([InlineKeySchema, EnvKeySchema], {
    error: 'a key is {"env": "VAR_NAME"} or an inline key string',
  });

  const burst = () => z.number().gt(0, { error: 'must be greater than 0' });

  const LimitsSchema = z.strictObject({
    rpm: positiveInt().optional(),
    itpm: positiveInt().optional(),
    otpm: positiveInt().optional(),
    /** Bucket capacities; default one second of each rate (at least 1). */
    burst: z.strictObject({ rpm: burst().optional(), itpm: burst().optional(), otpm: burst().optional() }).optional(),
    concurrency: positiveInt().optional(),
  });

  const rate = () => z.number().min(0, { error: 'must be a rate in [0, 1]' }).max(1, { error: 'must be a rate in [0, 1]' });

  const SimSchema = z.strictObject({
    protocol: z.enum(['anthropic', 'openai']).default('anthropic'),
    seed: z.int().optional(),
    ttftMs: z
      .union([nonNegativeInt(), z.tuple([nonNegativeInt(), nonNegativeInt()]).refine(([min, max]) => min <= max, { error: 'must be [min, max] with min <= max' })])
      .optional(),
    tokensPerSecond: z.number().gt(0, { error: 'must be greater than 0' }).optional(),
    prefillMsPer1kTokens: z.number().min(0, { error: 'must be >= 0' }).optional(),
    // 0 is a key throttled to zero: the simulator refuses its every request (429).
    limits: z
      .strictObject({
        rpm: nonNegativeInt().optional(),
        itpm: nonNegativeInt().optional(),
        otpm: nonNegativeInt().optional(),
        burst: z.strictObject({ rpm: burst().optional(), itpm: burst().optional(), otpm: burst().optional() }).optional(),
      })
      .optional(),
    faults: z
      .strictObject({ http500: rate().optional(), http529: rate().optional(), reset: rate().optional(), stall: rate().optional(), streamError: rate().optional() })
      .optional(),
    stallMs: durationMs().optional(),
    headers: z.boolean().optional(),
  });

  const ProviderSchema = z.strictObject({
    type: z.enum(PROVIDER_TYPE_NAMES),
    baseURL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    keys: z.array(KeySchema).default([]),
    limits: LimitsSchema.optional(),
    headersTimeoutMs: durationMs().optional(),
    bodyTimeoutMs: durationMs().optional(),
    maxRateLimitedMs: durationMs().optional(),
    sim: SimSchema.optional(),
    cache: z.boolean().optional(),
    cacheFanOut: z.boolean().optional(),
  });

  const PriceSchema = z.strictObject({
    input: price(),
    output: price(),
    cacheWrite: price().optional(),
    cacheRead: price().optional(),
  });

  const ModelSchema = z.strictObject({
    provider: z.string().min(1, { error: 'must not be empty' }),
    model: z.string().min(1, { error: 'must not be empty' }),
    maxTokens: positiveInt().default(DEFAULT_MODEL_MAX_TOKENS),
    price: PriceSchema.optional(),
    fallback: z.array(z.string().min(1, { error: 'must not be empty' })).default([]),
    contextTokens: positiveInt().optional(),
    maxInFlight: positiveInt().optional(),
    weight: z.number().gt(0, { error: 'must be greater than 0' }).default(100),
    temperature: z.number().min(0, { error: 'must be 0 or more' }).max(2, { error: 'must be at most 2' }).optional(),
    topP: z.number().gt(0, { error: 'must be greater than 0' }).max(1, { error: 'must be at most 1' }).optional(),
    stopSequences: z
      .array(z.string().min(1, { error: 'must not be empty' }))
      .min(1, { error: 'must list at least one sequence (or leave the field out)' })
      .max(4, { error: 'at most 4 stop sequences' })
      .optional(),
    routes: z
      .array(
        z.strictObject({
          provider: z.string().min(1, { error: 'must not be empty' }),
          model: z.string().min(1, { error: 'must not be empty' }),
          weight: z.number().gt(0, { error: 'must be greater than 0' }),
          price: PriceSchema.optional(),
        }),
      )
      .default([]),
  });

  const DefaultsSchema = z
    .strictObject({
      maxInFlight: positiveInt().default(PLAN_DEFAULTS.maxInFlight),
      maxRetries: nonNegativeInt().default(PLAN_DEFAULTS.maxRetries),
      taskTimeoutMs: durationMs().default(PLAN_DEFAULTS.taskTimeoutMs),
      maxRateLimitWaits: nonNegativeInt().optional(),
      onFailure: z.enum(['continue', 'fail-fast']).default(PLAN_DEFAULTS.onFailure),
      maxTurns: positiveInt().default(PLAN_DEFAULTS.maxTurns),
    })
    // prefault (not default): an absent section is parsed as `{}`, so the field defaults apply.
    .prefault({});

  const usd = () => z.number().gt(0, { error: 'must be greater than 0' });

  const BudgetSchema = z.strictObject({
    usd: usd().optional(),
    perModel: nameRecord(z.string(), usd()).optional(),
  });

  const TaskIdSchema = z
    .string()
    .min(1, { error: 'a task id must not be empty', abort: true })
    .max(TASK_ID_MAX_LENGTH, { error: `a task id must be at most ${TASK_ID_MAX_LENGTH} characters` })
    .regex(TASK_ID_PATTERN, { error: 'a task id may use only letters, digits and _ . : / -' });

  /**
   * A JSON Schema object. In code it may also be a zod schema, which `validatePlan` turns into a
   * JSON Schema before this parse (src/plan/typed.ts): so the input type admits one, the output never.
   */
  const OutputSchemaField = z.record(z.string(), z.unknown(), { error: 'must be a JSON Schema object' }) as unknown as z.ZodType<
    Record<string, unknown>,
    Record<string, unknown> | z.ZodType
  >;

  const TaskSchema = z.strictObject({
    id: TaskIdSchema,
    kind: z.enum(TASK_KIND_NAMES, { error: `must be ${taskKindList()}` }).default('task'),
    reviews: z.string().min(1, { error: 'must name a task' }).optional(),
    approves: z.string().min(1, { error: 'must name a task' }).optional(),
    maxRounds: positiveInt().optional(),
    items: z
      .union([z.strictObject({ file: z.string().min(1) }), z.strictObject({ from: z.string().min(1) }), z.strictObject({ values: z.array(z.unknown()) })], {
        error: 'items is {"file": "items.jsonl"}, {"from": "<task id>"} or {"values": [...]}',
      })
      .optional(),
    as: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'must be a name of letters, digits and "_"' }).optional(),
    maxItems: positiveInt().optional(),
    key: z.string().min(1, { error: 'must name an item field' }).optional(),
    dedupe: z.string().min(1, { error: 'must be "text" or an output field' }).optional(),
    over: z.union([z.string().min(1, { error: 'must name a task' }), z.array(z.string().min(1, { error: 'must name a task' }))]).optional(),
    fanIn: z.int().min(2, { error: 'a reduce merges at least 2 inputs per call: fanIn must be an integer >= 2' }).optional(),
    fn: z.string().regex(FN_NAME_PATTERN, { error: 'must be a function\'s name: letters, digits, "_" and "$", not starting with a digit' }).optional(),
    // Required by the kinds that call a model (the refinement below asks each task's kind).
    model: z.string().min(1, { error: 'must name a model' }).optional(),
    system: z.string().optional(),
    prompt: z.string().min(1, { error: 'must not be empty' }).optional(),
    deps: z.array(z.string()).default([]),
    priority: z.int().default(0),
    tools: z.array(z.string().min(1, { error: 'must not be empty' })).default([]),
    maxTurns: positiveInt().optional(),
    maxRetries: nonNegativeInt().optional(),
    timeoutMs: durationMs().optional(),
    maxTokens: positiveInt().optional(),
    maxInputTokens: positiveInt().optional(),
    budgetUsd: usd().optional(),
    output: z.strictObject({ schema: OutputSchemaField }).optional(),
    // The quality gates, one field each (gates.ts).
    accept: (z.strictObject(acceptShape()) as unknown as z.ZodType<AcceptSpec, AcceptInput>).optional(),
    when: conditionSchema().optional(),
    after: z
      .enum(['all', 'any'], { error: 'must be "all" (the default: every dep completes first) or "any" (a join: once every dep has ended and one completed)' })
      .optional(),
  }).superRefine(
    (t, ctx) => {
      // Run on a task that failed elsewhere too (`when`), so a missing model is said with the rest.
      if (typeof t !== 'object' || t === null) return;
      for (const { field, message } of kindOfTask(t as Record<string, unknown>)?.required(t as Record<string, unknown>) ?? []) {
        ctx.addIssue({ code: 'custom', path: [field], message });
      }
    },
    { when: () => true },
  );

  /** `{ "env": NAME }`: a value read from the environment when the run connects, never stored. */
  const EnvRefSchema = z.strictObject({ env: z.string().regex(ENV_NAME_PATTERN, { error: 'must be an environment variable name' }) });

  const EnvValueSchema = z.union([z.string(), EnvRefSchema], {
    error: 'a value is a string or {"env": "VAR_NAME"}',
  });

  const McpServerSchema = z.union(
    [
      z.strictObject({
        command: z.string().min(1, { error: 'must not be empty' }),
        args: z.array(z.string()).default([]),
        env: nameRecord(z.string(), EnvValueSchema).optional(),
        cwd: z.string().optional(),
        trusted: z.boolean().default(false),
      }),
      z.strictObject({
        url: z.union([z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }), EnvRefSchema], {
          error: 'must be an http(s) URL or {"env": "VAR_NAME"}',
        }),
        headers: nameRecord(z.string(), EnvValueSchema).optional(),
        trusted: z.boolean().default(false),
      }),
    ],
    { error: 'an MCP server is {"command": ..., "args": [...]} (stdio) or {"url": ...} (Streamable HTTP)' },
  );

  const ToolsSchema = z
    .strictObject({
      servers: nameRecord(
        z.string().regex(/^[A-Za-z0-9_-]+$/, { error: 'a server name may use only letters, digits, "_" and "-" (no ".": tools are named <server>.<tool>)' }),
        McpServerSchema,
      ).prefault({}),
      shareable: z.array(z.string().min(1)).default([]),
      batchWindowMs: durationMs(0).default(10),
      batchSize: positiveInt().default(16),
      cacheTtlMs: durationMs(0).default(300_000),
      callTimeoutMs: durationMs().default(60_000),
      serverConcurrency: positiveInt().default(8),
    })
    .prefault({});

  const CompactionSchema = z
    .strictObject({
      model: z.string().min(1, { error: 'must name a model' }).optional(),
      keepLast: positiveInt().default(4),
    })
    .prefault({});

  /** A required section's message says what the section is for; other messages defer to zod's. */
  const section = (purpose: string) => (iss: { input?: unknown }) =>
    iss.input === undefined ? `required: ${purpose}` : undefined;

  const PlanSchema = z.strictObject({
    // Required only where a task calls a model (validate.ts says so): a plan of code steps has none.
    providers: nameRecord(name('provider'), ProviderSchema).default({}),
    models: nameRecord(name('model'), ModelSchema).default({}),
    defaults: DefaultsSchema,
    budget: BudgetSchema.optional(),
    hooks: z.strictObject({ module: z.string().min(1, { error: 'must name a module' }) }).optional(),
    limits: z.strictObject({ maxDepth: positiveInt().default(1), maxSubtasks: positiveInt().default(20) }).prefault({}),
    tools: ToolsSchema,
    compaction: CompactionSchema,
    tasks: z
      .array(TaskSchema, { error: section('the list of tasks to run') })
      .min(1, { error: 'a plan needs at least one task' }),
  });

  return { KeySchema, LimitsSchema, SimSchema, ProviderSchema, PriceSchema, ModelSchema, DefaultsSchema, BudgetSchema, TaskIdSchema, TaskSchema, McpServerSchema, ToolsSchema, CompactionSchema, PlanSchema };
}

// The hand-written types above are the documentation; this keeps them equal to the schema's output.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _planMatchesSchema: Same<z.output<PlanSchema>, Plan> = true;
void _planMatchesSchema;
