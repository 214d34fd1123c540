/** What a resume or a retry reads back from the journal to continue a run, and what its rows count. */
import { ApprovalError } from './approvals.js';
import { readFileSync } from 'node:fs';
import { ZERO_USAGE, type RunEvent, type TaskStatus, type Usage } from '../../machines/protocol.js';
import { newTally, type TaskTally } from '../../machines/tasks/counts.js';
import type { RunResult } from '../../machines/tasks/results.js';
import { priceOf } from '../cost/prices.js';
import type { ModelPrice } from '../plan/index.js';
import type { AttemptRow, Spent, Store, TaskRow } from '../store/index.js';
import { createEmitter } from '../util/emitter.js';
import type { RunEvents, RunHandle } from '../swarm.js';
import { retryBasesOf } from './retry.js';
import { EventLog, iterationOf } from './eventStream.js';

/** What a resume (or a retry) restores a run from. */
export interface JournaledState {
  rows: TaskRow[];
  attempts: AttemptRow[];
  spent: Spent;
  /** Per task sent back by a retry: the attempts it had made before. */
  retryBases: Map<string, number>;
  /** A retry: how many tasks it sent back to pending. */
  retried?: number;
}

export function stateOf(store: Store, runId: string, runOptions: unknown): JournaledState {
  return { rows: store.loadTasks(runId), attempts: store.loadAttempts(runId), spent: store.spent(runId), retryBases: retryBasesOf(runOptions) };
}

/** Run statuses a resume does not run again. */
export const FINISHED = new Set(['completed', 'partial', 'failed', 'budget_exceeded']);

/** A handle for a run that had already finished: its result as recorded, and no event (its iterators end at once). */
export function finishedHandle(runId: string, result: RunResult): RunHandle {
  const log = new EventLog<RunEvent>(runId);
  log.end();
  return {
    id: runId,
    events: createEmitter<RunEvents>(),
    result: Promise.resolve(result),
    cancel: () => {},
    approve: (taskId) => {
      throw new ApprovalError('NOT_WAITING', `task "${taskId}" of run ${runId} is not waiting for approval (the run has finished: ${result.status})`);
    },
    actor: undefined,
    ...iterationOf(log),
  };
}

/**
 * What each task of a journaled run adds to its counts, from its rows (in the plan's order, then
 * the journal's): a task the journal has no row for yet is pending; a map or reduce with rows made
 * under it is a container; attempts are those an agent started (a route journaled); the cost is
 * the spend charged for its calls.
 */
export function journalTallies(plan: unknown, rows: readonly TaskRow[], attempts: readonly AttemptRow[], spentByTask: Record<string, number>): Map<string, TaskTally> {
  type Spec = { id: string; kind?: unknown; model?: unknown };
  const p = plan as { tasks?: Partial<Spec>[]; models?: Record<string, { model?: unknown; price?: ModelPrice }> } | null;
  const planned = (p?.tasks ?? []).filter((t): t is Spec => typeof t?.id === 'string');
  const specs = new Map<string, Spec>(planned.map((t) => [t.id, t]));
  for (const r of rows) if (r.spec !== null) specs.set(r.taskId, r.spec as Spec);
  // A call the journal charged nothing for was priced at $0, or its model has no price.
  const unpricedModel = (id: string) => {
    const name = specs.get(id)?.model;
    const model = typeof name === 'string' && p?.models && Object.hasOwn(p.models, name) ? p.models[name] : undefined;
    return model !== undefined && priceOf(String(model.model), model.price) === undefined;
  };
  const parents = new Set(rows.map((r) => r.parent).filter((p): p is string => p !== null));
  const started = new Map<string, number>();
  for (const a of attempts) if (a.route !== '') started.set(a.taskId, (started.get(a.taskId) ?? 0) + 1);
  const tallies = new Map<string, TaskTally>(planned.map((t) => [t.id, newTally()]));
  for (const r of rows) {
    const kind = specs.get(r.taskId)?.kind;
    const container = parents.has(r.taskId) && (kind === 'map' || kind === 'reduce');
    const spent = Object.hasOwn(spentByTask, r.taskId) ? spentByTask[r.taskId]! : r.costUsd;
    tallies.set(r.taskId, {
      status: r.status as TaskStatus,
      container,
      attempts: container ? 0 : (started.get(r.taskId) ?? 0),
      requests: r.requests,
      retries: r.retries,
      rateLimited: 0,
      usage: (r.usage as Usage | null) ?? ZERO_USAGE,
      costUsd: spent ?? 0,
      unpriced: spent === null && r.requests > 0 && unpricedModel(r.taskId) ? 1 : 0,
    });
  }
  return tallies;
}

/** The plan file a run was started from, if it is still there and readable. */
export function readPlanFile(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}
