/** What a resume or a retry reads back from the journal to continue a run. */
import { readFileSync } from 'node:fs';
import type { RunResult } from '../../machines/tasks/results.js';
import type { AttemptRow, Spent, Store, TaskRow } from '../store/index.js';
import { createEmitter } from '../util/emitter.js';
import type { RunEvents, RunHandle } from '../swarm.js';
import { retryBasesOf } from './retry.js';

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

/** A handle for a run that had already finished: its result as recorded. */
export function finishedHandle(runId: string, result: RunResult): RunHandle {
  return { id: runId, events: createEmitter<RunEvents>(), result: Promise.resolve(result), cancel: () => {}, actor: undefined };
}

/** The plan file a run was started from, if it is still there and readable. */
export function readPlanFile(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}
