/**
 * The run row's counters (`tasks_done`, `cost_usd`) as a batch changes them, written once per
 * transaction instead of once per task.
 *
 * Why: one statement per batch instead of one per task. (The run row held the plan until schema
 * version 2, and SQLite rewrote it whenever the row's size changed: one UPDATE per completed task
 * made the journal's cost grow with the plan's size. The plan and the result now have tables of
 * their own, sqliteSchema.ts.)
 *
 * What stays the same: the counters change in the same transaction as the task rows that change
 * them (they are applied after the batch's writes, before the transaction's own durable write and
 * its COMMIT), so a commit or a rollback takes both or neither, and the row ends up as the
 * statement-by-statement version left it (sums commute; `updated_at` is that of the batch's last write).
 */
import type { Stmt } from './sqliteSchema.js';

interface Change {
  done: number;
  usd: number;
  at: number;
  /** The place in the batch of the write that set `at`. */
  place: number;
}

export class RunCounters {
  private changes = new Map<string, Change>();
  private places = 0;

  constructor(private readonly st: { runAdd: Stmt }) {}

  /**
   * The place in the batch of a write that may count, taken when it is made: a completion that
   * joins its start (sqliteStarts.ts) is run at the start's place, but its `at` stays its own.
   */
  place(): number {
    return ++this.places;
  }

  /** A task of `runId` completed for the first time (or a priced call spent `usd`), at `at`, by the write at `place`. */
  add(runId: string, done: number, usd: number, at: number, place: number): void {
    const change = this.changes.get(runId);
    if (change === undefined) {
      this.changes.set(runId, { done, usd, at, place });
      return;
    }
    change.done += done;
    change.usd += usd;
    if (place > change.place) {
      change.at = at;
      change.place = place;
    }
  }

  /** Writes what the batch changed (inside its transaction). */
  apply(): void {
    if (this.changes.size === 0) return;
    for (const [runId, c] of this.changes) this.st.runAdd.run(c.done, c.usd, c.at, runId);
    this.changes.clear();
  }

  /** The batch was rolled back: so is what it counted. */
  reset(): void {
    this.changes.clear();
  }
}
