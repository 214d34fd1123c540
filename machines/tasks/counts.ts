/**
 * The counts of a run: tasks by status, containers, attempts, requests, retries, 429s, tokens and
 * cost. They are added up here and nowhere else. Each surface says what it knows of each task (a
 * `TaskTally`, from the run table, a result, the journal's rows or an event stream) and shows the
 * totals a `CountBook` keeps, so the CLI summary, `--json`, `show`, the report, the live page and
 * the progress line cannot disagree on how to add.
 *
 * What the words mean (docs/cli.md says the same):
 * - A **task** runs attempts of its own: a plan task, a planner's sub-task, a map's item, a
 *   reduce's group, a reduce whose inputs fit one call.
 * - A **container** is a map, or a reduce that split its inputs into groups, once it has expanded:
 *   its items or groups are the tasks; it runs no attempt, sends no request and costs nothing of
 *   its own. It is counted in `containers`, never in `tasks`. (A map or reduce that never
 *   expanded, skipped or failed before it could, is a task that made no attempt.)
 * - **attempts**: agents started for a task, over every life of the run (a resume, a retry).
 * - **requests**: model calls sent, failed ones and 429s included, over every life of the run.
 * - **retries**: calls sent again within an attempt, and new attempts after a retryable failure.
 * - **429s**: calls answered `rate_limited` (waited out, never a retry). Only an event stream
 *   knows them; a result or the journal counts 0.
 * - **cost**: USD of the priced calls; a task's cost is unknown when a call of it had no price,
 *   and a sum is unknown (null) when some task's is and no task that sent a request has a known one.
 */
import { ZERO_USAGE, type TaskStatus, type Usage } from '../protocol.js';

/** What one task adds to its run's counts. */
export interface TaskTally {
  status: TaskStatus;
  /** A map, or a reduce that split its inputs into groups: counted in `containers` alone. */
  container: boolean;
  attempts: number;
  requests: number;
  retries: number;
  /** Calls answered 429. */
  rateLimited: number;
  usage: Usage;
  /** USD of its priced calls. */
  costUsd: number;
  /** Calls without a price (or 1 for a task whose whole cost is unknown): its cost is then unknown. */
  unpriced: number;
}

export interface RunCounts {
  /** Tasks, containers left out. */
  tasks: number;
  /** Tasks per status: they sum to `tasks`. */
  byStatus: Record<TaskStatus, number>;
  containers: number;
  containersByStatus: Record<TaskStatus, number>;
  attempts: number;
  requests: number;
  retries: number;
  rateLimited: number;
  usage: Usage;
  /** USD over the tasks whose cost is known (to 1e-8); null when some is unknown and none that sent a request is known. */
  costUsd: number | null;
  /** Calls (or tasks) whose cost is unknown. */
  unpriced: number;
}

const statuses = (): Record<TaskStatus, number> => ({ pending: 0, queued: 0, running: 0, waiting: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0 });

/** A task the book has not heard of yet: pending, nothing spent. */
export function newTally(status: TaskStatus = 'pending'): TaskTally {
  return { status, container: false, attempts: 0, requests: 0, retries: 0, rateLimited: 0, usage: ZERO_USAGE, costUsd: 0, unpriced: 0 };
}

/**
 * The run's totals, kept as its tasks' tallies change: O(1) per change, so a progress line can
 * follow a 10,000-task stream event by event.
 *
 * @example
 * const book = new CountBook();
 * book.update('a', (t) => { t.status = 'running'; t.attempts += 1; });
 * book.counts.attempts; // 1
 */
export class CountBook {
  /** The totals now (updated in place). */
  readonly counts: RunCounts = {
    tasks: 0,
    byStatus: statuses(),
    containers: 0,
    containersByStatus: statuses(),
    attempts: 0,
    requests: 0,
    retries: 0,
    rateLimited: 0,
    usage: { ...ZERO_USAGE },
    costUsd: null,
    unpriced: 0,
  };
  private readonly tallies = new Map<string, TaskTally>();
  /** Cost of the tasks whose cost is known, in nano-dollars: integers add up exactly. */
  private knownNanos = 0;
  /** Tasks that sent a request and whose cost is known. */
  private knownSent = 0;
  /** Tasks whose cost is unknown. */
  private unknown = 0;

  get size(): number {
    return this.tallies.size;
  }

  has(id: string): boolean {
    return this.tallies.has(id);
  }

  /** A task's tally as the book has it (do not change it but through `update`). */
  get(id: string): Readonly<TaskTally> | undefined {
    return this.tallies.get(id);
  }

  ids(): IterableIterator<string> {
    return this.tallies.keys();
  }

  /** Changes one task's tally (a task not yet known starts pending); the totals follow. */
  update(id: string, change: (tally: TaskTally) => void): void {
    let tally = this.tallies.get(id);
    if (tally === undefined) this.tallies.set(id, (tally = newTally()));
    else this.apply(tally, -1);
    change(tally);
    this.apply(tally, 1);
  }

  /** A task leaves the count (one counted before it was known by its id). */
  remove(id: string): void {
    const tally = this.tallies.get(id);
    if (tally === undefined) return;
    this.apply(tally, -1);
    this.tallies.delete(id);
  }

  /** Sets one task's tally whole (a copy: the caller's object is not kept). */
  set(id: string, tally: TaskTally): void {
    const known = this.tallies.get(id);
    // As `update` does, without a closure per call: a result's counts set every task once.
    if (known === undefined) {
      const copy = Object.assign(newTally(), tally);
      this.tallies.set(id, copy);
      this.apply(copy, 1);
      return;
    }
    this.apply(known, -1);
    Object.assign(known, tally);
    this.apply(known, 1);
  }

  private apply(t: TaskTally, sign: 1 | -1): void {
    const c = this.counts;
    if (t.container) {
      c.containers += sign;
      c.containersByStatus[t.status] += sign;
      return;
    }
    c.tasks += sign;
    c.byStatus[t.status] += sign;
    c.attempts += sign * t.attempts;
    c.requests += sign * t.requests;
    c.retries += sign * t.retries;
    c.rateLimited += sign * t.rateLimited;
    c.usage.inputTokens += sign * t.usage.inputTokens;
    c.usage.outputTokens += sign * t.usage.outputTokens;
    c.usage.cacheReadTokens += sign * t.usage.cacheReadTokens;
    c.usage.cacheWriteTokens += sign * t.usage.cacheWriteTokens;
    c.unpriced += sign * t.unpriced;
    if (t.unpriced > 0) this.unknown += sign;
    else {
      if (t.requests > 0) this.knownSent += sign;
      this.knownNanos += sign * Math.round(t.costUsd * 1e9);
    }
    c.costUsd = this.unknown > 0 && this.knownSent === 0 ? null : Math.round(this.knownNanos / 10) / 1e8;
  }
}

/** One task's cost as the counts see it: its priced calls' (to 1e-8), or null when a call of it had no price. */
export function tallyCost(t: Readonly<TaskTally>): number | null {
  return t.unpriced > 0 ? null : Math.round(Math.round(t.costUsd * 1e9) / 10) / 1e8;
}

/** The counts of these tasks (by id): one book, filled once. */
export function countTasks(tallies: Iterable<readonly [string, TaskTally]>): RunCounts {
  const book = new CountBook();
  for (const [id, tally] of tallies) book.set(id, tally);
  return book.counts;
}
