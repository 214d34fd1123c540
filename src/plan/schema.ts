/**
 * The plan format: what a run is asked to do, as one JSON object (the same for the API and the CLI).
 *
 * This file holds the types (first, so they read as the documentation) and the zod schemas that
 * check the structure and apply the defaults. Cross-references (deps, models, providers, fallbacks,
 * environment variables, tools) are checked by `validate.ts`, which reports every problem at once.
 *
 * Objects are strict: an unknown field is an error, because a typo (`promt`, `maxRetires`) would
 * otherwise be silently ignored and the run would do something else than what was written.
 */
import { z } from 'zod';
import type { KeyLimits } from '../../machines/protocol.js';
import { PROVIDER_TYPE_NAMES, type ProviderType } from '../providers/providerTypes.js';
import { TASK_KIND_NAMES, taskKindList, type TaskKind } from './taskKinds.js';

// ---------------------------------------------------------------------------------------------
// Types (the parsed plan, with defaults applied)
// ---------------------------------------------------------------------------------------------

/** The provider types and what each means: one table, src/providers/providerTypes.ts. */
export type { ProviderType } from '../providers/providerTypes.js';

/**
 * An API key: the name of an environment variable that holds it (preferred), or the key inline.
 * An inline key is a secret: it is never echoed in an issue, an error or an event.
 */
export type KeySpec = { env: string } | string;

export interface ProviderSpec {
  type: ProviderType;
  /** Overrides the provider's default endpoint (a proxy, a gateway, the simulator). */
  baseURL?: string;
  /** One key actor per entry. Empty only for `sim`, `custom` and `ai-sdk` providers, which then have one implicit key. */
  keys: KeySpec[];
  /** Limits of EACH key (not of the provider as a whole). */
  limits?: KeyLimits;
  /** Max wait for a response's headers, ms. Default 60000. */
  headersTimeoutMs?: number;
  /** Max silence between two chunks of a response body, ms. Default 120000. */
  bodyTimeoutMs?: number;
  /** Only for `type: "sim"`: how the embedded simulated server behaves. */
  sim?: SimSpec;
  /** Anthropic protocol: place prompt-cache breakpoints (tools, system, first user message). Default true. */
  cache?: boolean;
  /**
   * Cache-aware fan-out: of several ready tasks sharing a prompt prefix (tools + system), send one
   * first and the others once its response has started, so they read the cache instead of all
   * writing it. Default: on for the Anthropic protocol (with `cache`), off for OpenAI.
   */
  cacheFanOut?: boolean;
}

/**
 * The embedded simulated provider (docs/sim.md): a real HTTP server on 127.0.0.1 that the swarm
 * starts for a `sim` provider and talks to over its wire protocol.
 */
export interface SimSpec {
  /** Which wire protocol the swarm speaks to it. Default anthropic. */
  protocol: 'anthropic' | 'openai';
  /** Seed of its replies and faults. Default: the swarm's seed. */
  seed?: number;
  /** Time to first token: fixed, or [min, max] per request. Default 0. */
  ttftMs?: number | [number, number];
  /** Output speed after the first token. Default: instant. */
  tokensPerSecond?: number;
  /** Prompt processing: ms per 1,000 input tokens not read from the cache, added to the time to first token. Default 0. */
  prefillMsPer1kTokens?: number;
  /** The server's own per-key limits. Default: the provider's `limits` (what the runtime is told). */
  limits?: { rpm?: number; itpm?: number; otpm?: number; burst?: { rpm?: number; itpm?: number; otpm?: number } };
  /** Fault rates in [0, 1]. */
  faults?: { http500?: number; http529?: number; reset?: number; stall?: number; streamError?: number };
  /** How long a stalled request hangs. Default 120000. */
  stallMs?: number;
}

/** USD per million tokens. */
export interface ModelPrice {
  input: number;
  output: number;
  cacheWrite?: number;
  cacheRead?: number;
}

export interface ModelSpec {
  /** Name of an entry in `providers`. */
  provider: string;
  /** The provider's model id, e.g. `claude-haiku-4-5`. */
  model: string;
  /** Default output cap of a call; a task's `maxTokens` overrides it. */
  maxTokens: number;
  /** USD per million tokens. Default: the built-in table (src/cost/prices.ts); required with a budget when the model is not in it. */
  price?: ModelPrice;
  /** Other entries in `models` to use, in order, when this model's route is down (breaker open) or keeps answering overloaded. */
  fallback: string[];
  /** Tasks on this model running at once, beside the run's `maxInFlight`. Default: no cap of its own. */
  maxInFlight?: number;
  /** Share of attempts on the model's own `provider`/`model` route, against `routes`' weights. Default 100. */
  weight: number;
  /**
   * More routes for this logical model (another provider, a canary): each attempt picks one by
   * weight (seeded), e.g. `weight: 95` here and `[{ provider: 'b', model: 'x', weight: 5 }]`.
   */
  routes: { provider: string; model: string; weight: number; price?: ModelPrice }[];
  /** Context window in tokens: a request that would not fit is compacted first. Default: built in per model (src/models.ts). */
  contextTokens?: number;
  /** Sampling temperature sent with every call on this model, 0 to 2 (Anthropic takes at most 1). Default: the provider's. */
  temperature?: number;
  /** Nucleus sampling: the probability mass to sample from, above 0 and at most 1. Default: the provider's. */
  topP?: number;
  /** Texts that end the answer where they appear (at most 4, as OpenAI allows). Default: none. */
  stopSequences?: string[];
}

