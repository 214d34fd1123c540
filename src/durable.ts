/**
 * Durable runs: what a run writes to its journal (src/store/) and how a resume reads it back.
 *
 * - The journal takes the run's events as they happen (task status changes, outputs, usage, each
 *   priced call's cost, a rejected answer with its problems), the sub-tasks planners make, review rounds, and the results of tool calls
 *   that are not read-only. Writes are batched, one transaction per macrotask (or per 512
 *   writes, store/sqliteWrites.ts); tool results,
 *   sub-tasks, reopened drafts and final failures are committed at once; pending spend is
 *   committed before each model call, and everything pending before each side-effecting tool call.
 * - A journal that cannot write (disk full, read-only file) stops the run: agents are cancelled,
 *   nothing more is sent, and the run's result rejects with the StoreError. What was committed
 *   stays consistent (each batch is one transaction), so a resume works once the disk is fixed.
 * - A resume rebuilds the supervisor's table from the journal (not from XState snapshots, which
 *   lose scheduled delays and re-run unfinished promise actors): completed tasks keep their
 *   outputs, unfinished ones run again, budgets continue from what was spent.
 * - Secrets never reach the journal: the stored plan is the one src/planSecrets.ts gives.
 */
import type { ErrorInfo, RunEvent, Usage } from '../machines/protocol.js';
import { ZERO_USAGE } from '../machines/protocol.js';
import type { Feedback } from '../machines/tasks/types.js';
import { restoredStatus, type RestoredTask, type RunRestore } from '../machines/tasks/restore.js';
import { createHash } from 'node:crypto';
import { canonicalJson } from '../machines/canonical.js';
import type { PlanExpander } from './planner.js';
import type { TaskSpec } from './plan/index.js';
import { Journal, skipCauseOf, StoreError, type AttemptRow, type PlannerExtra, type RejectedAnswer, type ReviewExtra, type Store, type StoredRunStatus, type TaskRow } from './store/index.js';

/** What the journal keeps as the result of a run refused at start (status `failed`). */
export interface RefusedAtStart {
  refusedAtStart: { code: string; message: string };
}

/** The refusal a stored result records, if it is one. */
export function refusalOf(result: unknown): RefusedAtStart['refusedAtStart'] | undefined {
  const refusal = (result as Partial<RefusedAtStart> | null)?.refusedAtStart;
  return refusal && typeof refusal.message === 'string' ? refusal : undefined;
}

// ---------------------------------------------------------------------------------------------
// Writing: the run's journal
// ---------------------------------------------------------------------------------------------

export class RunJournal {
  private readonly journal: Journal;
  /** The first write error: the run stops, and nothing more is written. */
  failure: StoreError | undefined;
  /** Told once, when a write fails (the runtime cancels the run). */
  onFailure: (error: StoreError) => void = () => {};
  /** A priced call's cost is written but not yet committed. */
  private spendPending = false;
  /** Side-effect calls seen in this life of the run, per task, tool and arguments: the nth replays the nth. */
  private readonly toolSeen = new Map<string, number>();

  /**
   * @param redact what every write goes through that did not come as a run event (events are
   *   redacted where they are reported): sub-task specs, tool results, the result.
   */
  constructor(
    readonly store: Store,
    readonly runId: string,
    private readonly redact: <T>(value: T) => T = (value) => value,
  ) {
    this.journal = new Journal(store, runId);
  }

  /** One run event (already redacted) into the journal (a failure stops the run; later events are dropped). */
  record(event: RunEvent & { at?: number }): void {
    if (this.failure) return;
    // Every event of the run comes through here: no closure per event, as `attempt` would take.
    try {
      this.journal.record(event);
      if ((event.type === 'model:response' || event.type === 'model:error') && event.costUsd !== undefined) this.spendPending = true;
      if (event.type === 'task:planned') {
        // The sub-tasks joined the run: their specs (kept from the check), and which ones the
        // planner made this time (a planner that plans again after a crash leaves older rows behind).
        const specs = this.accepted.get(event.taskId) ?? [];
        this.accepted.delete(event.taskId);
        this.store.addTasks(this.runId, specs.map((t) => ({ id: t.id, spec: this.redact(t), parent: event.taskId })));
        this.store.setTaskExtra(this.runId, event.taskId, { subtasks: event.subtasks } satisfies PlannerExtra);
      }
    } catch (error) {
      this.failWith(error);
    }
  }

  /** Sub-tasks a planner's answer made, kept until the supervisor has taken them in (`task:planned`). */
  private readonly accepted = new Map<string, readonly TaskSpec[]>();

  /** A planner's answer passed the check; its sub-tasks are written when they join the run. */
  acceptSubtasks(planner: string, tasks: readonly TaskSpec[]): void {
    this.accepted.set(planner, tasks);
  }

