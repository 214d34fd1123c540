/**
 * `swarmstate demo --real`: the demo plan, pointed at a real provider instead of the simulator.
 * The key comes from the environment (ANTHROPIC_API_KEY first, else OPENAI_API_KEY with an
 * optional OPENAI_BASE_URL); each simulated model becomes a real one of the same tier, and
 * everything only the simulator understands goes: its settings, its keys and the `[[sim:...]]`
 * directives in the prompts.
 */
import { jsonValueEnd } from '../util/jsonScan.js';
import { expandedCounts, mapItemCounts } from './demo.js';

/** A real model standing in for a simulated one, with its list price (USD per million tokens). */
interface RealModel {
  model: string;
  price: { input: number; output: number };
}

type RealType = 'anthropic' | 'openai';

/**
 * The simulated model ids of the demo and of examples/plans, by tier. `sim-strong` is priced as
 * a mid-tier model in the examples, and stands for one here.
 */
const TIER_IDS = {
  cheap: ['claude-haiku-4-5', 'sim-fast', 'sim-haiku'],
  mid: ['claude-sonnet-4-5', 'sim-sonnet', 'sim-strong'],
  strong: ['claude-opus-4-5'],
} as const;

function tiers(cheap: RealModel, mid: RealModel, strong: RealModel): Record<string, RealModel> {
  const real = { cheap, mid, strong };
  const table: Record<string, RealModel> = {};
  for (const tier of ['cheap', 'mid', 'strong'] as const) for (const id of TIER_IDS[tier]) table[id] = real[tier];
  return table;
}

/**
 * The real model for each model id the demo and the example plans use on the simulator (cheap,
 * mid, strong tier). OpenAI's are non-reasoning models: a reasoning model spends a small
 * `max_tokens` on thinking.
 */
export const REAL_MODELS: Record<RealType, Record<string, RealModel>> = {
  anthropic: tiers({ model: 'claude-haiku-4-5', price: { input: 1, output: 5 } }, { model: 'claude-sonnet-4-5', price: { input: 3, output: 15 } }, { model: 'claude-opus-4-5', price: { input: 5, output: 25 } }),
  openai: tiers({ model: 'gpt-4.1-nano', price: { input: 0.1, output: 0.4 } }, { model: 'gpt-4.1-mini', price: { input: 0.4, output: 1.6 } }, { model: 'gpt-4.1', price: { input: 2, output: 8 } }),
};

/** A real provider is slower than the simulator and the opus-class report writes 1000 tokens. */
const REAL_TASK_TIMEOUT_MS = 300_000;

/** Thrown when no API key is set: says which variables would do. */
export class MissingApiKeyError extends Error {
  readonly code = 'NO_API_KEY';
  constructor() {
    super(
      'a real run needs an API key in the environment: set ANTHROPIC_API_KEY (Anthropic models), ' +
        'or OPENAI_API_KEY (OpenAI models; add OPENAI_BASE_URL for another OpenAI-compatible server, up to and including its /v1)',
    );
    this.name = 'MissingApiKeyError';
  }
}

interface ProviderJson {
  type?: string;
  limits?: { concurrency?: number; [limit: string]: number | undefined };
  [field: string]: unknown;
}
interface ModelJson {
  provider?: string;
  model?: string;
  [field: string]: unknown;
}
interface TaskJson {
  prompt?: string;
  system?: string;
  maxTokens?: number;
  accept?: { judge?: { prompt?: string; [field: string]: unknown }; [field: string]: unknown };
  [field: string]: unknown;
}
interface PlanJson {
  providers?: Record<string, ProviderJson>;
  models?: Record<string, ModelJson>;
  defaults?: { taskTimeoutMs?: number; [field: string]: unknown };
  tasks?: TaskJson[];
  [field: string]: unknown;
}

