/**
 * Re-running the failures of a journaled run (`swarm.retry`, `swarmstate retry`): which tasks go
 * back to pending, and what the journal keeps of each retry.
 *
 * A retry is a resume with a journal edit first: the chosen tasks' rows are reopened (`queued`)
 * and a retry session is added to the run's options, then the run is restored as a resume does.
 * The session says, per task, how many attempts it had before: a later resume (the retry itself
 * crashed) counts only the attempts after that against the task's retries, so every retried
 * task starts with its full `maxRetries` again, however often it failed before.
 *
 * Which tasks: every task that did not complete (failed, skipped, cancelled, or left unfinished),
 * or with `tasks` only those and what depends on them, failed and skipped tasks not named staying
 * so (cancelled and unfinished ones run again in any case, as on a resume). Completed tasks keep their outputs and
 * are never sent again. A planner that completed keeps its sub-tasks (it does not plan again);
 * its failed sub-tasks are retried like any task (`<planner>/<id>`). A planner that failed plans
 * again from scratch.
 *
 * A task skipped by its condition (`when`) is settled like a completed one: its deps' outputs
 * decided it, and they have not changed. So is a task skipped only because of settled ones (every
 * task it waits for completed or is settled). A retry runs such a task again only when one of
 * its deps runs again; named alone it is refused (`CONDITION_SKIPPED`).
 */
import type { TaskSpec } from '../plan/index.js';
import { isRecord } from '../plan/issues.js';
import type { PlanBudget } from '../plan/planTypes.js';
import type { Spent } from '../store/index.js';
import { skipCauseOf, type PlannerExtra, type TaskRow } from '../store/index.js';

export type RetryErrorCode = 'RUN_NOT_FOUND' | 'NOTHING_TO_RETRY' | 'UNKNOWN_TASK' | 'TASK_COMPLETED' | 'CONDITION_SKIPPED' | 'DEPENDENCY_NOT_RETRIED' | 'NO_STORE' | 'BUDGET_TOO_LOW';

/** A retry that cannot be made: the run, or a task named, is not one that can run again. */
export class RetryError extends Error {
  constructor(
    readonly code: RetryErrorCode,
    message: string,
    readonly runId: string,
    readonly taskId?: string,
  ) {
    super(message);
    this.name = 'RetryError';
  }
}

/** One retry, as the run's options keep it. */
export interface RetrySession {
  /** ms since the epoch, when the retry started. */
  at: number;
  /** The tasks it sent back to pending. */
  tasks: string[];
  /** Per task: the attempts it had made before (later attempts count against its retries). */
  from: Record<string, number>;
  /** The caps this retry set (they replace the plan's, for it and every resume after it). */
  budget?: PlanBudget;
}

/** The retries a run's options record, oldest first. */
export function retrySessionsOf(options: unknown): RetrySession[] {
  const list = (options as { retries?: unknown } | null)?.retries;
  return Array.isArray(list) ? (list as RetrySession[]) : [];
}

/** Per task, the attempt its last retry started after (0 when none): what a restore counts from. */
export function retryBasesOf(options: unknown): Map<string, number> {
  const bases = new Map<string, number>();
  for (const session of retrySessionsOf(options)) {
    for (const [id, n] of Object.entries(session.from ?? {})) bases.set(id, n);
  }
  return bases;
}

interface Node {
  id: string;
  completed: boolean;
  /** Failed or skipped: it stays so unless retried. Anything else unfinished runs again anyway, as on a resume. */
  ended: boolean;
  skipped: boolean;
  /** Skipped by its condition (the journal's `SkipExtra`). */
  conditioned: boolean;
  deps: readonly string[];
  /** Tasks that wait for this one beyond its spec's deps (a planner's sub-tasks, a reviewer). */
  upstream: string[];
  downstream: Node[];
}

/**
 * The tasks a retry sends back to pending, in the journal's order. Throws RetryError when there
 * is nothing to retry, or `only` names a task that is unknown, completed, or that waits for a
 * task which did not complete and is not retried with it.
 */
