/** The `run:started` event: what the run is about to do, as the CLI, the report and the journal read it. */
import type { RunEvent } from '../../machines/protocol.js';
import type { SupervisorInput } from '../../machines/supervisor/machine.js';
import { isAggregator } from '../../machines/tasks/types.js';
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
    ...restoredOf(input),
  };
}

/**
 * For `run:started` on a resume or retry: what earlier lives counted for each task (so the views
 * count the whole run, as its result does), and the maps and reduces that had expanded.
 */
function restoredOf(input: SupervisorInput): Pick<Extract<RunEvent, { type: 'run:started' }>, 'restored' | 'containers'> {
  const restore = input.restore;
  if (!restore) return {};
  const specs = new Map(input.tasks.map((t) => [t.id, t]));
  for (const e of restore.expansions) for (const t of e.tasks) specs.set(t.id, t);
  const restored: NonNullable<Extract<RunEvent, { type: 'run:started' }>['restored']> = {};
  let any = false;
  for (const t of restore.tasks) {
    const attempts = t.started ?? t.attempts;
    if (attempts === 0 && t.requests === 0 && t.retries === 0 && t.costUsd === 0) continue;
    const model = specs.get(t.id)?.modelName;
    restored[t.id] = { ...(model !== undefined ? { model } : {}), attempts, requests: t.requests, retries: t.retries, usage: t.usage, costUsd: t.costUsd };
    any = true;
  }
  const containers = restore.expansions.map((e) => e.planner).filter((id) => specs.has(id) && isAggregator(specs.get(id)!));
  return { ...(any ? { restored } : {}), ...(containers.length > 0 ? { containers } : {}) };
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
