/**
 * Plan validation: every problem in a plan, reported at once, before anything runs.
 *
 * Two passes over the same input. The zod schema checks structure and applies defaults; the
 * reference checks (deps, cycles, models, providers, fallbacks, keys, tools) then run on the raw
 * input, on whatever parts are well-formed enough, so that one typo does not hide ten other
 * problems. Both passes are linear in the size of the plan.
 *
 * No issue ever carries a secret: inline keys are named by their position, environment variables
 * by their name, and input values are never echoed.
 */
import { isRecord, issue, plainMessages, structuralIssues, unknownName } from './issues.js';
import { DEFAULT_MODEL_MAX_TOKENS, ENV_NAME_PATTERN, planSchemas, type Plan } from './schema.js';
import { builtInPrice } from '../cost/prices.js';
import { withJsonSchemas } from './typed.js';
import { findCycles } from './ranks.js';
import { checkTasks } from './checkTasks.js';
import { functionNames } from './kinds/check.js';
import type { SwarmFunctions } from '../fn/types.js';
import { providerTypeOf } from '../providers/providerTypes.js';
import { parseUrl } from '../tools/urls.js';

/** One problem in a plan: where (`tasks[3].deps[0]`) and what. */
export interface PlanIssue {
  path: string;
  message: string;
}

export interface ValidateOptions {
  /** Where `{ env: NAME }` keys are looked up. Default: process.env. */
  env?: Record<string, string | undefined>;
  /** The known tool names. When given, a task naming any other tool is an issue. */
  tools?: Iterable<string>;
  /** Where a map's relative `items.file` is read from (the plan file's folder). Default: the working directory. */
  baseDir?: string;
  /**
   * The functions the run has (their names, or the functions by name): when given, each `fn` the
   * plan names must be one of them. Not given: the names are not checked.
   */
  functions?: readonly string[] | SwarmFunctions;
}

export type ValidationResult = { ok: true; plan: Plan } | { ok: false; issues: PlanIssue[] };

/** The plan has problems; `issues` lists them all, and so does the message, one per line. */
export class PlanValidationError extends Error {
  readonly code = 'PLAN_INVALID';
  constructor(readonly issues: PlanIssue[]) {
    const n = issues.length;
    super(
      `invalid plan: ${n} problem${n === 1 ? '' : 's'}, fix ${n === 1 ? 'it' : 'them'} and run again\n` +
        issues.map(formatIssue).join('\n'),
    );
    this.name = 'PlanValidationError';
  }
}

export function formatIssue(issue: PlanIssue): string {
  return `${issue.path || 'plan'}: ${issue.message}`;
}

/**
 * Checks a plan and applies its defaults.
 *
 * @example
 * const result = validatePlan(JSON.parse(text), { tools: ['read_file'] });
 * if (!result.ok) for (const issue of result.issues) console.error(formatIssue(issue));
 */
