/**
 * From a validated plan to the supervisor's input: keys into the keyring (ids out), models into
 * routes (one breaker each), tasks into supervised tasks with their critical-path rank and
 * every default applied. Nothing here runs anything.
 */
import type { SupervisorInput } from '../machines/supervisor/machine.js';
export type { BreakerOptions } from '../machines/breaker.machine.js';
import type { SupervisedTask } from '../machines/tasks/types.js';
import type { Keyring } from './keys.js';
import { criticalPathRanks, type ModelSpec, type Plan, type TaskSpec } from './plan/index.js';
import { DEFAULT_FAN_IN } from './plan/mapreduce.js';
import { implicitDepsOf } from './plan/kinds/index.js';
import type { ProviderRequest } from './providers/types.js';
import { PROVIDER_TYPES } from './providers/providerTypes.js';
import { contextWindowOf, minCacheTokensOf } from './models.js';
import type { BusTool } from '../machines/protocol.js';
import type { CallTarget } from '../machines/agent/index.js';
import type { LedgerBudgets } from '../machines/ledger.machine.js';
import type { BreakerOptions } from '../machines/breaker.machine.js';
import { DEFAULT_MAX_RATE_LIMITED_MS } from '../machines/keyLimits.js';
import { priceOf } from './cost/prices.js';
import { outputCheckOf } from './plan/structured.js';

export interface ResolveOptions {
  runId: string;
  keyring: Keyring;
  env: Record<string, string | undefined>;
  /** Every tool of the run, as the bus serves it (in-process and MCP). */
  busTools: BusTool[];
  /** Estimated tokens of the definitions of these tools. */
  toolTokens?: (names: readonly string[]) => number;
  /** False turns off the bus's sharing and cache (for comparisons). Default true. */
  shareTools?: boolean;
  /** The run has a beforeDispatch hook. */
  hooked?: boolean;
  /** The run has a beforeToolCall hook. */
  toolHooked?: boolean;
  seed: number;
  backoff: { baseMs: number; maxMs: number };
  breaker?: BreakerOptions;
}

export function resolveRun(plan: Plan, opts: ResolveOptions): SupervisorInput {
  const providers = Object.entries(plan.providers).map(([name, spec]) => {
    const ids = spec.keys.length > 0 ? opts.keyring.addProvider(name, spec.keys, opts.env) : [opts.keyring.addAnonymous(name)];
    // A key whose rate nothing states starts on probation: one request until the server has
    // accepted it once, so its first reply's headers set the pace before a burst goes out, and a
    // bad key answers one 401. With `limits.rpm` stated the pace is known from the start, and a bad
    // key costs at most one burst of 401s, each sent again at once on another key. (A provider
    // without keys sends none: there is nothing a server could refuse.)
    const probation = spec.keys.length > 0 && spec.limits?.rpm === undefined;
    const maxRateLimitedMs = spec.maxRateLimitedMs ?? DEFAULT_MAX_RATE_LIMITED_MS;
    return { name, keys: ids.map((keyId) => ({ keyId, limits: { ...spec.limits }, probation, maxRateLimitedMs })) };
  });

  const routes = new Set<string>();
  for (const model of Object.values(plan.models)) {
    routes.add(`${model.provider}/${model.model}`);
    for (const r of model.routes) routes.add(`${r.provider}/${r.model}`);
  }

  const specs = plan.tasks.map(withReviewed);
  const ranks = criticalPathRanks(specs);
  const taskOpts: TaskResolveOptions = { toolTokens: opts.toolTokens, toolNames: opts.busTools.map((t) => t.name), models: new Map() };
  const tasks = specs.map((t) => resolveTask(plan, t, ranks.get(t.id) ?? 1, taskOpts));
  const d = plan.defaults;

  return {
    runId: opts.runId,
    tasks,
    providers,
    routes: [...routes].map((route) => ({ route, ...opts.breaker })),
    toolBus: {
      tools: opts.busTools,
      batchWindowMs: plan.tools.batchWindowMs,
      batchSize: plan.tools.batchSize,
      cacheTtlMs: plan.tools.cacheTtlMs,
      callTimeoutMs: plan.tools.callTimeoutMs,
      serverConcurrency: plan.tools.serverConcurrency,
      ...(opts.shareTools === false ? { share: false } : {}),
    },
    ...(compactionOf(plan) ? { compaction: compactionOf(plan)! } : {}),
    ...(budgetsOf(plan) ? { budgets: budgetsOf(plan)! } : {}),
    keepLast: plan.compaction.keepLast,
    ...(opts.hooked ? { hooked: true } : {}),
    ...(opts.toolHooked ? { toolHooked: true } : {}),
    maxInFlight: d.maxInFlight,
    ...(modelCapsOf(plan) ? { modelMaxInFlight: modelCapsOf(plan)! } : {}),
    onFailure: d.onFailure,
    backoff: opts.backoff,
    ...(d.maxRateLimitWaits !== undefined ? { maxRateLimitWaits: d.maxRateLimitWaits } : {}),
    seed: opts.seed,
  };
}