  /**
   * Before a model call leaves: what earlier calls spent is committed first, so a resumed budget
   * counts every call that was answered before the next one left. (The answer to a call in flight
   * when the process dies is lost with it; other writes ride the store's batch, committed within
   * the same macrotask: a crash loses at most that much, which a resume runs again.)
   */
  beforeCall(): void {
    this.check();
    if (!this.spendPending) return;
    this.spendPending = false;
    this.flush();
  }

  /** Commits what is pending: called before a side-effecting tool call leaves the process. */
  flush(): void {
    this.attempt(() => this.store.flush());
    this.check();
  }

  /**
   * A side-effecting tool call: the result recorded for it in an earlier life of the run, or
   * the call made now and its result recorded (durable) before the agent sees it.
   */
  async sideEffect(taskId: string, name: string, args: unknown, signal: AbortSignal, run: (idempotencyKey: string) => Promise<string>): Promise<string> {
    const base = `${taskId}\u0000${name}\u0000${canonicalJson(args)}`;
    const n = this.toolSeen.get(base) ?? 0;
    this.toolSeen.set(base, n + 1);
    const key = `${base}\u0000${n}`;
    const recorded = this.store.toolResult(this.runId, key);
    if (recorded) {
      if (recorded.isError) throw new Error(recorded.content);
      return recorded.content;
    }
    this.flush();
    let content: string;
    try {
      // Crashing after the tool ran but before its result was recorded repeats the call on
      // resume; the key, the same both times, lets the tool's server see it is a repeat.
      content = await run(createHash('sha256').update(`${this.runId}\u0000${key}`).digest('hex').slice(0, 32));
    } catch (error) {
      // A call cut short (its attempt cancelled or timed out) has no result to replay.
      if (!signal.aborted) this.attempt(() => this.store.recordToolResult(this.runId, key, this.redact((error as Error).message ?? String(error)), true));
      throw error;
    }
    this.attempt(() => this.store.recordToolResult(this.runId, key, this.redact(content), false));
    this.check();
    return content;
  }

  /**
   * The run ended: its status and result, if the journal still works. `redacted`: the caller
   * redacted the result already (the run's own result, as its caller gets it): a big run's
   * result is not walked twice.
   */
  finish(status: StoredRunStatus, result: unknown, redacted = false): void {
    this.attempt(() => this.store.setRunStatus(this.runId, status, redacted ? result : this.redact(result)));
  }

  /** A new run that was refused before anything ran: failed, with the reason (as a result of its own shape). */
  refusedAtStart(error: unknown): void {
    if (error instanceof StoreError) return;
    const e = error as { code?: unknown; message?: unknown } | null;
    const refusal: RefusedAtStart = {
      refusedAtStart: { code: typeof e?.code === 'string' ? e.code : 'internal', message: typeof e?.message === 'string' ? e.message : String(error) },
    };
    this.finish('failed', refusal);
  }

  /** The journal cannot write (a failed write, or a batch the store could not commit): the run stops. */
  fail(error: StoreError): void {
    if (this.failure) return;
    this.failure = error;
    this.onFailure(error);
  }

  private attempt(write: () => void): void {
    if (this.failure) return;
    try {
      write();
    } catch (error) {
      this.failWith(error);
    }
  }

  private failWith(error: unknown): void {
    this.fail(error instanceof StoreError ? error : new StoreError(`journal write failed: ${(error as Error).message}`, this.store.path, 'unknown'));
  }

  /** Throws the journal's failure: what depends on a durable write must not go on without it. */
  private check(): void {
    if (this.failure) throw Object.assign(new Error(`the run's journal cannot be written: ${this.failure.message}`), { code: 'internal', retryable: false });
  }
}

// ---------------------------------------------------------------------------------------------
// Reading: a resume
// ---------------------------------------------------------------------------------------------

/**
 * The supervisor's starting point for a resume: every journaled task's state, and the sub-tasks
 * of planners that had completed (re-resolved, in the order they were made).
 */
