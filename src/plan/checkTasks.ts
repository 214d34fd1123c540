/**
 * The plan's checks of its tasks, across fields: unique ids, known deps, no cycle (the implicit
 * deps of each kind and the edges of reviews and approvals included: kinds/watch.ts), known
 * models and tools, placeholders that name deps, output schemas and gates; then each kind's own
 * (kinds/check.ts). Used by validatePlan (validate.ts) on the plan's tasks and by a planner's
 * sub-tasks (subtasks.ts). Every problem is reported with its path; none echoes a value.
 */
import { findCycles } from './ranks.js';
import { isRecord, issue, unknownName } from './issues.js';
import { fieldPathProblem, schemaProblems } from './structured.js';
import { kindOf, kindOfTask, runsFunction } from './kinds/index.js';
import { checkKinds, type KindCheckOptions } from './kinds/check.js';
import { checkWatches, type EdgeLabel } from './kinds/watch.js';
import { checkJoins, checkWhen } from './when.js';
import { checkGates } from './gates.js';
import type { PlanIssue } from './validate.js';

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
  /** What the kinds' checks need (checkKinds, run last). */
  opts: KindCheckOptions = {},
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

  // Edges task -> dep, by index; labels say which field each edge came from, for a cycle's path.
  const edges: number[][] = Array.from({ length: n }, () => []);
  const labels: EdgeLabel[][] = Array.from({ length: n }, () => []);
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
          labels[i].push({ path: ['tasks', i, 'deps', j] });
        }
        deps.add(d);
      });
    }
    const kind = kindOfTask(t);
    // A review reads the task it reviews, an approval the task it approves (their edges join in checkWatches).
    const watched = kind?.watches ? t[kind.watches.field] : undefined;
    if (typeof watched === 'string') deps.add(watched);
    // A map reads its `items.from`, a reduce its `over` (added to deps).
    for (const { id: d, path } of kind?.implicitDeps?.(t) ?? []) {
      const target = indexOf.get(d);
      if (target !== undefined && !deps.has(d) && d !== id) {
        edges[i].push(target);
        labels[i].push({ path: ['tasks', i, ...path] });
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
    // A function step's prompt and system are refused (checkKinds): what they would place is beside the point.
    if (id !== undefined && !runsFunction(t)) {
      for (const field of ['system', 'prompt'] as const) {
        const text = t[field];
        if (typeof text === 'string' && text.includes('{{')) checkPlaceholders(text, id, deps, indexOf, ['tasks', i, field], out, tasks);
      }
    }
    checkOutputAndAccept(t, i, models, out);
    checkWhen(t, i, deps, indexOf, tasks, out);
  }

  checkWatches(tasks, ids, indexOf, edges, labels, out);
  checkJoins(tasks, depSets, indexOf, out);

  for (const cycle of findCycles(edges)) {
    const start = cycle.nodes[0];
    const names = [...cycle.nodes, start].map((i) => ids[i]).join(' -> ');
    const more = cycle.sccSize - cycle.nodes.length;
    const note = more > 0 ? ` (and ${more} more task${more === 1 ? '' : 's'} on cycles through these)` : '';
    const label = labels[start][cycle.firstEdge];
    out.push(issue(label.path, `cycle: ${names}${note}${label.note ?? ''}`));
  }

  checkKinds(tasks, out, opts);
}

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
      const under = at === undefined ? undefined : kindOf((tasks[at] as Record<string, unknown>).kind)?.madeUnder;
      if (!under) continue;
      out.push(issue(['tasks', i, 'id'], `"${id}" is under ${under(parent)}: choose an id outside "${parent}/"`));
      return;
    }
  });
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

/** `output.schema` must be a JSON Schema that compiles; each gate of `accept` checks its value (gates.ts). */
function checkOutputAndAccept(t: Record<string, unknown>, i: number, models: Record<string, unknown> | undefined, out: PlanIssue[]) {
  if (isRecord(t.output) && isRecord(t.output.schema)) {
    for (const p of schemaProblems(t.output.schema)) out.push(issue(['tasks', i, 'output', 'schema', ...p.path], p.message));
  }
  if (isRecord(t.accept)) checkGates(t.accept, ['tasks', i, 'accept'], models ? { models } : {}, out);
}

/** `<server>.<tool>` of a declared MCP server: its tools are listed only when the run connects. */
function isServerTool(name: string, servers: Set<string>): boolean {
  const dot = name.indexOf('.');
  return dot > 0 && dot < name.length - 1 && servers.has(name.slice(0, dot));
}