export type OnFailure = 'continue' | 'fail-fast';

export interface PlanDefaults {
  /** Agents in flight at once across the whole run. */
  maxInFlight: number;
  /** Retries of one task: model-call retries inside an attempt and new attempts share this budget. */
  maxRetries: number;
  taskTimeoutMs: number;
  /** `continue`: skip only the dependents of a failed task. `fail-fast`: cancel the run. */
  onFailure: OnFailure;
  /** Model calls in one attempt (a turn ends when the model answers without calling a tool). */
  maxTurns: number;
  /**
   * 429s one attempt may wait out before it fails with `rate_limited`. Unset (the default): a
   * 429 is only ever a wait, bounded by the attempt's deadline. 429s never use `maxRetries`.
   */
  maxRateLimitWaits?: number;
}

export interface PlanBudget {
  /** Cap on the run's spend in USD: every model call reserves its worst case against it first. */
  usd?: number;
  /** Caps per model (the plan's model names), in USD. */
  perModel?: Record<string, number>;
}

/** The task kinds and what each means: one table, src/plan/taskKinds.ts. */
export type { TaskKind } from './taskKinds.js';

/** A map's items: a JSON array or JSONL file (relative to the plan file), a task's JSON array output, or inline. */
export type MapItems = { file: string } | { from: string } | { values: unknown[] };

export interface TaskSpec {
  /** `^[A-Za-z0-9_.:/-]+$`, at most 200 characters, unique in the plan. */
  id: string;
  /**
   * `task` (default). `plan`: the output is a JSON list of sub-tasks (validated like this plan)
   * that join the run. `review`: reviews the task named in `reviews`, approving it or sending it
   * back with findings, at most `maxRounds` times.
   */
  kind: TaskKind;
  /** For `kind: "review"`: the task reviewed (added to deps if missing). */
  reviews?: string;
  /** For `kind: "review"`: reviews made at most (the last one's verdict stands). Default 2. */
  maxRounds?: number;
  /** For `kind: "map"`: one sub-task per item, `<id>/<index>` (or `<id>/<item[key]>`). */
  items?: MapItems;
  /** For `kind: "map"`: the item's name in the prompt (`{{item}}`, `{{item.field}}`). Default "item". */
  as?: string;
  /** For `kind: "map"`: most items it takes (more is an error). Default 1000. */
  maxItems?: number;
  /** For `kind: "map"`: the item field that names its sub-task instead of its index. */
  key?: string;
  /** For `kind: "map"`: `"text"` or an output field: duplicate item outputs are dropped. */
  dedupe?: string;
  /** For `kind: "reduce"`: a map (its items), a task with a JSON array output (its elements), or a list of tasks. */
  over?: string | string[];
  /** For `kind: "reduce"`: inputs merged per call at most. Default 8. */
  fanIn?: number;
  /** Name of an entry in `models`. Every task names its model: there is no inheritance. */
  model: string;
  system?: string;
  /** `{{dep}}` is replaced by the output of the dependency `dep`. */
  prompt: string;
  /** Ids of tasks whose output this task needs; it starts after all of them complete. */
  deps: string[];
  /** Higher first among tasks ready at the same time; ties go to the longer critical path, then FIFO. */
  priority: number;
  /** Names of tools the model may call. */
  tools: string[];
  maxTurns?: number;
  maxRetries?: number;
  timeoutMs?: number;
  maxTokens?: number;
  /** Most input tokens one request of this task may carry (beside the model's context window). */
  maxInputTokens?: number;
  /** Cap on this task's spend in USD, across its attempts. */
  budgetUsd?: number;
  /** Structured output: the answer must be JSON that this JSON Schema accepts (sent natively, checked on arrival). */
  output?: OutputSpec;
  /** Quality gates on the answer: a rejected one is retried with the reason (`rejected_output`). */
  accept?: AcceptSpec;
}

