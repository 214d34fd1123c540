/**
 * `Journal`: turns one run's public events (`RunEvent`, machines/protocol.ts) into store writes,
 * as they stream past. It is on the hot path (every event of every run goes through `record`),
 * so it is one switch on the type, O(1) per event; events it does not journal cost one
 * comparison. It serializes nothing but what is stored anyway (a task's usage, its error).
 *
 *   task:started    -> taskStarted (route: the event's `<provider>/<model>`, else the plan model)
 *   task:completed  -> taskCompleted (batched)
 *   task:failed     -> taskFailed, final = !willRetry
 *   task:skipped    -> taskFinal('skipped', reason)
 *   task:cancelled  -> taskFinal('cancelled', 'cancelled')
 *   anything else   -> nothing
 *
 * The runtime calls the store itself for what events do not carry: recordSpend, addTasks,
 * setTaskExtra, recordToolResult, setRunStatus.
 */
import type { RunEvent } from '../../machines/protocol.js';
import type { Store } from './types.js';

/**
 * A run event as the journal takes it: `at` (ms since the epoch; default Date.now()) and, on
 * task:completed, what the runtime may add: the task's cost (null when its model has no price),
 * its requests and retries (default 0).
 */
export type JournalEvent = RunEvent & { at?: number; costUsd?: number | null; requests?: number; retries?: number };

export class Journal {
  constructor(
    readonly store: Store,
    readonly runId: string,
  ) {}

  /** Writes what `event` means for the run, or nothing. Throws the store's StoreError. */
  record(event: JournalEvent): void {
    switch (event.type) {
      case 'task:started':
        this.store.taskStarted(this.runId, event.taskId, event.attempt, event.route ?? event.model, event.at ?? Date.now());
        return;
      case 'task:completed':
        this.store.taskCompleted(
          this.runId,
          event.taskId,
          event.attempt,
          event.output,
          event.usage,
          event.costUsd ?? null,
          event.requests ?? 0,
          event.retries ?? 0,
          event.at ?? Date.now(),
        );
        return;
      case 'task:failed':
        this.store.taskFailed(this.runId, event.taskId, event.attempt, event.error, !event.willRetry, event.at ?? Date.now());
        return;
      case 'task:skipped':
        this.store.taskFinal(this.runId, event.taskId, 'skipped', event.reason, event.at ?? Date.now());
        return;
      case 'task:cancelled':
        this.store.taskFinal(this.runId, event.taskId, 'cancelled', 'cancelled', event.at ?? Date.now());
        return;
      default:
        return;
    }
  }
}
