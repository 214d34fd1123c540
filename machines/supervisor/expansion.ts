/** A planner's (or an aggregator's) output was checked by `expandPlan`: its sub-tasks join the run, or the attempt fails. */
import { stopChild, type DoneActorEvent, type ErrorActorEvent } from 'xstate';
import { errorInfo, toErrorInfo } from '../errors.js';
import { childIdOf, enqueueReport } from '../kit.js';
import { ZERO_USAGE } from '../protocol.js';
import { failAggregate, reportFailure, reportFlow } from './settle.js';
import type { Enqueue, PlanExpansion, SupervisorContext } from './types.js';

export function applyExpansion(context: SupervisorContext, q: Enqueue, event: { type: string }): void {
  const actorId = childIdOf(event);
  q(stopChild(actorId));
  const pending = context.expanding.get(actorId);
  context.expanding.delete(actorId);
  if (!pending) return;
  const { taskId, attempt } = pending;
  const expansion: PlanExpansion = event.type.startsWith('xstate.done.')
    ? (event as unknown as DoneActorEvent<PlanExpansion>).output
    : { ok: false, issues: [`checking the plan failed: ${toErrorInfo((event as ErrorActorEvent).error).message}`] };
  const table = context.table;
  const spec = table.spec(taskId);
  const aggregator = spec.kind === 'map' || spec.kind === 'reduce';
  if (expansion.ok && context.stop === null && aggregator) {
    const settlement = table.expandInPlace(taskId, attempt, expansion.tasks);
    if (settlement.kind !== 'expanded') return;
    enqueueReport(q, { type: 'task:planned', taskId, attempt, subtasks: expansion.tasks.map((t) => t.id), depth: (spec.depth ?? 0) + 1, container: true });
    for (const id of settlement.unlocked) enqueueReport(q, { type: 'task:queued', taskId: id });
    return;
  }
  if (expansion.ok && context.stop === null) {
    const settlement = table.expand(taskId, attempt, expansion.tasks);
    if (settlement.kind !== 'completed') return;
    enqueueReport(q, { type: 'task:planned', taskId, attempt, subtasks: expansion.tasks.map((t) => t.id), depth: (table.spec(taskId).depth ?? 0) + 1 });
    enqueueReport(q, { type: 'task:completed', taskId, attempt, output: pending.output, usage: pending.usage, ...table.countersOf(taskId) });
    reportFlow(q, table, settlement);
    return;
  }
  if (context.stop !== null) {
    // The run is stopping: the planner's answer is not judged, the task is cancelled.
    const settlement = table.settle({ taskId, attempt, status: 'cancelled', usage: ZERO_USAGE, requests: 0, retries: 0, turns: 0, messages: [] }, { retry: false });
    if (settlement.kind === 'cancelled') enqueueReport(q, { type: 'task:cancelled', taskId, ...table.countersOf(taskId) });
    return;
  }
  const issues = expansion.ok ? [] : expansion.issues;
  if (aggregator) {
    // Items that are not a list, or a bad key: the same every time, so not retried.
    failAggregate(context, q, taskId, attempt, errorInfo('invalid_plan', `task "${taskId}": ${issues.join('; ')}`));
    return;
  }
  const error = errorInfo('invalid_plan', `task "${taskId}": its output is not a valid list of sub-tasks: ${issues.join('; ')}`, !expansion.ok);
  enqueueReport(q, { type: 'task:plan-rejected', taskId, attempt, issues });
  const settlement = table.rejectPlan(taskId, attempt, error, issues, { retry: context.stop === null });
  if (settlement.kind === 'retry' || settlement.kind === 'failed') reportFailure(context, q, taskId, attempt, error, settlement);
}