/** `output` of a task (src/plan/structured.ts checks the schema itself). */
export interface OutputSpec {
  /** A JSON Schema (draft 2020-12 or 07, as ajv reads it). The result's `output` is then the parsed value. */
  schema: Record<string, unknown>;
}

/** `accept` of a task: every gate given must pass, or the attempt fails with `rejected_output`. */
export interface AcceptSpec {
  /** The answer has at least this many characters (trimmed). */
  minChars?: number;
  /** A regular expression (JavaScript syntax) the answer must match somewhere. */
  pattern?: string;
  /** A scoring call: the judge model reads the answer and scores it from 0 to 1. */
  judge?: JudgeSpec;
}

export interface JudgeSpec {
  /** Name of an entry in `models`. */
  model: string;
  /** What the judge scores the answer on. */
  prompt: string;
  /** Lowest passing score, in [0, 1]. Default 0.7. */
  threshold: number;
}

/** A value given inline, or read from an environment variable (for secrets). */
export type EnvValue = string | { env: string };

/** An MCP server: a command run over stdio, or a Streamable HTTP endpoint. */
export type McpServerSpec =
  | { command: string; args: string[]; env?: Record<string, EnvValue>; cwd?: string; trusted: boolean }
  | { url: string; headers?: Record<string, EnvValue>; trusted: boolean };

export interface ToolsSpec {
  /** MCP servers by name; their tools are called `<server>.<tool>`. */
  servers: Record<string, McpServerSpec>;
  /**
   * Tools the plan declares safe to share and cache (identical concurrent calls run once), on top
   * of read-only, not open-world tools of trusted servers. MCP annotations alone are not trusted.
   */
  shareable: string[];
  /** Calls arriving within this window go out together. Default 10. */
  batchWindowMs: number;
  /** ...or as soon as this many are waiting. Default 16. */
  batchSize: number;
  /** How long results of shareable tools are kept. Default 300000; 0: no cache. */
  cacheTtlMs: number;
  /** A call not answered by then is cancelled and gets an error result. Default 60000. */
  callTimeoutMs: number;
  /** Calls in flight at once per server. Default 8. */
  serverConcurrency: number;
}

export interface CompactionSpec {
  /** The model (a name in `models`) that summarizes the middle of a long conversation. */
  model?: string;
  /** Messages kept at the end. Default 4. */
  keepLast: number;
}

/** Code that sees every model call before it is sent (src/hooks.ts). */
export interface HooksSpec {
  /** A module exporting `beforeDispatch`; a relative path is read from the plan file's folder (CLI). */
  module: string;
}

export interface PlanLimits {
  /** Planning depth: 1 (default) lets the plan's tasks plan, but not their sub-tasks. */
  maxDepth: number;
  /** Sub-tasks one planner task may create. Default 20. */
  maxSubtasks: number;
}

export interface Plan {
  hooks?: HooksSpec;
  limits: PlanLimits;
  providers: Record<string, ProviderSpec>;
  models: Record<string, ModelSpec>;
  defaults: PlanDefaults;
  budget?: PlanBudget;
  tools: ToolsSpec;
  compaction: CompactionSpec;
  tasks: TaskSpec[];
}

// ---------------------------------------------------------------------------------------------
// Names and numbers
// ---------------------------------------------------------------------------------------------

export const TASK_ID_PATTERN = /^[A-Za-z0-9_.:/-]+$/;
export const TASK_ID_MAX_LENGTH = 200;
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

function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return false;
  const proto = Object.getPrototypeOf(x) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A non-empty string without whitespace. The message names no value: the input is a secret. */
const InlineKeySchema = z
  .string()
  .min(1, { error: 'an inline key must not be empty' })
  .refine((s) => !/\s/.test(s), { error: 'an inline key must not contain whitespace' });

const EnvKeySchema = z.strictObject({
  env: z.string().regex(ENV_NAME_PATTERN, { error: 'must be an environment variable name (letters, digits, "_")' }),
});

export const KeySchema = z.union([InlineKeySchema, EnvKeySchema], {
  error: 'a key is {"env": "VAR_NAME"} or an inline key string',
});

const burst = () => z.number().gt(0, { error: 'must be greater than 0' });

export const LimitsSchema = z.strictObject({
  rpm: positiveInt().optional(),
  itpm: positiveInt().optional(),
  otpm: positiveInt().optional(),
  /** Bucket capacities; default one second of each rate (at least 1). */
  burst: z.strictObject({ rpm: burst().optional(), itpm: burst().optional(), otpm: burst().optional() }).optional(),
  concurrency: positiveInt().optional(),
});

const rate = () => z.number().min(0, { error: 'must be a rate in [0, 1]' }).max(1, { error: 'must be a rate in [0, 1]' });

