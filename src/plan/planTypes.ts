/**
 * The plan format's types: the parsed plan, with defaults applied (`Plan`), and (taskInputs.ts)
 * the plan as it is written (`PlanInput`, one shape per task kind). They read as its
 * documentation; schema.ts holds the zod schemas that produce the parsed plan (and checks at
 * compile time that the two agree), and re-exports every type here.
 */
import type { KeyLimits } from '../../machines/protocol.js';
import type { Condition } from '../../machines/when.js';
import type { ProviderType } from '../providers/providerTypes.js';
import type { TaskKind } from './kinds/index.js';

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
  /**
   * A key that has met nothing but 429s for this long (ms) is set aside (`key:set-aside`); once
   * every key of the provider is, its requests fail `rate_limited` at once. Default 120000.
   */
  maxRateLimitedMs?: number;
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
  /** The server's own per-key limits (0: every request refused). Default: the provider's `limits` (what the runtime is told). */
  limits?: { rpm?: number; itpm?: number; otpm?: number; burst?: { rpm?: number; itpm?: number; otpm?: number } };
  /** Fault rates in [0, 1]. */
  faults?: { http500?: number; http529?: number; reset?: number; stall?: number; streamError?: number };
  /** How long a stalled request hangs. Default 120000. */
  stallMs?: number;
  /** false: no rate-limit headers and no retry-after (the limits are enforced the same). Default true. */
  headers?: boolean;
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

/** The task kinds and what each means: one module each, src/plan/kinds/. */
export type { TaskKind } from './kinds/index.js';

/** A map's items: a JSON array or JSONL file (relative to the plan file), a task's JSON array output, or inline. */
export type MapItems = { file: string } | { from: string } | { values: unknown[] };

export interface TaskSpec {
  /** `^[A-Za-z0-9_.:/-]+$`, at most 200 characters, unique in the plan. */
  id: string;
  /**
   * `task` (default). `plan`: the output is a JSON list of sub-tasks (validated like this plan)
   * that join the run. `review`: reviews the task named in `reviews`, approving it or sending it
   * back with findings, at most `maxRounds` times. `map`, `reduce`: one step per item, a merge of
   * many outputs. `fn`: runs the function named in `fn`. `approval`: a person decides on the
   * output of the task named in `approves`.
   */
  kind: TaskKind;
  /** For `kind: "review"`: the task reviewed (added to deps if missing). */
  reviews?: string;
  /** For `kind: "approval"`: the task whose output a person approves (added to deps if missing). */
  approves?: string;
  /**
   * For `kind: "review"`: reviews made at most (the last one's verdict stands). Default 2. For
   * `kind: "approval"`: decisions asked at most (each rejection with a note but the last sends
   * the approved task back).
   */
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
  /**
   * For `kind: "fn"`: the function the task runs (a name given to `createSwarm({ functions })`,
   * or a named export of the CLI's `--functions` module). For a map: the function each item runs
   * (instead of `model` and `prompt`); for a reduce, the one that merges the inputs.
   */
  fn?: string;
  /**
   * Name of an entry in `models`. Every task that calls a model names its model: there is no
   * inheritance. Required by `task`, `plan` and `review`, and by a map or a reduce without `fn`.
   */
  model?: string;
  system?: string;
  /**
   * `{{dep}}` is replaced by the output of the dependency `dep`. Required where `model` is; an
   * approval's is the question the person answers.
   */
  prompt?: string;
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
  /**
   * Runs only if this condition on its deps' outputs holds, judged once, when it would become
   * ready; false: it is skipped (cause `condition`), and so is what depends on it, but a join.
   */
  when?: Condition;
  /**
   * `all` (default): it starts once every dep completed. `any`: a join: it starts once every dep
   * has ended (completed, failed, skipped) and at least one completed; if none did it is skipped.
   */
  after?: 'all' | 'any';
}

/** A branch's condition (machines/when.ts): a test of one dep's output, or tests combined. */
export type { Condition, WhenTest } from '../../machines/when.js';

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
  | {
      /** An http(s) URL, or `{ env: NAME }`: the URL a token rides in, read when the run connects and never stored. */
      url: EnvValue;
      headers?: Record<string, EnvValue>;
      trusted: boolean;
    };

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

/** The plan as a file or code writes it (`PlanInput`, `TaskInput`, one shape per kind): taskInputs.ts. */
export type * from './taskInputs.js';
