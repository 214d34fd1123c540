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
import { issue, nearest, plainMessages, structuralIssues } from './issues.js';
import { DEFAULT_MODEL_MAX_TOKENS, ENV_NAME_PATTERN, PlanSchema, type Plan } from './schema.js';
import { findCycles } from './ranks.js';
import { builtInPrice } from '../cost/prices.js';
import { fieldPathProblem, schemaProblems } from './structured.js';
import { withJsonSchemas } from './typed.js';
import { checkMapReduce, implicitDeps } from './mapreduce.js';
import { providerTypeOf } from '../providers/providerTypes.js';
import { foreignFields } from './taskKinds.js';

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
  const parsed = PlanSchema.safeParse(raw, { error: plainMessages });
  if (!parsed.success) issues.push(...structuralIssues(parsed.error.issues));
  if (isRecord(raw)) {
    const env = opts.env ?? process.env;
    const providers = isRecord(raw.providers) ? raw.providers : undefined;
    const models = isRecord(raw.models) ? raw.models : undefined;
    if (providers) checkProviders(providers, env, issues);
    const hasBudget = isRecord(raw.budget) || (Array.isArray(raw.tasks) && raw.tasks.some((t) => isRecord(t) && t.budgetUsd !== undefined));
    if (models) checkModels(models, providers, hasBudget, issues);
    if (isRecord(raw.budget) && isRecord(raw.budget.perModel) && models) {
      for (const name of Object.keys(raw.budget.perModel)) {
        if (!Object.hasOwn(models, name)) issues.push(issue(['budget', 'perModel', name], unknown('model', name, Object.keys(models))));
      }
    }
    const servers = isRecord(raw.tools) && isRecord(raw.tools.servers) ? new Set(Object.keys(raw.tools.servers)) : new Set<string>();
    if (Array.isArray(raw.tasks)) {
      checkTasks(raw.tasks, models, opts.tools ? new Set(opts.tools) : undefined, servers, issues);
      checkMapReduce(raw.tasks, issues, opts.baseDir);
    }
    if (isRecord(raw.compaction) && typeof raw.compaction.model === 'string' && models && !Object.hasOwn(models, raw.compaction.model)) {
      issues.push(issue(['compaction', 'model'], unknown('model', raw.compaction.model, Object.keys(models))));
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
      out.push(issue(['models', name, 'provider'], unknown('provider', m.provider, Object.keys(providers))));
    }
    if (Array.isArray(m.routes) && providers) {
      m.routes.forEach((r: unknown, j: number) => {
        if (isRecord(r) && typeof r.provider === 'string' && r.provider !== '' && !Object.hasOwn(providers, r.provider)) {
          out.push(issue(['models', name, 'routes', j, 'provider'], unknown('provider', r.provider, Object.keys(providers))));
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
        if (target === undefined) out.push(issue(['models', name, 'fallback', j], unknown('model', f, names)));
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
// Tasks: unique ids, known deps, no cycle, known model and tools, placeholders name deps
// ---------------------------------------------------------------------------------------------

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.:/-]+)\s*\}\}/g;

export function checkTasks(
  tasks: unknown[],
  models: Record<string, unknown> | undefined,
  tools: Set<string> | undefined,
  servers: Set<string>,
  out: PlanIssue[],
  /** Tasks outside this list that deps may name (already complete: no edge, no cycle). */
  external: ReadonlySet<string> = new Set(),
) {
  const n = tasks.length;
  const ids = tasks.map((t) => (isRecord(t) && typeof t.id === 'string' ? t.id : undefined));
  const indexOf = new Map<string, number>();
  ids.forEach((id, i) => {
    if (id === undefined) return;
    const first = indexOf.get(id);
    if (first === undefined) indexOf.set(id, i);
    else out.push(issue(['tasks', i, 'id'], `duplicate task id "${id}" (first used by tasks[${first}])`));
  });

  // Edges task -> dep, by index; depAt remembers which deps[j] each edge came from, for paths.
  const edges: number[][] = Array.from({ length: n }, () => []);
  const depAt: number[][] = Array.from({ length: n }, () => []);
  const modelNames = models ? Object.keys(models) : [];
  const toolNames = tools ? [...tools] : [];
  for (let i = 0; i < n; i++) {
    const t = tasks[i];
    if (!isRecord(t)) continue;
    const id = ids[i];
    const deps = new Set<string>();
    if (Array.isArray(t.deps)) {
      t.deps.forEach((d: unknown, j: number) => {
        if (typeof d !== 'string') return;
        const target = indexOf.get(d);
        if (d === id) out.push(issue(['tasks', i, 'deps', j], `task "${d}" depends on itself`));
        else if (target === undefined && external.has(d)) deps.add(d);
        else if (target === undefined) out.push(issue(['tasks', i, 'deps', j], `unknown task "${d}"`));
        else if (deps.has(d)) out.push(issue(['tasks', i, 'deps', j], `"${d}" is listed twice`));
        else {
          edges[i].push(target);
          depAt[i].push(j);
        }
        deps.add(d);
      });
    }
    // A review task reads the task it reviews (it is added to its deps).
    if (t.kind === 'review' && typeof t.reviews === 'string') deps.add(t.reviews);
    // A map reads its `items.from`, a reduce its `over` (added to deps; -3 marks the edge for paths).
    for (const d of implicitDeps(t)) {
      const target = indexOf.get(d);
      if (target !== undefined && !deps.has(d) && d !== id) {
        edges[i].push(target);
        depAt[i].push(-3);
      }
      deps.add(d);
    }
    if (models && typeof t.model === 'string' && t.model !== '' && !Object.hasOwn(models, t.model)) {
      out.push(issue(['tasks', i, 'model'], unknown('model', t.model, modelNames)));
    }
    if (Array.isArray(t.tools)) {
      const seen = new Set<string>();
      t.tools.forEach((name: unknown, j: number) => {
        if (typeof name !== 'string' || name === '') return;
        if (seen.has(name)) out.push(issue(['tasks', i, 'tools', j], `"${name}" is listed twice`));
        else if (tools && !tools.has(name) && !isServerTool(name, servers)) {
          const dot = name.indexOf('.');
          out.push(
            issue(['tasks', i, 'tools', j], dot > 0 && !servers.has(name.slice(0, dot)) && !tools.has(name)
              ? `unknown MCP server "${name.slice(0, dot)}" (declare it under tools.servers)`
              : unknown('tool', name, toolNames)),
          );
        }
        seen.add(name);
      });
    }
    if (id !== undefined) {
      for (const field of ['system', 'prompt'] as const) {
        const text = t[field];
        if (typeof text === 'string' && text.includes('{{')) checkPlaceholders(text, id, deps, indexOf, ['tasks', i, field], out, tasks);
      }
    }
    checkOutputAndAccept(t, i, models, out);
  }

  checkReviews(tasks, ids, indexOf, edges, depAt, out);

  for (const cycle of findCycles(edges)) {
    const start = cycle.nodes[0];
    const names = [...cycle.nodes, start].map((i) => ids[i]).join(' -> ');
    const more = cycle.sccSize - cycle.nodes.length;
    const note = more > 0 ? ` (and ${more} more task${more === 1 ? '' : 's'} on cycles through these)` : '';
    const j = depAt[start][cycle.firstEdge];
    // A negative index marks an edge a review adds: `reviews` itself (-1), or the wait of the
    // reviewed task's other dependents for the review (-2).
    const path = j === -1 ? ['tasks', start, 'reviews'] : j === -2 ? ['tasks', start, 'deps'] : j === -3 ? ['tasks', start, (tasks[start] as Record<string, unknown>).kind === 'map' ? 'items' : 'over'] : ['tasks', start, 'deps', j];
    out.push(issue(path, `cycle: ${names}${note}${j === -2 ? ' (a task that depends on a reviewed task also waits for its review)' : ''}`));
  }
}

/**
 * Review tasks: `reviews` names another task of the list, only review tasks have it (and
 * `maxRounds`), and one task has at most one reviewer. The review's edges join the graph: the
 * reviewer waits for the reviewed task, and so the reviewed task's other dependents wait for the
 * reviewer (they must not read a draft that may still change), which can close a cycle.
 */
function checkReviews(
  tasks: unknown[],
  ids: (string | undefined)[],
  indexOf: Map<string, number>,
  edges: number[][],
  depAt: number[][],
  out: PlanIssue[],
) {
  const reviewerOf = new Map<number, number>();
  tasks.forEach((t, i) => {
    if (!isRecord(t)) return;
    const kind = t.kind ?? 'task';
    if (kind !== 'review') {
      for (const { field, message } of foreignFields(t, String(kind), (owner) => owner === 'review')) out.push(issue(['tasks', i, field], message));
      return;
    }
    if (typeof t.reviews !== 'string' || t.reviews === '') {
      if (t.reviews === undefined) out.push(issue(['tasks', i, 'reviews'], 'required: the id of the task this review task reviews'));
      return;
    }
    const target = indexOf.get(t.reviews);
    if (t.reviews === ids[i]) out.push(issue(['tasks', i, 'reviews'], 'a task cannot review itself'));
    else if (target === undefined) out.push(issue(['tasks', i, 'reviews'], unknown('task', t.reviews, ids.filter((x): x is string => x !== undefined))));
    else if (reviewerOf.has(target)) out.push(issue(['tasks', i, 'reviews'], `task "${t.reviews}" already has a reviewer (tasks[${reviewerOf.get(target)}])`));
    else if (isRecord(tasks[target]) && (tasks[target] as Record<string, unknown>).kind === 'plan') {
      out.push(issue(['tasks', i, 'reviews'], `task "${t.reviews}" is a planner: its sub-tasks cannot be taken back, review them instead`));
    }
    else {
      reviewerOf.set(target, i);
      if (!edges[i].includes(target)) {
        edges[i].push(target);
        depAt[i].push(-1);
      }
    }
  });
  if (reviewerOf.size === 0) return;
  for (let k = 0; k < edges.length; k++) {
    for (const target of [...edges[k]]) {
      const reviewer = reviewerOf.get(target);
      if (reviewer === undefined || reviewer === k || edges[k].includes(reviewer)) continue;
      edges[k].push(reviewer);
      depAt[k].push(-2);
    }
  }
}

/**
 * `{{x}}` is replaced by the output of task x, which exists only if x is a dep. Names that are not
 * tasks are left alone: a prompt may quote a template language.
 */
function checkPlaceholders(
  text: string,
  id: string,
  deps: Set<string>,
  indexOf: Map<string, number>,
  path: (string | number)[],
  out: PlanIssue[],
  tasks: unknown[] = [],
) {
  const reported = new Set<string>();
  for (const match of text.matchAll(PLACEHOLDER)) {
    let name = match[1];
    if (reported.has(name)) continue;
    if (!indexOf.has(name)) {
      // `{{id.field.sub}}`: the longest prefix that is a task names it, the rest is a field path.
      const field = fieldPlaceholderProblem(name, id, deps, indexOf, tasks);
      if (field === undefined) continue;
      if (field.message !== undefined) {
        reported.add(name);
        out.push(issue(path, field.message));
        continue;
      }
      name = field.task;
    }
    if (reported.has(name) || deps.has(name) || !indexOf.has(name)) continue;
    reported.add(name);
    out.push(
      issue(
        path,
        name === id
          ? `{{${name}}} is this task's own output`
          : `{{${name}}} names task "${name}", which is not in deps: add it to deps so its output is ready`,
      ),
    );
  }
}

/**
 * `{{task.a.b}}`: which task the placeholder reads (the longest dotted prefix that is a task of
 * the list), and what is wrong with the field path, if anything. Undefined: no task is named.
 */
function fieldPlaceholderProblem(
  name: string,
  id: string,
  deps: Set<string>,
  indexOf: Map<string, number>,
  tasks: unknown[],
): { task: string; message?: string } | undefined {
  const parts = name.split('.');
  for (let k = parts.length - 1; k >= 1; k--) {
    const task = parts.slice(0, k).join('.');
    const at = indexOf.get(task);
    if (at === undefined) continue;
    // Not a dep (or this task itself): reported as such by the caller.
    if (!deps.has(task) || task === id) return { task };
    const field = parts.slice(k);
    const spec = tasks[at];
    const output = isRecord(spec) && isRecord(spec.output) ? spec.output : undefined;
    if (!output || !isRecord(output.schema)) {
      return { task, message: `{{${name}}} reads field "${field.join('.')}" of task "${task}", which has no output.schema: give it one, or use {{${task}}}` };
    }
    const problem = fieldPathProblem(output.schema, field);
    return problem ? { task, message: `{{${name}}}: the output.schema of task "${task}" ${problem}` } : { task, message: undefined };
  }
  return undefined;
}

/** `output.schema` must be a JSON Schema that compiles; `accept` names a known judge model and a valid pattern. */
function checkOutputAndAccept(t: Record<string, unknown>, i: number, models: Record<string, unknown> | undefined, out: PlanIssue[]) {
  if (isRecord(t.output) && isRecord(t.output.schema)) {
    for (const p of schemaProblems(t.output.schema)) {
      const pointer = p.path.split('/').filter((s) => s !== '').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
      out.push(issue(['tasks', i, 'output', 'schema', ...pointer], p.message));
    }
  }
  if (!isRecord(t.accept)) return;
  if (typeof t.accept.pattern === 'string' && t.accept.pattern !== '') {
    try {
      new RegExp(t.accept.pattern, 'u');
    } catch (error) {
      out.push(issue(['tasks', i, 'accept', 'pattern'], `not a valid regular expression: ${(error as Error).message}`));
    }
  }
  const judge = t.accept.judge;
  if (isRecord(judge) && models && typeof judge.model === 'string' && judge.model !== '' && !Object.hasOwn(models, judge.model)) {
    out.push(issue(['tasks', i, 'accept', 'judge', 'model'], unknown('model', judge.model, Object.keys(models))));
  }
}

// ---------------------------------------------------------------------------------------------

/** `<server>.<tool>` of a declared MCP server: its tools are listed only when the run connects. */
function isServerTool(name: string, servers: Set<string>): boolean {
  const dot = name.indexOf('.');
  return dot > 0 && dot < name.length - 1 && servers.has(name.slice(0, dot));
}

/** `{ "env": NAME }` values of MCP servers' env and headers must be set. */
function checkToolEnv(tools: Record<string, unknown>, env: Record<string, string | undefined>, out: PlanIssue[]) {
  if (!isRecord(tools.servers)) return;
  for (const [name, server] of Object.entries(tools.servers)) {
    if (!isRecord(server)) continue;
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


/** `unknown model "fsat" (did you mean "fast"?)`: suggestions only among small name sets. */
function unknown(kind: string, name: string, known: readonly string[]): string {
  const guess = known.length <= 200 ? nearest(name, known) : undefined;
  return `unknown ${kind} "${name}"${guess ? ` (did you mean "${guess}"?)` : ''}`;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isEmptyArray(x: unknown): boolean {
  return Array.isArray(x) && x.length === 0;
}