export function validatePlan(input: unknown, opts: ValidateOptions = {}): ValidationResult {
  const issues: PlanIssue[] = [];
  // `$schema` points an editor at the plan's JSON Schema (schema/plan.schema.json): it is for the
  // editor, and the run never sees it.
  let raw = input;
  if (isRecord(input) && Object.hasOwn(input, '$schema')) {
    const { $schema: ref, ...rest } = input;
    if (typeof ref !== 'string') issues.push(issue(['$schema'], "must be a string: the URL or path of the plan's JSON Schema"));
    raw = rest;
  }
  // A plan written in code may give a zod schema as a task's output.schema.
  raw = withJsonSchemas(raw);
  const parsed = planSchemas().PlanSchema.safeParse(raw, { error: plainMessages });
  if (!parsed.success) issues.push(...structuralIssues(parsed.error.issues));
  if (isRecord(raw)) {
    const env = opts.env ?? process.env;
    const providers = isRecord(raw.providers) ? raw.providers : undefined;
    const models = isRecord(raw.models) ? raw.models : undefined;
    requiredSections(raw, issues);
    if (providers) checkProviders(providers, env, issues);
    const hasBudget = isRecord(raw.budget) || (Array.isArray(raw.tasks) && raw.tasks.some((t) => isRecord(t) && t.budgetUsd !== undefined));
    if (models) checkModels(models, providers, hasBudget, issues);
    if (isRecord(raw.budget) && isRecord(raw.budget.perModel) && models) {
      for (const name of Object.keys(raw.budget.perModel)) {
        if (!Object.hasOwn(models, name)) issues.push(issue(['budget', 'perModel', name], unknownName('model', name, Object.keys(models))));
      }
    }
    const servers = isRecord(raw.tools) && isRecord(raw.tools.servers) ? new Set(Object.keys(raw.tools.servers)) : new Set<string>();
    if (Array.isArray(raw.tasks)) {
      checkTasks(raw.tasks, models, opts.tools ? new Set(opts.tools) : undefined, servers, issues, undefined, {
        ...(opts.baseDir !== undefined ? { baseDir: opts.baseDir } : {}),
        ...(opts.functions !== undefined ? { functions: functionNames(opts.functions) } : {}),
      });
    }
    if (isRecord(raw.compaction) && typeof raw.compaction.model === 'string' && models && !Object.hasOwn(models, raw.compaction.model)) {
      issues.push(issue(['compaction', 'model'], unknownName('model', raw.compaction.model, Object.keys(models))));
    }
    if (isRecord(raw.tools)) checkToolEnv(raw.tools, env, issues);
  }
  if (issues.length > 0 || !parsed.success) return { ok: false, issues };
  return { ok: true, plan: parsed.data };
}

/**
 * Like validatePlan, but returns the plan or throws PlanValidationError.
 *
 * @example
 * const plan = parsePlan(JSON.parse(await readFile('plan.json', 'utf8')));
 */
export function parsePlan(raw: unknown, opts: ValidateOptions = {}): Plan {
  const result = validatePlan(raw, opts);
  if (!result.ok) throw new PlanValidationError(result.issues);
  return result.plan;
}

/**
 * `models` is required once a task names a model, and `providers` once a model is defined: a
 * plan of code steps and approvals needs neither.
 */
function requiredSections(raw: Record<string, unknown>, out: PlanIssue[]) {
  const namesModel = Array.isArray(raw.tasks) && raw.tasks.some((t) => isRecord(t) && t.model !== undefined);
  const definesModels = isRecord(raw.models) && Object.keys(raw.models).length > 0;
  if (raw.models === undefined && namesModel) out.push(issue(['models'], 'required: every task names a model defined in this section'));
  if (raw.providers === undefined && (definesModels || (raw.models === undefined && namesModel))) {
    out.push(issue(['providers'], 'required: every model names a provider defined in this section'));
  }
}

// ---------------------------------------------------------------------------------------------
// Providers: keys present, env vars set, no key twice
// ---------------------------------------------------------------------------------------------