/**
 * What resolving a task needs of the run (tool sizes, tool names for planners), and `models`:
 * what each model's tasks share (its context window, whether it fans out), worked out once per
 * model when given, instead of once per task.
 */
export type TaskResolveOptions = Pick<ResolveOptions, 'toolTokens'> & { toolNames?: readonly string[]; models?: Map<string, ModelFacts> };

/** What a task's model gives every task on it. */
interface ModelFacts {
  contextTokens: number;
  cacheFanOut: boolean;
  /** Its provider's input-token limit does not count cache reads (Anthropic's ITPM). */
  cacheReadsFree: boolean;
}

function modelFacts(plan: Plan, name: string, memo: Map<string, ModelFacts> | undefined): ModelFacts {
  const known = memo?.get(name);
  if (known) return known;
  const model = plan.models[name]!;
  const provider = plan.providers[model.provider]!;
  const protocol = PROVIDER_TYPES[provider.type].protocol(provider);
  const facts = {
    contextTokens: contextWindowOf(model.model, model.contextTokens),
    cacheFanOut: cacheFanOutOf(provider, protocol),
    cacheReadsFree: protocol === 'anthropic',
  };
  memo?.set(name, facts);
  return facts;
}

/** A task's deps include what its kind reads without listing it: the task it reviews or approves, a map's `items.from`, a reduce's `over`. */
function withReviewed<T extends { deps: string[]; kind?: string }>(t: T): T {
  const more = implicitDepsOf(t as unknown as Record<string, unknown>).filter((d) => !t.deps.includes(d));
  // Most tasks have none: nothing to allocate.
  return more.length > 0 ? { ...t, deps: [...t.deps, ...more] } : t;
}

/**
 * One task of the plan (or of a planner's output, at `depth` > 0) as the supervisor runs it:
 * its model's route, price, fallbacks and weighted routes, every default applied, and for
 * planner and review tasks the instructions that tell the model what answer the runtime reads.
 */
export function resolveTask(plan: Plan, spec: TaskSpec, rank: number, opts: TaskResolveOptions, extra: { depth?: number; parent?: string } = {}): SupervisedTask {
  const step = spec as StepSpec;
  if (step.fn !== undefined || step.kind === 'approval') return resolveStep(plan, step, rank, extra);
  const t = withReviewed(spec);
  // The kinds that reach here call a model: their `model` and `prompt` are required (src/plan/kinds/).
  const modelName = t.model!;
  const model = plan.models[modelName]!;
  const d = plan.defaults;
  const task: SupervisedTask = {
    id: t.id,
    deps: t.deps,
    priority: t.priority,
    rank,
    modelName,
    provider: model.provider,
    model: model.model,
    maxTokens: t.maxTokens ?? model.maxTokens,
    prompt: t.prompt!,
    tools: t.tools,
    maxTurns: t.maxTurns ?? d.maxTurns,
    maxRetries: t.maxRetries ?? d.maxRetries,
    timeoutMs: t.timeoutMs ?? d.taskTimeoutMs,
  };
  if (t.system !== undefined) task.system = t.system;
  // The request must leave room for the answer inside the context window.
  const facts = modelFacts(plan, modelName, opts.models);
  const window = facts.contextTokens - task.maxTokens;
  task.inputBudget = Math.max(1, Math.min(window, t.maxInputTokens ?? Infinity));
  if (t.tools.length > 0 && opts.toolTokens) task.toolTokens = opts.toolTokens(t.tools);
  const price = priceOf(model.model, model.price);
  if (price) task.price = price;
  if (model.fallback.length > 0) task.fallbacks = model.fallback.map((name) => targetOfModel(plan, name, t.maxTokens));
  if (model.routes.length > 0) {
    const own = { ...targetOfModel(plan, modelName, t.maxTokens), weight: model.weight };
    task.routes = [own, ...model.routes.map((r) => {
      const routePrice = priceOf(r.model, r.price);
      return { provider: r.provider, model: r.model, maxTokens: t.maxTokens ?? model.maxTokens, modelName, weight: r.weight, ...(routePrice ? { price: routePrice } : {}) };
    })];
  }
  if (facts.cacheFanOut) {
    task.cacheFanOut = true;
    task.cacheMinTokens = minCacheTokensOf(model.model);
    if (facts.cacheReadsFree) task.cacheReadsFree = true;
  }
  if (extra.depth) task.depth = extra.depth;
  if (extra.parent !== undefined) task.parent = extra.parent;
  const check = outputCheckOf(t.output, t.accept);
  if (check) task.output = check;
  if (t.accept?.judge) {
    const { model: judgeModel, prompt, threshold } = t.accept.judge;
    // A score needs few tokens: the judge's answer is capped well below a task's.
    const target = targetOfModel(plan, judgeModel, undefined);
    task.judge = { ...target, maxTokens: Math.min(target.maxTokens, JUDGE_MAX_TOKENS), prompt, threshold };
  }
  if (t.kind === 'plan') {
    task.kind = 'plan';
    task.prompt = `${t.prompt}\n\n${plannerInstructions(plan, t, extra.depth ?? 0, opts.toolNames ?? [])}`;
  } else if (t.kind === 'review') {
    task.kind = 'review';
    task.reviews = t.reviews!;
    task.maxRounds = t.maxRounds ?? 2;
    task.prompt = `${t.prompt}\n\n${reviewerInstructions(t.reviews!)}`;
  } else if (t.kind === 'map') {
    task.kind = 'map';
    task.map = {};
    if (t.items && 'from' in t.items) task.map.from = t.items.from;
    if (t.dedupe !== undefined) task.map.dedupe = t.dedupe;
  } else if (t.kind === 'reduce') {
    // A reduce made by another (a group of its tree) merges exactly the inputs it lists.
    task.kind = 'reduce';
    task.reduce = { fanIn: t.fanIn ?? DEFAULT_FAN_IN, over: t.over!, ...(extra.parent !== undefined ? { group: true } : {}) };
  }
  return task;
}