export function tasksToRetry(runId: string, planTasks: readonly TaskSpec[], rows: readonly TaskRow[], only?: readonly string[]): string[] {
  const nodes = graphOf(planTasks, rows);
  const settled = settledOf(nodes);
  let chosen: Node[];
  if (only === undefined) {
    chosen = [...nodes.values()].filter((n) => !n.completed && !settled.has(n));
    if (chosen.length === 0) {
      const what = settled.size > 0 ? 'every task completed or was skipped by a condition' : 'every task completed';
      throw new RetryError('NOTHING_TO_RETRY', `run ${runId}: ${what}; there is nothing to retry`, runId);
    }
  } else {
    if (only.length === 0) throw new RetryError('UNKNOWN_TASK', `run ${runId}: --tasks names no task`, runId);
    chosen = [];
    for (const id of only) {
      const node = nodes.get(id);
      if (!node) throw new RetryError('UNKNOWN_TASK', `run ${runId} has no task "${id}" (a planner's sub-task is named <planner>/<id>)`, runId, id);
      if (node.completed) throw new RetryError('TASK_COMPLETED', `task "${id}" of run ${runId} completed: a retry runs only tasks that did not complete (its output is kept)`, runId, id);
      if (settled.has(node)) {
        const why = node.conditioned ? 'was skipped by its condition' : 'was skipped because of tasks skipped by their conditions';
        throw new RetryError('CONDITION_SKIPPED', `task "${id}" of run ${runId} ${why}, which its deps' outputs decided: it runs again only when a dep of it does (retry that one)`, runId, id);
      }
      chosen.push(node);
    }
  }
  // What depends on a retried task runs again after it (it was skipped, or never ran); so does
  // whatever the run left unfinished (cancelled, interrupted), as a resume would run it.
  const reset = new Set<Node>();
  const stack = [...chosen, ...[...nodes.values()].filter((n) => !n.completed && !n.ended)];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.completed || reset.has(node)) continue;
    reset.add(node);
    stack.push(...node.downstream);
  }
  for (const node of reset) {
    for (const up of [...node.deps, ...node.upstream]) {
      const dep = nodes.get(up);
      if (dep && !dep.completed && !reset.has(dep) && !settled.has(dep)) {
        throw new RetryError(
          'DEPENDENCY_NOT_RETRIED',
          `task "${node.id}" of run ${runId} waits for "${dep.id}", which did not complete and is not among the tasks retried: name it too (or retry without --tasks)`,
          runId,
          node.id,
        );
      }
    }
  }
  return [...nodes.values()].filter((n) => reset.has(n)).map((n) => n.id);
}

/**
 * The skipped tasks a retry leaves as they are: skipped by a condition, or skipped with every
 * task they wait for completed or settled. One pass in dependency order (no recursion: a long
 * chain would overflow the stack).
 */
function settledOf(nodes: ReadonlyMap<string, Node>): Set<Node> {
  const settled = new Set<Node>();
  const waitsFor = (n: Node) => [...n.deps, ...n.upstream].flatMap((id) => nodes.get(id) ?? []);
  const done = new Set<Node>();
  const entered = new Set<Node>();
  for (const root of nodes.values()) {
    const stack: { node: Node; expanded: boolean }[] = [{ node: root, expanded: false }];
    while (stack.length > 0) {
      const top = stack.pop()!;
      if (done.has(top.node)) continue;
      if (!top.expanded) {
        // Met again before it is done: a cycle (a plan never has one); it is not settled then.
        if (entered.has(top.node)) continue;
        entered.add(top.node);
        stack.push({ node: top.node, expanded: true });
        for (const dep of waitsFor(top.node)) if (!done.has(dep)) stack.push({ node: dep, expanded: false });
        continue;
      }
      done.add(top.node);
      const n = top.node;
      if (n.conditioned || (n.skipped && waitsFor(n).every((d) => d.completed || settled.has(d)))) settled.add(n);
    }
  }
  return settled;
}