function checkProviders(providers: Record<string, unknown>, env: Record<string, string | undefined>, out: PlanIssue[]) {
  for (const name of Object.keys(providers)) {
    const p = providers[name];
    if (!isRecord(p)) continue;
    const type = providerTypeOf(p.type);
    if (type?.needsKeys && (p.keys === undefined || isEmptyArray(p.keys))) {
      out.push(issue(['providers', name, 'keys'], `an "${String(p.type)}" provider needs at least one key ({"env": "VAR_NAME"})`));
    }
    if (type?.inCode) {
      // Their endpoint and transport are the object given in code: settings here would do nothing.
      for (const field of ['baseURL', 'headersTimeoutMs', 'bodyTimeoutMs'] as const) {
        if (p[field] !== undefined) out.push(issue(['providers', name, field], `a "${p.type}" provider is an object given in code: set its ${field === 'baseURL' ? 'endpoint' : 'timeouts'} there, not in the plan`));
      }
    }
    if (typeof p.baseURL === 'string' && hasCredentials(p.baseURL)) {
      out.push(issue(['providers', name, 'baseURL'], 'must not carry a user name or password (they would not be sent): give the key in "keys"'));
    }
    if (p.sim !== undefined && p.type !== 'sim') {
      out.push(issue(['providers', name, 'sim'], `only a "sim" provider takes simulator settings (this one is "${String(p.type)}")`));
    }
    if (!Array.isArray(p.keys)) continue;
    // Values of inline keys are compared in memory only; issues name positions.
    const firstAt = new Map<string, number>();
    p.keys.forEach((k: unknown, j: number) => {
      let identity: string | undefined;
      if (typeof k === 'string' && k !== '') identity = `inline:${k}`;
      else if (isRecord(k) && typeof k.env === 'string' && ENV_NAME_PATTERN.test(k.env)) {
        identity = `env:${k.env}`;
        const value = Object.hasOwn(env, k.env) ? env[k.env] : undefined;
        if (value === undefined || value === '') {
          out.push(issue(['providers', name, 'keys', j, 'env'], `${envLabel(k.env)} is ${value === '' ? 'empty' : 'not set'}`));
        } else if (/[\s\u0000-\u001f\u007f-\u009f]/.test(value)) {
          // Sent as it is, a CR or a space makes every request fail with an error naming no variable.
          out.push(issue(['providers', name, 'keys', j, 'env'], `${envLabel(k.env)} holds whitespace or a control character (a line ending copied with the key?): an API key has none, remove it`));
        }
      }
      if (identity === undefined) return;
      const first = firstAt.get(identity);
      if (first === undefined) firstAt.set(identity, j);
      else out.push(issue(['providers', name, 'keys', j], `the same key as keys[${first}]`));
    });
  }
}

/**
 * `environment variable KEY_B`. A name that is not UPPER_SNAKE_CASE may be a key pasted where its
 * variable's name belongs, so it is not echoed.
 */
function envLabel(name: string): string {
  return /^[A-Z_][A-Z0-9_]{0,63}$/.test(name)
    ? `environment variable ${name}`
    : 'the environment variable named here (a key pasted in place of a variable name?)';
}

// ---------------------------------------------------------------------------------------------
// Models: provider and fallbacks exist, no fallback loop, priced when there is a budget
// ---------------------------------------------------------------------------------------------

function checkModels(
  models: Record<string, unknown>,
  providers: Record<string, unknown> | undefined,
  hasBudget: boolean,
  out: PlanIssue[],
) {
  const names = Object.keys(models);
  const indexOf = new Map(names.map((n, i) => [n, i]));
  const fallbacks: number[][] = names.map(() => []);
  names.forEach((name, i) => {
    const m = models[name];
    if (!isRecord(m)) return;
    if (providers && typeof m.provider === 'string' && m.provider !== '' && !Object.hasOwn(providers, m.provider)) {
      out.push(issue(['models', name, 'provider'], unknownName('provider', m.provider, Object.keys(providers))));
    }
    if (Array.isArray(m.routes) && providers) {
      m.routes.forEach((r: unknown, j: number) => {
        if (isRecord(r) && typeof r.provider === 'string' && r.provider !== '' && !Object.hasOwn(providers, r.provider)) {
          out.push(issue(['models', name, 'routes', j, 'provider'], unknownName('provider', r.provider, Object.keys(providers))));
        }
      });
    }
    // Anthropic's scale ends at 1; the schema allows OpenAI's 2.
    const provider = providers && typeof m.provider === 'string' && Object.hasOwn(providers, m.provider) ? providers[m.provider] : undefined;
    if (typeof m.temperature === 'number' && m.temperature > 1 && isRecord(provider) && provider.type === 'anthropic') {
      out.push(issue(['models', name, 'temperature'], `must be at most 1 on an Anthropic provider ("${m.provider}"), got ${m.temperature}`));
    }
    if (Array.isArray(m.fallback)) {
      m.fallback.forEach((f: unknown, j: number) => {
        if (typeof f !== 'string' || f === '') return;
        const target = indexOf.get(f);
        if (target === undefined) out.push(issue(['models', name, 'fallback', j], unknownName('model', f, names)));
        else fallbacks[i].push(target);
      });
    }
    if (hasBudget && m.price === undefined && typeof m.model === 'string' && builtInPrice(m.model) === undefined) {
      out.push(issue(['models', name, 'price'], `required when the plan has a budget: "${m.model}" is not in the built-in price table (USD per million tokens)`));
    }
    const maxTokens = m.maxTokens ?? DEFAULT_MODEL_MAX_TOKENS;
    if (typeof m.contextTokens === 'number' && typeof maxTokens === 'number' && maxTokens >= m.contextTokens) {
      out.push(issue(['models', name, 'maxTokens'], `must be less than contextTokens (${m.contextTokens})`));
    }
  });
  for (const cycle of findCycles(fallbacks)) {
    const loop = [...cycle.nodes, cycle.nodes[0]].map((i) => names[i]).join(' -> ');
    out.push(issue(['models', names[cycle.nodes[0]], 'fallback'], `fallback loop ${loop}`));
  }
}

