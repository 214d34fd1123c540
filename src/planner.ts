/**
 * Planner tasks at run time: the `expandPlan` actor the supervisor asks when a planner's attempt
 * has answered. It checks the answer like a plan (src/plan/subtasks.ts) and resolves the
 * sub-tasks as the supervisor runs them (src/resolve.ts), one level deeper than their planner.
 */
import type { PlanExpansion, PlanExpansionInput } from '../machines/supervisor/machine.js';
import type { SupervisedTask } from '../machines/tasks/types.js';
import { criticalPathRanks, parseSubtasks, type Plan, type TaskSpec } from './plan/index.js';
import { resolveTask, type TaskResolveOptions } from './resolve.js';
import { groupSubtasks, itemsOfOutput, loadItemsFile, mapSubtasks } from './plan/mapreduce.js';

export class PlanExpander {
  /** Every task id of the run so far, with what a planner among them needs: its deps. */
  private readonly tasks = new Map<string, { deps: readonly string[] }>();
  /** Map and reduce tasks (the plan's, and the groups of reduce trees): what their sub-tasks inherit. */
  private readonly aggregators = new Map<string, TaskSpec>();
  /** The items of maps that read a file or list them inline, read once when the run starts. */
  private readonly items = new Map<string, ReturnType<typeof loadItemsFile>>();

  constructor(
    private readonly plan: Plan,
    private readonly opts: TaskResolveOptions & { toolNames: readonly string[]; baseDir?: string },
    /** Called with the accepted sub-tasks, as written (renamed), before they join the run (the journal keeps them). */
    private readonly onAccepted?: (plannerId: string, tasks: TaskSpec[], resolved: SupervisedTask[]) => void,
  ) {
    for (const t of plan.tasks) {
      this.tasks.set(t.id, { deps: t.deps });
      if (t.kind === 'map' || t.kind === 'reduce') this.aggregators.set(t.id, t);
      if (t.kind === 'map' && t.items && 'file' in t.items) this.items.set(t.id, loadItemsFile(t.items.file, opts.baseDir));
      if (t.kind === 'map' && t.items && 'values' in t.items) this.items.set(t.id, { ok: true, items: t.items.values });
    }
  }

  /** Whether a task is a map or a reduce (its sub-tasks are restored whatever its status). */
  isAggregator(id: string): boolean {
    return this.aggregators.has(id);
  }

  expand(input: PlanExpansionInput): PlanExpansion {
    if (input.map || input.reduce) return this.expandAggregate(input);
    const planner = this.tasks.get(input.taskId);
    const result = parseSubtasks(input.output, {
      plan: this.plan,
      planner: { id: input.taskId, deps: planner?.deps ?? [], depth: input.depth },
      existing: new Set(this.tasks.keys()),
      tools: this.opts.toolNames,
    });
    if (!result.ok) return result;
    const resolved = this.resolve(input.taskId, input.depth + 1, result.tasks);
    this.onAccepted?.(input.taskId, result.tasks, resolved);
    return { ok: true, tasks: resolved };
  }

  /** A map's items as tasks, or a reduce's tree as groups. */
  private expandAggregate(input: PlanExpansionInput): PlanExpansion {
    const spec = this.aggregators.get(input.taskId);
    if (!spec) return { ok: false, issues: [`"${input.taskId}" is not a map or reduce task of this run`] };
    let tasks: TaskSpec[];
    if (input.map) {
      const from = spec.items && 'from' in spec.items ? spec.items.from : undefined;
      const items = from !== undefined ? itemsOfOutput(from, input.map.itemsText ?? '') : (this.items.get(spec.id) ?? { ok: false as const, message: 'no items' });
      if (!items.ok) return { ok: false, issues: [items.message] };
      const made = mapSubtasks(spec, items.items, input.map);
      if (!made.ok) return made;
      tasks = made.tasks;
    } else {
      tasks = groupSubtasks(spec, input.reduce!.groups);
    }
    // `validate` keeps the plan's ids out of the ones made here; a plan journaled before it did may not.
    const taken = tasks.find((t) => this.tasks.has(t.id));
    if (taken) return { ok: false, issues: [`its sub-task "${taken.id}" would have the id of a task the run already has: rename that task`] };
    const resolved = this.resolve(input.taskId, input.depth + 1, tasks);
    this.onAccepted?.(input.taskId, tasks, resolved);
    return { ok: true, tasks: resolved };
  }

  /** Sub-tasks as the supervisor runs them (ranks within their own graph). */
  resolve(parent: string, depth: number, tasks: readonly TaskSpec[]): SupervisedTask[] {
    const ranks = criticalPathRanks(tasks);
    for (const t of tasks) {
      this.tasks.set(t.id, { deps: t.deps });
      if (t.kind === 'reduce') this.aggregators.set(t.id, t);
    }
    return tasks.map((t) => resolveTask(this.plan, t, ranks.get(t.id) ?? 1, this.opts, { depth, parent }));
  }
}