/** The run's tasks as a restore knows them (the plan's, and the sub-tasks of completed planners), with every edge a wait follows. */
function graphOf(planTasks: readonly TaskSpec[], rows: readonly TaskRow[]): Map<string, Node> {
  const status = new Map(rows.map((r) => [r.taskId, r]));
  const nodes = new Map<string, Node>();
  const add = (spec: TaskSpec) => {
    const was = status.get(spec.id)?.status;
    const row = status.get(spec.id);
    const skipped = was === 'skipped';
    const conditioned = skipped && skipCauseOf(row?.extra ?? null) === 'condition';
    nodes.set(spec.id, { id: spec.id, completed: was === 'completed', ended: was === 'failed' || skipped, skipped, conditioned, deps: spec.deps, upstream: [], downstream: [] });
  };
  planTasks.forEach(add);
  const specs = new Map<string, TaskSpec>(planTasks.map((t) => [t.id, t]));
  const subtasks = new Map<string, Set<string>>();
  const accepted = new Map<string, Set<string> | undefined>();
  // Rows come in the order they were written: a planner's before its sub-tasks'. Only a planner
  // that completed has sub-tasks (those of its accepted answer), as in a restore.
  for (const row of rows) {
    if (row.parent === null || row.spec === null) continue;
    const planner = status.get(row.parent);
    if (planner?.status !== 'completed' || !nodes.has(row.parent)) continue;
    if (!accepted.has(row.parent)) {
      const made = (planner.extra as Partial<PlannerExtra> | null)?.subtasks;
      accepted.set(row.parent, made ? new Set(made) : undefined);
    }
    if (accepted.get(row.parent)?.has(row.taskId) === false) continue;
    const spec = row.spec as TaskSpec;
    add(spec);
    specs.set(spec.id, spec);
    (subtasks.get(row.parent) ?? subtasks.set(row.parent, new Set()).get(row.parent)!).add(spec.id);
  }
  const dependentsOf = new Map<string, Node[]>();
  for (const node of nodes.values()) {
    for (const dep of node.deps) (dependentsOf.get(dep) ?? dependentsOf.set(dep, []).get(dep)!).push(node);
  }
  for (const node of nodes.values()) {
    const spec = specs.get(node.id)!;
    const waiting = (dependentsOf.get(node.id) ?? []).slice();
    // What depended on a planner also waits for its sub-tasks.
    const made = subtasks.get(node.id);
    for (const sub of made ?? []) {
      for (const after of dependentsOf.get(node.id) ?? []) {
        if (made!.has(after.id)) continue;
        after.upstream.push(sub);
        nodes.get(sub)!.downstream.push(after);
      }
    }
    // A reviewer holds back the other dependents of the task it reviews.
    if (spec.kind === 'review' && spec.reviews !== undefined) {
      for (const other of dependentsOf.get(spec.reviews) ?? []) {
        if (other === node) continue;
        other.upstream.push(node.id);
        node.downstream.push(other);
      }
    }
    node.downstream.push(...waiting);
  }
  return nodes;
}

/** A cap at or under what the run has spent already would stop the retry at its first call. */
export function checkBudgetAboveSpent(runId: string, budget: PlanBudget, spent: Spent): void {
  const problems: string[] = [];
  // Three significant digits, at least four decimals: $0.00001 and $0.000617, not $0.0000 and $0.0006.
  const usd = (n: number) => `$${n > 0 && n < 1 ? n.toFixed(Math.min(20, Math.max(4, 2 - Math.floor(Math.log10(n))))).replace(/(\.\d{4}\d*?)0+$/, '$1') : n.toFixed(4)}`;
  if (budget.usd !== undefined && budget.usd <= spent.total) problems.push(`budget.usd: ${usd(budget.usd)} is not above what the run has spent (${usd(spent.total)})`);
  for (const [name, cap] of Object.entries(budget.perModel ?? {})) {
    const used = spent.byModel[name] ?? 0;
    if (cap <= used) problems.push(`budget.perModel.${name}: ${usd(cap)} is not above what the run has spent on it (${usd(used)})`);
  }
  if (problems.length > 0) throw new RetryError('BUDGET_TOO_LOW', `the retry's budget is too low: ${problems.join('; ')}`, runId);
}

/**
 * The plan as written, with these caps in place of its own (the rest of its budget kept). It is
 * parsed after this, so the caps are checked as the plan's are: positive amounts, the plan's own
 * model names, a price for every model once there is a budget.
 */
export function withBudget(raw: unknown, budget: PlanBudget | undefined): unknown {
  if (budget === undefined || raw === null || typeof raw !== 'object') return raw;
  const plan = raw as { budget?: unknown };
  const own: PlanBudget = isRecord(plan.budget) ? plan.budget : {};
  const next: PlanBudget = { ...own };
  if (budget.usd !== undefined) next.usd = budget.usd;
  // Not an object: left as given, for the plan's check to name it.
  const perModel: unknown = budget.perModel;
  if (perModel !== undefined) next.perModel = isRecord(perModel) ? { ...own.perModel, ...(perModel as Record<string, number>) } : (perModel as never);
  return { ...plan, budget: next };
}