/** A task as the plan-side kinds give it: a function's name, an approval's target, a map item's value (sub-tasks only). */
type StepSpec = Omit<TaskSpec, 'kind' | 'model' | 'prompt'> & { kind?: string; model?: string; prompt?: string; fn?: string; approves?: string; item?: unknown };

/**
 * A task that calls no model: a function step (`fn`, or a map or reduce that names one) or an
 * approval. No route, no price, no key: its `modelName` says what it is (`fn:<name>`, `approval`)
 * in progress lines and the journal. An approval has no deadline unless its timeoutMs says so.
 */
function resolveStep(plan: Plan, t: StepSpec, rank: number, extra: { depth?: number; parent?: string }): SupervisedTask {
  const d = plan.defaults;
  const approval = t.kind === 'approval';
  const deps = [...t.deps, ...implicitDepsOf(t as Record<string, unknown>)];
  const task: SupervisedTask = {
    id: t.id,
    deps: [...new Set(deps)],
    priority: t.priority,
    rank,
    modelName: approval ? 'approval' : `fn:${t.fn}`,
    provider: '',
    model: '',
    maxTokens: 0,
    prompt: t.prompt ?? '',
    tools: [],
    maxTurns: 1,
    maxRetries: t.maxRetries ?? d.maxRetries,
    timeoutMs: t.timeoutMs ?? d.taskTimeoutMs,
  };
  if (extra.depth) task.depth = extra.depth;
  if (extra.parent !== undefined) task.parent = extra.parent;
  const check = outputCheckOf(t.output, undefined);
  if (check) task.output = check;
  if (approval) {
    task.kind = 'approval';
    task.reviews = t.approves!;
    task.question = t.prompt ?? '';
    task.maxRounds = t.maxRounds ?? 2;
    if (t.timeoutMs !== undefined) task.decisionTimeoutMs = t.timeoutMs;
    return task;
  }
  task.fn = t.fn!;
  if (t.kind === 'map') {
    task.kind = 'map';
    task.map = {};
    if (t.items && 'from' in t.items) task.map.from = t.items.from;
    if (t.dedupe !== undefined) task.map.dedupe = t.dedupe;
  } else if (t.kind === 'reduce') {
    task.kind = 'reduce';
    task.reduce = { fanIn: t.fanIn ?? DEFAULT_FAN_IN, over: t.over! };
  } else {
    task.kind = 'fn';
    if (t.item !== undefined) task.item = t.item;
  }
  return task;
}

/** Output cap of a judge's scoring call: a score and a short reason. */
const JUDGE_MAX_TOKENS = 256;

