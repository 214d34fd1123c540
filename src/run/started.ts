/** The `run:started` event: what the run is about to do, as the CLI, the report and the journal read it. */
import type { RunEvent } from '../../machines/protocol.js';
import type { SupervisorInput } from '../../machines/supervisor/machine.js';
import { priceOf } from '../cost/prices.js';
import type { Plan } from '../plan/index.js';

/** `retried`: a retry, with how many tasks it sent back to pending. */
export function startedEvent(runId: string, plan: Plan, input: SupervisorInput, retried: number | undefined): Extract<RunEvent, { type: 'run:started' }> {
  return {
    type: 'run:started',
    runId,
    tasks: input.tasks.length + (input.restore?.expansions.reduce((n, e) => n + e.tasks.length, 0) ?? 0),
    models: Object.fromEntries(
      Object.entries(plan.models).map(([name, m]) => {
        const price = priceOf(m.model, m.price);
        return [name, { provider: m.provider, model: m.model, ...(price ? { price } : {}) }];
      }),
    ),
    keys: Object.fromEntries(input.providers.flatMap((p) => p.keys.map((k) => [k.keyId, k.limits]))),
    maxInFlight: input.maxInFlight,
    ...(plan.budget?.usd !== undefined ? { budgetUsd: plan.budget.usd } : {}),
    ...depsOf([...input.tasks, ...(input.restore?.expansions.flatMap((e) => e.tasks) ?? [])]),
    ...beforeOf(input.restore?.tasks),
    ...(input.restore ? { resumed: true, alreadyCompleted: input.restore.tasks.filter((t) => t.status === 'completed').length } : {}),
    ...(retried !== undefined ? { retried } : {}),
  };
}

/** The DAG for `run:started`: every task with its dependencies, in plan order. */
function depsOf(tasks: readonly { id: string; deps: readonly string[] }[]): { deps?: Record<string, string[]> } {
  return tasks.length > 0 ? { deps: Object.fromEntries(tasks.map((t) => [t.id, [...t.deps]])) } : {};
}

/** For `run:started` on a resume or retry: how the tasks that had ended before ended. */
function beforeOf(tasks: readonly { id: string; status: string }[] | undefined): { before?: Record<string, 'completed' | 'failed' | 'skipped'> } {
  const ended = (tasks ?? []).filter((t): t is { id: string; status: 'completed' | 'failed' | 'skipped' } => t.status !== 'pending');
  return ended.length > 0 ? { before: Object.fromEntries(ended.map((t) => [t.id, t.status])) } : {};
}