// ---------------------------------------------------------------------------------------------

/** `{ "env": NAME }` values of MCP servers' url, env and headers must be set (a URL, to an http(s) URL). */
function checkToolEnv(tools: Record<string, unknown>, env: Record<string, string | undefined>, out: PlanIssue[]) {
  if (!isRecord(tools.servers)) return;
  for (const [name, server] of Object.entries(tools.servers)) {
    if (!isRecord(server)) continue;
    const url = server.url;
    if (typeof url === 'string' && hasCredentials(url)) out.push(issue(['tools', 'servers', name, 'url'], CREDENTIALS_IN_URL));
    if (isRecord(url) && typeof url.env === 'string' && ENV_NAME_PATTERN.test(url.env)) {
      const value = env[url.env] ?? '';
      // The value is never shown: the URL may carry a token, which is why it comes from there.
      if (value === '') out.push(issue(['tools', 'servers', name, 'url', 'env'], `environment variable ${url.env} is not set`));
      else if (!isHttpUrl(value)) out.push(issue(['tools', 'servers', name, 'url', 'env'], `environment variable ${url.env} does not hold an http(s) URL`));
      else if (hasCredentials(value)) out.push(issue(['tools', 'servers', name, 'url', 'env'], `environment variable ${url.env}: ${CREDENTIALS_IN_URL}`));
    }
    for (const field of ['env', 'headers'] as const) {
      const values = server[field];
      if (!isRecord(values)) continue;
      for (const [k, v] of Object.entries(values)) {
        if (isRecord(v) && typeof v.env === 'string' && ENV_NAME_PATTERN.test(v.env) && (env[v.env] ?? '') === '') {
          out.push(issue(['tools', 'servers', name, field, k, 'env'], `environment variable ${v.env} is not set`));
        }
      }
    }
  }
}

/** fetch (the MCP SDK's transport) refuses a URL with credentials, whatever the server would say. */
const CREDENTIALS_IN_URL = 'must not carry a user name or password (fetch refuses such a URL): send them in a header, e.g. "Authorization": {"env": "VAR_NAME"}';

function hasCredentials(value: string): boolean {
  const url = parseUrl(value);
  return url !== undefined && (url.username !== '' || url.password !== '');
}

/** What the schema's `z.url({ protocol: /^https?$/ })` accepts of an inline URL. */
function isHttpUrl(value: string): boolean {
  const url = parseUrl(value);
  return url !== undefined && /^https?:$/.test(url.protocol);
}

function isEmptyArray(x: unknown): boolean {
  return Array.isArray(x) && x.length === 0;
}
