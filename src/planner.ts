/**
 * Planner tasks at run time: the `expandPlan` actor the supervisor asks when a planner's attempt
 * has answered. It checks the answer like a plan (src/plan/subtasks.ts) and resolves the
 * sub-tasks as the supervisor runs them (src/resolve.ts), one level deeper than their planner.
 */
import type { PlanExpansion, PlanExpansionInput } from '../machines/supervisor.machine.js';
import type { SupervisedTask } from '../machines/runTable.js';
import { criticalPathRanks, parseSubtasks, type Plan, type TaskSpec } from './plan/index.js';
import { resolveTask, type TaskResolveOptions } from './resolve.js';

export class PlanExpander {
  /** Every task id of the run so far, with what a planner among them needs: its deps. */
  private readonly tasks = new Map<string, { deps: readonly string[] }>();

  constructor(
    private readonly plan: Plan,
    private readonly opts: TaskResolveOptions & { toolNames: readonly string[] },
    /** Called with the accepted sub-tasks, as written (renamed), before they join the run (the journal keeps them). */
    private readonly onAccepted?: (plannerId: string, tasks: TaskSpec[], resolved: SupervisedTask[]) => void,
  ) {
    for (const t of plan.tasks) this.tasks.set(t.id, { deps: t.deps });
  }

  expand(input: PlanExpansionInput): PlanExpansion {
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

  /** Sub-tasks as the supervisor runs them (ranks within their own graph). */
  resolve(parent: string, depth: number, tasks: readonly TaskSpec[]): SupervisedTask[] {
    const ranks = criticalPathRanks(tasks);
    for (const t of tasks) this.tasks.set(t.id, { deps: t.deps });
    return tasks.map((t) => resolveTask(this.plan, t, ranks.get(t.id) ?? 1, this.opts, { depth, parent }));
  }
}
