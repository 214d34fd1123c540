/**
 * The plan's checks of its tasks, across fields: unique ids, known deps, no cycle, known models
 * and tools, reviews, placeholders that name deps, output schemas and gates. Used by validatePlan
 * (validate.ts) on the plan's tasks and by a planner's sub-tasks (subtasks.ts). Every problem is
 * reported with its path; none echoes a value.
 */
import { findCycles } from './ranks.js';
import { isRecord, issue, unknownName } from './issues.js';
import { fieldPathProblem, schemaProblems } from './structured.js';
import { userPattern } from './userPattern.js';
import { implicitDeps } from './mapreduce.js';
import { foreignFields } from './taskKinds.js';
import { checkJoins, checkWhen } from './when.js';
import type { PlanIssue } from './validate.js';

// ---------------------------------------------------------------------------------------------
// Tasks: unique ids, known deps, no cycle, known model and tools, placeholders name deps
// ---------------------------------------------------------------------------------------------

const isReview = (owner: string) => owner === 'review';

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

  checkMadeIds(tasks, ids, indexOf, out);

  // Edges task -> dep, by index; depAt remembers which deps[j] each edge came from, for paths.
  const edges: number[][] = Array.from({ length: n }, () => []);
  const depAt: number[][] = Array.from({ length: n }, () => []);
  const modelNames = models ? Object.keys(models) : [];
  const toolNames = tools ? [...tools] : [];
  // What each task waits for (its deps, `reviews`, `items.from`, `over`): its conditions read them, joins count them.
  const depSets: Set<string>[] = [];
  for (let i = 0; i < n; i++) {
    const t = tasks[i];
    const deps = new Set<string>();
    depSets.push(deps);
    if (!isRecord(t)) continue;
    const id = ids[i];
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
      out.push(issue(['tasks', i, 'model'], unknownName('model', t.model, modelNames)));
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
              : unknownName('tool', name, toolNames)),
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
    checkWhen(t, i, deps, indexOf, tasks, out);
  }

  checkReviews(tasks, ids, indexOf, edges, depAt, out);
  checkJoins(tasks, depSets, indexOf, out);

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

/** What the run names the tasks it makes under a map, a reduce or a planner (`<id>/...`). */
const MADE_UNDER: Record<string, (id: string) => string> = {
  map: (id) => `map "${id}", whose items the run names "${id}/<index>" or "${id}/<key>"`,
  reduce: (id) => `reduce "${id}", whose groups the run names "${id}/L<level>/<n>"`,
  plan: (id) => `planner "${id}", whose sub-tasks the run names "${id}/<id>"`,
};

/**
 * No task id under a map's, a reduce's or a planner's own: the run makes ids there, and one it
 * made that a task already has would stop the run when it expands.
 */
function checkMadeIds(tasks: unknown[], ids: (string | undefined)[], indexOf: Map<string, number>, out: PlanIssue[]) {
  ids.forEach((id, i) => {
    if (id === undefined) return;
    for (let slash = id.indexOf('/'); slash > 0; slash = id.indexOf('/', slash + 1)) {
      const parent = id.slice(0, slash);
      const at = indexOf.get(parent);
      const kind = at === undefined ? undefined : (tasks[at] as Record<string, unknown>).kind;
      const under = typeof kind === 'string' && Object.hasOwn(MADE_UNDER, kind) ? MADE_UNDER[kind]! : undefined;
      if (!under) continue;
      out.push(issue(['tasks', i, 'id'], `"${id}" is under ${under(parent)}: choose an id outside "${parent}/"`));
      return;
    }
  });
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
      for (const { field, message } of foreignFields(t, String(kind), isReview)) out.push(issue(['tasks', i, field], message));
      return;
    }
    if (typeof t.reviews !== 'string' || t.reviews === '') {
      if (t.reviews === undefined) out.push(issue(['tasks', i, 'reviews'], 'required: the id of the task this review task reviews'));
      return;
    }
    const target = indexOf.get(t.reviews);
    if (t.reviews === ids[i]) out.push(issue(['tasks', i, 'reviews'], 'a task cannot review itself'));
    else if (target === undefined) out.push(issue(['tasks', i, 'reviews'], unknownName('task', t.reviews, ids.filter((x): x is string => x !== undefined))));
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
    for (const p of schemaProblems(t.output.schema)) out.push(issue(['tasks', i, 'output', 'schema', ...p.path], p.message));
  }
  if (!isRecord(t.accept)) return;
  if (typeof t.accept.pattern === 'string' && t.accept.pattern !== '') {
    const pattern = userPattern(t.accept.pattern);
    if (!pattern.ok) out.push(issue(['tasks', i, 'accept', 'pattern'], pattern.message));
  }
  const judge = t.accept.judge;
  if (isRecord(judge) && models && typeof judge.model === 'string' && judge.model !== '' && !Object.hasOwn(models, judge.model)) {
    out.push(issue(['tasks', i, 'accept', 'judge', 'model'], unknownName('model', judge.model, Object.keys(models))));
  }
}

/** `<server>.<tool>` of a declared MCP server: its tools are listed only when the run connects. */
function isServerTool(name: string, servers: Set<string>): boolean {
  const dot = name.indexOf('.');
  return dot > 0 && dot < name.length - 1 && servers.has(name.slice(0, dot));
}