/** Cache-aware fan-out: on by default where the wire has explicit cache breakpoints (Anthropic). */
function cacheFanOutOf(provider: Plan['providers'][string], protocol: string | undefined): boolean {
  // Without breakpoints there is nothing to wait for; OpenAI caches by itself, so fan-out is opt-in there.
  return provider.cache !== false && (provider.cacheFanOut ?? protocol === 'anthropic');
}

function plannerInstructions(plan: Plan, t: TaskSpec, depth: number, toolNames: readonly string[]): string {
  const models = Object.entries(plan.models).map(([name, m]) => `"${name}" (${m.model})`).join(', ');
  const canPlan = depth + 1 < plan.limits.maxDepth;
  const kinds = canPlan ? '"task" (default), "plan" or "review"' : '"task" (default) or "review" (sub-tasks cannot plan)';
  return [
    '<planning>',
    'Answer with a JSON list of sub-tasks and nothing else. They run in parallel where their deps allow, and the tasks after you read the outputs of the last ones.',
    'Each sub-task is {"id": "...", "model": "...", "prompt": "..."} with optional "deps" (ids of other sub-tasks' +
      (t.deps.length > 0 ? ` or of ${t.deps.map((d) => `"${d}"`).join(', ')}` : '') +
      '), "system", "tools", "maxTokens", "priority", "kind" (' + kinds + '; a review task names the sub-task it reviews in "reviews").',
    `Every sub-task names its model, one of: ${models}.`,
    ...(toolNames.length > 0 ? [`Tools they may use: ${toolNames.join(', ')}.`] : []),
    `At most ${plan.limits.maxSubtasks} sub-tasks.`,
    '</planning>',
  ].join('\n');
}

function reviewerInstructions(target: string): string {
  return [
    '<review-verdict>',
    `You review the output of task "${target}". If it is acceptable as it is, answer APPROVE on the first line.`,
    'Otherwise answer REVISE: on the first line, followed by the specific findings to fix.',
    '</review-verdict>',
  ].join('\n');
}

/** The compaction model's route and price, when the plan names one. */
function compactionOf(plan: Plan): CallTarget | undefined {
  const name = plan.compaction.model;
  if (name === undefined) return undefined;
  const m = plan.models[name]!;
  const price = priceOf(m.model, m.price);
  return { provider: m.provider, model: m.model, maxTokens: m.maxTokens, modelName: name, ...(price ? { price } : {}) };
}

/** The run's budgets, when the plan has any: run, per model, per task. */
function budgetsOf(plan: Plan): LedgerBudgets | undefined {
  const perTaskUsd = Object.fromEntries(plan.tasks.filter((t) => t.budgetUsd !== undefined).map((t) => [t.id, t.budgetUsd!]));
  const budgets: LedgerBudgets = {};
  if (plan.budget?.usd !== undefined) budgets.runUsd = plan.budget.usd;
  if (plan.budget?.perModel) budgets.perModelUsd = plan.budget.perModel;
  if (Object.keys(perTaskUsd).length > 0) budgets.perTaskUsd = perTaskUsd;
  return Object.keys(budgets).length > 0 ? budgets : undefined;
}

/** Per-model caps on tasks in flight, when any model has one. */
function modelCapsOf(plan: Plan): Record<string, number> | undefined {
  const caps = Object.entries(plan.models).flatMap(([name, m]) => (m.maxInFlight === undefined ? [] : [[name, m.maxInFlight] as const]));
  return caps.length > 0 ? Object.fromEntries(caps) : undefined;
}

export { targetOfModel };

/** A plan model as a call target (a fallback keeps the task's own maxTokens cap, if it set one). */
function targetOfModel(plan: Plan, name: string, maxTokens: number | undefined): CallTarget {
  const m = plan.models[name]!;
  const price = priceOf(m.model, m.price);
  return { provider: m.provider, model: m.model, maxTokens: maxTokens ?? m.maxTokens, modelName: name, ...(price ? { price } : {}) };
}

/** A plan model's sampling settings, as a ProviderRequest carries them (only those it sets). */
export type Sampling = Pick<ProviderRequest, 'temperature' | 'topP' | 'stopSequences'>;

export function samplingOf(model: Pick<ModelSpec, 'temperature' | 'topP' | 'stopSequences'> | undefined): Sampling {
  const out: Sampling = {};
  if (model?.temperature !== undefined) out.temperature = model.temperature;
  if (model?.topP !== undefined) out.topP = model.topP;
  if (model?.stopSequences !== undefined) out.stopSequences = [...model.stopSequences];
  return out;
}
