/**
 * `Journal`: turns one run's public events (`RunEvent`, machines/protocol.ts) into store writes,
 * as they stream past. It is on the hot path (every event of every run goes through `record`),
 * so it is one switch on the type, O(1) per event; events it does not journal cost one
 * comparison. It serializes nothing but what is stored anyway (a task's usage, its error).
 *
 *   task:started    -> taskStarted (route: the event's `<provider>/<model>`, else the plan model)
 *   task:completed  -> taskCompleted (batched), with the task's usage over all its attempts
 *   task:failed     -> taskCounters, then taskFailed, final = !willRetry; a rejected answer (`output`) with its problems
 *   task:skipped    -> taskFinal('skipped', reason); skipped by its condition, that cause too (setTaskExtra)
 *   task:cancelled  -> taskCounters (an attempt was in flight), then taskFinal('cancelled', 'cancelled')
 *   model:response  -> recordSpend, when the call was priced (`costUsd`)
 *   model:error     -> recordSpend, when the failed call was charged its worst case (`costUsd`)
 *   task:reviewed   -> the reviewer's rounds (setTaskExtra); a revision also ends the review's
 *                      attempt (with its counters) and reopens the reviewed task with its feedback (durable)
 *   approval:requested -> taskFinal('waiting', the question)
 *   approval:decided   -> the approval's last decision (and an edited draft) in its extra (setTaskExtra),
 *                      after the events of what it did (completed, failed, sent back)
 *   anything else   -> nothing
 *
 * The runtime calls the store itself for what events do not carry: addTasks (a planner's
 * sub-tasks, with their specs), recordToolResult, setRunStatus.
 */
import { ZERO_USAGE, type RunEvent, type TaskCounters } from '../../machines/protocol.js';
import type { ReviewExtra, SkipExtra } from './extras.js';
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
          event.taskUsage ?? event.usage,
          event.costUsd ?? null,
          event.requests ?? 0,
          event.retries ?? 0,
          event.at ?? Date.now(),
        );
        return;
      case 'task:failed': {
        const at = event.at ?? Date.now();
        // Before the failure: a final one is durable now, and commits what is pending with it.
        this.counters(event, at);
        if (event.output === undefined) return this.store.taskFailed(this.runId, event.taskId, event.attempt, event.error, !event.willRetry, at);
        // A rejected answer: kept with its problems, as the run table keeps them for the retry's prompt.
        const rejected = { output: event.output, code: event.error.code, problems: event.error.problems ?? [event.error.message] };
        this.store.taskFailed(this.runId, event.taskId, event.attempt, event.error, !event.willRetry, at, rejected);
        return;
      }
      case 'task:skipped':
        this.store.taskFinal(this.runId, event.taskId, 'skipped', event.reason, event.at ?? Date.now());
        if (event.cause === 'condition') this.store.setTaskExtra(this.runId, event.taskId, { skipped: 'condition' } satisfies SkipExtra);
        return;
      case 'task:cancelled':
        this.counters(event, event.at ?? Date.now());
        this.store.taskFinal(this.runId, event.taskId, 'cancelled', 'cancelled', event.at ?? Date.now());
        return;
      case 'model:response':
      case 'model:error':
        if (event.costUsd !== undefined) this.store.recordSpend(this.runId, event.taskId, event.modelName ?? event.model, event.costUsd);
        return;
      case 'task:reviewed': {
        this.store.setTaskExtra(this.runId, event.taskId, { rounds: event.round, approved: event.verdict === 'approve' } satisfies ReviewExtra);
        if (event.final) return;
        // The review's attempt is over (the reviewer waits for the new draft); its task is not.
        const at = event.at ?? Date.now();
        this.counters(event, at);
        this.store.attemptEnded(this.runId, event.taskId, event.attempt, 'completed', at);
        const extra: ReviewExtra = { rounds: event.round, feedback: { round: event.round, maxRounds: event.maxRounds, findings: event.findings ?? '' } };
        this.store.taskReopened(this.runId, event.target, extra, at);
        return;
      }
      case 'approval:requested':
        this.store.taskFinal(this.runId, event.taskId, 'waiting', event.prompt, event.at ?? Date.now());
        return;
      case 'approval:decided': {
        const { approved, note, by, decidedAt, edited, outcome, round } = event;
        const decision = { approved, ...(note !== undefined ? { note } : {}), by, at: decidedAt, ...(edited ? { edited } : {}), outcome };
        const extra: ReviewExtra = { rounds: round, approved, decision, ...(event.output !== undefined ? { edited: event.output, approves: event.approves } : {}) };
        this.store.setTaskExtra(this.runId, event.taskId, extra);
        return;
      }
      default:
        return;
    }
  }

  /** The task's counters an event carries (an attempt ended without completing it), if it carries them. */
  private counters(event: Partial<TaskCounters> & { taskId: string }, at: number): void {
    if (event.requests === undefined) return;
    this.store.taskCounters(this.runId, event.taskId, event.requests, event.retries ?? 0, event.taskUsage ?? ZERO_USAGE, at);
  }
}