export const SimSchema = z.strictObject({
  protocol: z.enum(['anthropic', 'openai']).default('anthropic'),
  seed: z.int().optional(),
  ttftMs: z
    .union([nonNegativeInt(), z.tuple([nonNegativeInt(), nonNegativeInt()]).refine(([min, max]) => min <= max, { error: 'must be [min, max] with min <= max' })])
    .optional(),
  tokensPerSecond: z.number().gt(0, { error: 'must be greater than 0' }).optional(),
  prefillMsPer1kTokens: z.number().min(0, { error: 'must be >= 0' }).optional(),
  limits: z
    .strictObject({
      rpm: positiveInt().optional(),
      itpm: positiveInt().optional(),
      otpm: positiveInt().optional(),
      burst: z.strictObject({ rpm: burst().optional(), itpm: burst().optional(), otpm: burst().optional() }).optional(),
    })
    .optional(),
  faults: z
    .strictObject({ http500: rate().optional(), http529: rate().optional(), reset: rate().optional(), stall: rate().optional(), streamError: rate().optional() })
    .optional(),
  stallMs: durationMs().optional(),
});

export const ProviderSchema = z.strictObject({
  type: z.enum(PROVIDER_TYPE_NAMES),
  baseURL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  keys: z.array(KeySchema).default([]),
  limits: LimitsSchema.optional(),
  headersTimeoutMs: durationMs().optional(),
  bodyTimeoutMs: durationMs().optional(),
  sim: SimSchema.optional(),
  cache: z.boolean().optional(),
  cacheFanOut: z.boolean().optional(),
});

export const PriceSchema = z.strictObject({
  input: price(),
  output: price(),
  cacheWrite: price().optional(),
  cacheRead: price().optional(),
});

export const ModelSchema = z.strictObject({
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

export const DefaultsSchema = z
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

export const BudgetSchema = z.strictObject({
  usd: usd().optional(),
  perModel: nameRecord(z.string(), usd()).optional(),
});

export const TaskIdSchema = z
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

export const TaskSchema = z.strictObject({
  id: TaskIdSchema,
  kind: z.enum(TASK_KIND_NAMES, { error: `must be ${taskKindList()}` }).default('task'),
  reviews: z.string().min(1, { error: 'must name a task' }).optional(),
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
  model: z.string().min(1, { error: 'must name a model' }),
  system: z.string().optional(),
  prompt: z.string().min(1, { error: 'must not be empty' }),
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
  accept: z
    .strictObject({
      minChars: positiveInt().optional(),
      pattern: z.string().min(1, { error: 'must not be empty' }).optional(),
      judge: z
        .strictObject({
          model: z.string().min(1, { error: 'must name a model' }),
          prompt: z.string().min(1, { error: 'must not be empty' }),
          threshold: z.number().min(0, { error: 'must be a score in [0, 1]' }).max(1, { error: 'must be a score in [0, 1]' }).default(0.7),
        })
        .optional(),
    })
    .optional(),
});

const EnvValueSchema = z.union([z.string(), z.strictObject({ env: z.string().regex(ENV_NAME_PATTERN, { error: 'must be an environment variable name' }) })], {
  error: 'a value is a string or {"env": "VAR_NAME"}',
});

export const McpServerSchema = z.union(
  [
    z.strictObject({
      command: z.string().min(1, { error: 'must not be empty' }),
      args: z.array(z.string()).default([]),
      env: nameRecord(z.string(), EnvValueSchema).optional(),
      cwd: z.string().optional(),
      trusted: z.boolean().default(false),
    }),
    z.strictObject({
      url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
      headers: nameRecord(z.string(), EnvValueSchema).optional(),
      trusted: z.boolean().default(false),
    }),
  ],
  { error: 'an MCP server is {"command": ..., "args": [...]} (stdio) or {"url": ...} (Streamable HTTP)' },
);

export const ToolsSchema = z
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

export const CompactionSchema = z
  .strictObject({
    model: z.string().min(1, { error: 'must name a model' }).optional(),
    keepLast: positiveInt().default(4),
  })
  .prefault({});

/** A required section's message says what the section is for; other messages defer to zod's. */
const section = (purpose: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? `required: ${purpose}` : undefined;

export const PlanSchema = z.strictObject({
  providers: nameRecord(name('provider'), ProviderSchema, {
    error: section('every model names a provider defined in this section'),
  }),
  models: nameRecord(name('model'), ModelSchema, {
    error: section('every task names a model defined in this section'),
  }),
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

/** The plan as written (defaults not yet applied). */
export type PlanInput = z.input<typeof PlanSchema>;

// The hand-written types above are the documentation; this keeps them equal to the schema's output.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _planMatchesSchema: Same<z.output<typeof PlanSchema>, Plan> = true;
void _planMatchesSchema;