/**
 * Turns a plan written for the simulator into one for a real provider; the input is not changed.
 * `notes` say what changed, for the CLI to print before the run.
 *
 * @throws MissingApiKeyError when neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set.
 * @throws Error when the plan uses a simulated model id with no real counterpart in REAL_MODELS.
 * @example
 * const { plan, notes } = realPlan(await loadDemoPlan(), process.env);
 * notes.forEach((n) => console.error(n));
 */
export function realPlan<P>(plan: P, env: Record<string, string | undefined>): { plan: P; notes: string[] } {
  const target = chooseTarget(env);
  const out = structuredClone(plan) as PlanJson;
  const notes: string[] = [];

  const simProviders = new Set<string>();
  for (const [name, spec] of Object.entries(out.providers ?? {})) {
    if (spec.type !== 'sim') continue;
    simProviders.add(name);
    const concurrency = spec.limits?.concurrency;
    // The plan's rpm/itpm/otpm were the simulator's keys' limits; the real ones depend on the
    // account's tier, and the runtime learns them from the rate-limit headers of each answer.
    out.providers![name] = {
      type: target.type,
      keys: [{ env: target.keyVar }],
      ...(target.baseURL ? { baseURL: target.baseURL } : {}),
      ...(concurrency !== undefined ? { limits: { concurrency } } : {}),
    };
    notes.push(
      `provider "${name}": ${target.type}${target.baseURL ? ` at ${target.baseURL}` : ''} with the key in ${target.keyVar}` +
        ` (simulator settings and keys dropped; rpm/itpm/otpm are learnt from the server's rate-limit headers${concurrency !== undefined ? `; ${concurrency} requests at once` : ''})`,
    );
  }
  if (simProviders.size === 0) notes.push('the plan has no "sim" provider: providers left as they are');

  for (const [name, spec] of Object.entries(out.models ?? {})) {
    if (!spec.provider || !simProviders.has(spec.provider)) continue;
    // Own entries only: a model id like `constructor` has no stand-in, whatever Object.prototype holds.
    const table = REAL_MODELS[target.type];
    const real = spec.model !== undefined && Object.hasOwn(table, spec.model) ? table[spec.model] : undefined;
    if (!real) {
      const known = Object.keys(REAL_MODELS[target.type]).join(', ');
      throw new Error(`model "${name}": no real ${target.type} model stands in for simulated "${spec.model}" (known: ${known})`);
    }
    out.models![name] = { ...spec, model: real.model, price: real.price };
    notes.push(`model "${name}": ${real.model} ($${real.price.input} in / $${real.price.output} out per million tokens)`);
  }

  let directives = 0;
  let caps = 0;
  for (const task of out.tasks ?? []) {
    for (const field of ['prompt', 'system'] as const) {
      if (typeof task[field] !== 'string') continue;
      const stripped = stripSimDirectives(task[field]);
      task[field] = stripped.text;
      directives += stripped.removed;
    }
    // A quality gate's judge is a model call too: its criteria carry the scripted scores.
    const judge = task.accept?.judge;
    if (judge && typeof judge.prompt === 'string') {
      const stripped = stripSimDirectives(judge.prompt);
      judge.prompt = stripped.text;
      directives += stripped.removed;
    }
    // Per-task output caps were sized for the simulator's `[[sim:length N]]` replies.
    if (task.maxTokens !== undefined) {
      delete task.maxTokens;
      caps++;
    }
  }
  if (directives > 0) notes.push(`removed ${directives} [[sim:...]] directives from the prompts (the model decides its tool calls and lengths)`);
  if (caps > 0) notes.push(`${caps} tasks use their model's maxTokens instead of a cap sized for the simulator`);
  // Unset means the plan default (600 s), which is already long enough for real models.
  if (out.defaults && out.defaults.taskTimeoutMs !== undefined && out.defaults.taskTimeoutMs < REAL_TASK_TIMEOUT_MS) {
    out.defaults.taskTimeoutMs = REAL_TASK_TIMEOUT_MS;
    notes.push(`tasks time out after ${REAL_TASK_TIMEOUT_MS / 1000} s`);
  }
  const calls = modelCalls(out as Record<string, unknown>);
  const extras = [calls.toolTasks > 0 ? `${calls.toolTasks} of them with a tool round trip` : '', calls.judged > 0 ? `${calls.judged} quality-gate judgements` : ''].filter(Boolean);
  notes.push(`this makes at least ${calls.tasks + calls.toolTasks + calls.judged} billed model calls (${calls.tasks} model tasks${extras.length ? `, ${extras.join(', ')}` : ''})`);
  return { plan: out as P, notes };
}

