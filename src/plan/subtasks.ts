/**
 * A planner task's output as sub-tasks. The model answers with a JSON list of tasks in the plan's
 * own task format; they are checked like the plan's tasks (structure, models, tools, deps,
 * placeholders, cycles, reviews) plus the planner's own rules:
 *
 * - every sub-task names its model (no inheritance, as in the plan);
 * - deps name sibling sub-tasks or the planner's own deps (complete, so their outputs exist);
 * - a sub-task may plan only while the depth stays under `limits.maxDepth` (default 1: no);
 * - at most `limits.maxSubtasks` of them; no `budgetUsd` (the run's and the models' budgets apply).
 *
 * Accepted sub-tasks run as `<planner>/<id>`: deps and `{{placeholders}}` naming siblings are
 * renamed to match. Every problem is reported at once, with its path, for the planner's next try.
 */
import { isRecord, issue, plainMessages, structuralIssues } from './issues.js';
import { planSchemas, type Plan, type TaskSpec } from './schema.js';
import { zod } from './zod.js';
import { kindOf, kindOfTask } from './kinds/index.js';
import { checkTasks } from './checkTasks.js';
import { formatIssue, type PlanIssue } from './validate.js';
import { renameTasks } from '../../machines/when.js';

export interface PlannerContext {
  plan: Plan;
  planner: { id: string; deps: readonly string[]; depth: number };
  /** Every task id in the run so far. */
  existing: ReadonlySet<string>;
  /** Names of the run's tools (MCP tools included). */
  tools: Iterable<string>;
}

export type SubtaskResult = { ok: true; tasks: TaskSpec[] } | { ok: false; issues: string[] };

let subtasksSchema: ReturnType<typeof buildSubtasksSchema> | undefined;
const buildSubtasksSchema = () => zod().strictObject({ tasks: zod().array(planSchemas().TaskSchema) });
const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.:/-]+)\s*\}\}/g;

/** Reads and checks a planner's output; the tasks come back renamed `<planner>/<id>`. */
export function parseSubtasks(output: string, ctx: PlannerContext): SubtaskResult {
  const list = jsonListIn(output);
  if (!list) {
    return { ok: false, issues: ['the answer must be a JSON list of tasks, e.g. [{"id": "a", "model": "...", "prompt": "..."}] (or {"tasks": [...]})'] };
  }
  const issues: PlanIssue[] = [];
  const { maxSubtasks, maxDepth } = ctx.plan.limits;
  if (list.length > maxSubtasks) issues.push(issue(['tasks'], `at most ${maxSubtasks} sub-tasks (limits.maxSubtasks); got ${list.length}`));
  const parsed = (subtasksSchema ??= buildSubtasksSchema()).safeParse({ tasks: list }, { error: plainMessages });
  if (!parsed.success) issues.push(...structuralIssues(parsed.error.issues));

  const external = new Set(ctx.planner.deps);
  const servers = new Set(Object.keys(ctx.plan.tools.servers));
  checkTasks(list, ctx.plan.models, new Set(ctx.tools), servers, issues, external, { asSubTasks: true });
  const depth = ctx.planner.depth + 1;
  list.forEach((t, i) => {
    if (!isRecord(t)) return;
    if (t.kind === 'plan' && depth >= maxDepth) {
      issues.push(issue(['tasks', i, 'kind'], `sub-tasks at depth ${depth} cannot plan (limits.maxDepth is ${maxDepth})`));
    }
    const why = kindOf(t.kind)?.asSubTask;
    if (typeof why === 'string') issues.push(issue(['tasks', i, 'kind'], `a sub-task cannot be ${/^[aeiou]/.test(String(t.kind)) ? 'an' : 'a'} ${t.kind} task (${why})`));
    if (t.budgetUsd !== undefined) issues.push(issue(['tasks', i, 'budgetUsd'], "a sub-task has no budget of its own: the run's and the models' budgets apply"));
    if (typeof t.id === 'string' && ctx.existing.has(`${ctx.planner.id}/${t.id}`)) {
      issues.push(issue(['tasks', i, 'id'], `"${ctx.planner.id}/${t.id}" is already a task of the run`));
    }
  });
  if (issues.length > 0 || !parsed.success) return { ok: false, issues: issues.map(formatIssue) };

  const siblings = new Set(parsed.data.tasks.map((t) => t.id));
  const rename = (id: string) => (siblings.has(id) ? `${ctx.planner.id}/${id}` : id);
  const renameText = (text: string) => text.replace(PLACEHOLDER, (whole, id: string) => (siblings.has(id) ? `{{${rename(id)}}}` : whole));
  const tasks = parsed.data.tasks.map((t) => {
    const task: TaskSpec = { ...t, id: rename(t.id), deps: t.deps.map(rename) };
    if (t.prompt !== undefined) task.prompt = renameText(t.prompt);
    if (t.system !== undefined) task.system = renameText(t.system);
    if (t.when !== undefined) task.when = renameTasks(t.when, rename);
    // The task a sub-task reviews is a sibling (or a dep of the planner), and one of its deps.
    const field = kindOfTask(t)?.watches?.field;
    const watched = field === undefined ? undefined : (t as Record<string, unknown>)[field];
    if (field !== undefined && typeof watched === 'string') {
      (task as unknown as Record<string, unknown>)[field] = rename(watched);
      if (!task.deps.includes(rename(watched))) task.deps = [...task.deps, rename(watched)];
    }
    return task;
  });
  return { ok: true, tasks };
}

/** The JSON list in a model's answer: the whole answer, a fenced block, or the outermost [...]/{"tasks": [...]}. */
function jsonListIn(output: string): unknown[] | undefined {
  const text = output.trim();
  const candidates = [text];
  const fenced = /```(?:json)?\s*\n([\s\S]*?)```/.exec(text);
  if (fenced) candidates.push(fenced[1]!.trim());
  const open = text.indexOf('[');
  const close = text.lastIndexOf(']');
  if (open >= 0 && close > open) candidates.push(text.slice(open, close + 1));
  const brace = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (brace >= 0 && end > brace) candidates.push(text.slice(brace, end + 1));
  for (const candidate of candidates) {
    let value: unknown;
    try {
      value = JSON.parse(candidate);
    } catch {
      continue;
    }
    if (Array.isArray(value)) return value;
    if (isRecord(value) && Array.isArray(value.tasks)) return value.tasks;
  }
  return undefined;
}