export function restoreOf(
  rows: readonly TaskRow[],
  attempts: readonly AttemptRow[],
  spentByTask: Record<string, number>,
  expander: PlanExpander,
  planTaskIds: ReadonlySet<string>,
  /** Per task sent back by a retry (src/run/retry.ts): the attempts it had made before. */
  retryBases: ReadonlyMap<string, number> = new Map(),
): RunRestore {
  // What the task rows do not keep for an unfinished task: its failed (retried) attempts, and
  // those a crash interrupted. Both count against its retries (those since its last retry only).
  const interrupted = new Map<string, number>();
  const failed = new Map<string, number>();
  // Attempts an agent started (a route journaled; a map's or reduce's own steps have none): what the task reports.
  const started = new Map<string, number>();
  for (const a of attempts) {
    if (a.route !== '') started.set(a.taskId, (started.get(a.taskId) ?? 0) + 1);
    if (a.attempt <= (retryBases.get(a.taskId) ?? 0)) continue;
    if (a.endedAt === null) interrupted.set(a.taskId, (interrupted.get(a.taskId) ?? 0) + 1);
    else if (a.status === 'failed') failed.set(a.taskId, (failed.get(a.taskId) ?? 0) + 1);
  }
  const byId = new Map(rows.map((r) => [r.taskId, r]));
  const depthOf = new Map<string, number>([...planTaskIds].map((id) => [id, 0]));
  const expansions: RunRestore['expansions'] = [];
  // Sub-tasks come in the order they were written, so a planner's row precedes its sub-tasks'.
  const groups = new Map<string, TaskSpec[]>();
  for (const row of rows) {
    if (row.parent === null || row.spec === null) continue;
    const list = groups.get(row.parent) ?? groups.set(row.parent, []).get(row.parent)!;
    list.push(row.spec as TaskSpec);
  }
  for (const [planner, all] of groups) {
    // Only a planner that completed has sub-tasks; one that had not will plan again. A map or
    // reduce waits for its sub-tasks: they are restored whatever its status.
    const row = byId.get(planner);
    if (!row || (row.status !== 'completed' && !expander.isAggregator(planner)) || !depthOf.has(planner)) continue;
    // Those of its completed answer (older rows of an answer that never joined are left out).
    const made = (row.extra as Partial<PlannerExtra> | null)?.subtasks;
    const specs = made ? all.filter((s) => made.includes(s.id)) : all;
    const depth = depthOf.get(planner)! + 1;
    for (const spec of specs) depthOf.set(spec.id, depth);
    expansions.push({ planner, tasks: expander.resolve(planner, depth, specs) });
  }
  const known = new Set([...planTaskIds, ...expansions.flatMap((e) => e.tasks.map((t) => t.id))]);
  const tasks: RestoredTask[] = [];
  for (const row of rows) {
    if (!known.has(row.taskId)) continue;
    const extra = (row.extra ?? {}) as ReviewExtra;
    const task: RestoredTask = {
      id: row.taskId,
      status: restoredStatus(row.status),
      attempts: row.attempts,
      started: started.get(row.taskId) ?? 0,
      // What it reports: the journal keeps the task's retries as each attempt ends.
      retries: row.retries,
      // What counts against its maxRetries: since its last retry session only (a fresh budget).
      // Attempts a crash interrupted count: a task that takes the process down each time it runs
      // is not dispatched forever.
      retriesCounted:
        row.status === 'completed'
          ? row.retries
          : (retryBases.has(row.taskId) ? (failed.get(row.taskId) ?? 0) : Math.max(row.retries, failed.get(row.taskId) ?? 0)) + (interrupted.get(row.taskId) ?? 0),
      requests: row.requests,
      usage: (row.usage as Usage | null) ?? ZERO_USAGE,
      // Own entries only: a task named `constructor` must not read the prototype's.
      costUsd: (Object.hasOwn(spentByTask, row.taskId) ? spentByTask[row.taskId] : undefined) ?? row.costUsd ?? 0,
    };
    if (row.output !== null) task.output = row.output;
    // A task a retry sent back starts clean: the old error is not its own until it fails again.
    if (row.error && !(retryBases.has(row.taskId) && task.status === 'pending')) task.error = row.error as ErrorInfo;
    if (row.status === 'skipped') task.skip = { cause: skipCauseOf(row.extra), reason: row.reason ?? '' };
    if (extra.rounds !== undefined) task.rounds = extra.rounds;
    if (extra.approved !== undefined) task.approved = extra.approved;
    // A rejected answer is cleared when its task completes or is reopened: one still there came
    // after any review feedback, and replaced it, as in the run table.
    if (row.rejected && task.status === 'pending') task.feedback = rejectedFeedback(row.rejected, row.output ?? '');
    else if (extra.feedback && task.status === 'pending') {
      const feedback: Feedback = { kind: 'review', ...extra.feedback, draft: row.output ?? '' };
      task.feedback = feedback;
    }
    tasks.push(task);
  }
  // An approval that approved an edited output: the approved task's row keeps what it answered,
  // the run went on with the edit (its dependents read it, the result shows it).
  const restored = new Map(tasks.map((t) => [t.id, t]));
  for (const row of rows) {
    const extra = (row.extra ?? {}) as ReviewExtra;
    const target = typeof extra.approves === 'string' ? restored.get(extra.approves) : undefined;
    if (target && typeof extra.edited === 'string' && extra.decision?.approved === true && target.status === 'completed') target.output = extra.edited;
  }
  return { tasks, expansions };
}

/** The retry's feedback of a journaled rejected answer, as `RunTable.settle` made it before the crash. */
function rejectedFeedback(rejected: RejectedAnswer, draft: string): Feedback {
  const code = rejected.code === 'rejected_output' ? 'rejected_output' : 'invalid_output';
  return { kind: 'output', code, draft, problems: rejected.problems };
}
