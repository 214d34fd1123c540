/**
 * The plan's checks of branches: each `when` test reads a dep, at a path its output has; no
 * condition that can never be true; and every join (`after: "any"`) reachable. Called by
 * checkTasks.ts for the plan's tasks and a planner's sub-tasks; the shape of a condition is the
 * zod schema's (schema.ts). Every problem is reported with its path.
 *
 * A join no branch can reach: one with fewer than 2 deps, or none of whose deps can complete. A
 * task cannot complete when its condition can never be true (machines/when.ts `neverTrue`), or
 * it waits for all its deps and one of them cannot complete, or it is a join none of whose deps
 * can. Whatever else the outputs decide at run time.
 */
import { neverTrue, pathSegments, testsOf, type Condition } from '../../machines/when.js';
import { isRecord, issue, unknownName } from './issues.js';
import { conditionSchema } from './conditionSchema.js';
import { fieldPathProblem } from './structured.js';
import type { PlanIssue } from './validate.js';

/** A task's `when` when it has the shape of a condition (the schema reports any other). */
export function conditionOf(t: Record<string, unknown>): Condition | undefined {
  if (t.when === undefined) return undefined;
  const parsed = conditionSchema().safeParse(t.when);
  return parsed.success ? parsed.data : undefined;
}

/**
 * The tests of task `i`'s `when`: the task each reads is one of `deps` (not itself), and its
 * `path` is a field the dep's output has (`output.schema`; a map's output is the array of its
 * items' outputs; a function step's JSON has any shape without one); a dep without a schema
 * answers text, which has no fields. Then whether the
 * condition can ever be true.
 */
export function checkWhen(t: Record<string, unknown>, i: number, deps: ReadonlySet<string>, indexOf: ReadonlyMap<string, number>, tasks: readonly unknown[], out: PlanIssue[]): void {
  const when = conditionOf(t);
  if (when === undefined) return;
  for (const { test, at } of testsOf(when)) {
    const where = ['tasks', i, 'when', ...at];
    if (test.task === t.id) {
      out.push(issue([...where, 'task'], "a condition reads a dep's output, not the task's own"));
      continue;
    }
    if (!deps.has(test.task)) {
      const known = indexOf.has(test.task);
      out.push(issue([...where, 'task'], known ? `"${test.task}" is not in deps: a condition reads a dep's output (add "${test.task}" to deps)` : unknownName('task', test.task, [...indexOf.keys()])));
      continue;
    }
    const at2 = indexOf.get(test.task);
    // A dep outside the list (a planner's own dep, for its sub-tasks): its output is not known here.
    if (test.path === undefined || at2 === undefined) continue;
    const problem = pathProblem(tasks[at2], test.task, pathSegments(test.path));
    if (problem) out.push(issue([...where, 'path'], problem));
  }
  if (neverTrue(when)) out.push(issue(['tasks', i, 'when'], 'can never be true ("in": [] matches nothing): the task would always be skipped'));
}

/** Why `path` is not in the output of task `dep`, or undefined. */
function pathProblem(dep: unknown, id: string, path: readonly string[]): string | undefined {
  if (!isRecord(dep)) return undefined;
  const schema = isRecord(dep.output) && isRecord(dep.output.schema) ? dep.output.schema : undefined;
  if (dep.kind === 'map') {
    const problem = fieldPathProblem({ type: 'array', items: schema ?? true }, path);
    return problem && `the output of map "${id}" is the array of its items' outputs: it ${problem}`;
  }
  // A function step returns JSON: without a schema, its shape is not known here.
  if (dep.kind === 'fn' && schema === undefined) return undefined;
  if (schema === undefined) {
    return `task "${id}" has no output.schema: its output is text, with no fields (leave "path" out to compare the whole text, or give "${id}" an output schema)`;
  }
  const problem = fieldPathProblem(schema, path);
  return problem && `the output.schema of task "${id}" ${problem}`;
}

/**
 * Joins (`after: "any"`): at least 2 deps, and one of them can complete (see the module's
 * comment). `deps[i]`: every task task `i` waits for (its deps, `reviews`, `items.from`, `over`).
 */
export function checkJoins(tasks: readonly unknown[], deps: readonly ReadonlySet<string>[], indexOf: ReadonlyMap<string, number>, out: PlanIssue[]): void {
  const memo = new Map<number, boolean>();
  const canComplete = (i: number): boolean => {
    const known = memo.get(i);
    if (known !== undefined) return known;
    // Assumed on a cycle (reported on its own), so that one problem is not told twice.
    memo.set(i, true);
    const t = tasks[i];
    let can = true;
    if (isRecord(t)) {
      const when = conditionOf(t);
      const reach = [...(deps[i] ?? [])].map((d) => indexOf.get(d)).map((at) => at === undefined || canComplete(at));
      can = !(when && neverTrue(when)) && (t.after === 'any' ? reach.length === 0 || reach.some(Boolean) : reach.every(Boolean));
    }
    memo.set(i, can);
    return can;
  };
  tasks.forEach((t, i) => {
    if (!isRecord(t) || t.after !== 'any') return;
    const mine = [...(deps[i] ?? [])];
    if (mine.length < 2) {
      out.push(issue(['tasks', i, 'after'], `"any" joins branches: a join needs at least 2 deps (it has ${mine.length})`));
      return;
    }
    const at = mine.map((d) => indexOf.get(d));
    if (at.some((x) => x === undefined || canComplete(x))) return;
    out.push(issue(['tasks', i, 'after'], `no branch can reach this join: none of its deps can complete (${mine.map((d) => `"${d}"`).join(', ')}), a condition that can never be true is on the way of each`));
  });
}