function chooseTarget(env: Record<string, string | undefined>): { type: RealType; keyVar: string; baseURL?: string } {
  if (env.ANTHROPIC_API_KEY) return { type: 'anthropic', keyVar: 'ANTHROPIC_API_KEY' };
  if (env.OPENAI_API_KEY) {
    const baseURL = env.OPENAI_BASE_URL?.trim();
    return baseURL ? { type: 'openai', keyVar: 'OPENAI_API_KEY', baseURL } : { type: 'openai', keyVar: 'OPENAI_API_KEY' };
  }
  throw new MissingApiKeyError();
}

const MARK = '[[sim:';

/**
 * Removes every `[[sim:...]]` directive (docs/sim.md) from a text, with the blanks around it, so
 * a real model never sees them. A `tool` directive's JSON arguments may hold `]]`: they are
 * skipped as JSON (strings and nesting respected), as the simulator reads them.
 *
 * @example
 * stripSimDirectives('Look it up.\n[[sim:tool db__get {"id":[[1]]}]]') // { text: 'Look it up.', removed: 1 }
 */
export function stripSimDirectives(text: string): { text: string; removed: number } {
  let out = '';
  let removed = 0;
  let from = 0;
  for (let start = text.indexOf(MARK); start >= 0; start = text.indexOf(MARK, from)) {
    const end = directiveEnd(text, start);
    if (end < 0) break; // not closed: not a directive, leave the rest as it is
    out += text.slice(from, start).replace(/[ \t]+$/, '');
    from = end;
    removed++;
  }
  if (removed === 0) return { text, removed };
  out += text.slice(from);
  // The lines the directives stood on are gone; no trailing or doubled blank lines are left.
  return { text: out.replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim(), removed };
}

/** Index just past the `]]` closing the directive at `start`, or -1 when it is not closed. */
function directiveEnd(text: string, start: number): number {
  let at = start + MARK.length;
  const tool = /^tool\s+[^\s\]{]+\s*/.exec(text.slice(at));
  if (tool) {
    at += tool[0].length;
    if (text[at] === '{') at = jsonValueEnd(text, at);
    const close = /^\s*\]\]/.exec(text.slice(at));
    return close ? at + close[0].length : -1;
  }
  const close = text.indexOf(']]', at);
  return close < 0 ? -1 : close + 2;
}


/**
 * The fewest model calls a plan makes once its maps and reduces expand: one per task that calls
 * a model (a map or reduce itself calls none), one more per task with tools (the round trip
 * after a tool call) and per task with a judge. Retries and extra turns come on top.
 */
function modelCalls(plan: Record<string, unknown>): { tasks: number; toolTasks: number; judged: number } {
  const list = ((plan as PlanJson).tasks ?? []) as TaskJson[];
  const items = mapItemCounts(plan);
  let toolTasks = 0;
  let judged = 0;
  for (const t of list) {
    const copies = t.kind === 'map' ? (items.get(t.id) ?? 0) : 1;
    if (Array.isArray(t.tools) && t.tools.length > 0) toolTasks += copies;
    if (t.accept?.judge) judged += copies;
  }
  return { tasks: expandedCounts(plan).tasks, toolTasks, judged };
}
