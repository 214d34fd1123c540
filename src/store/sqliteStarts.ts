/**
 * A task's start and its completion written as one pair of rows when both fall in one batch.
 *
 * Why: a task that starts and completes within one batch (an instant provider, a cache, any call
 * shorter than a batch) cost five statements: the start's two upserts, then the completion's
 * status read (to count it once) and its two upserts. Written at the start's place in the batch
 * they are two, the task row and the attempt row each written once with the values the five
 * left, and the batch holds one pending write per task instead of two.
 *
 * Why the result is the same: a batch commits or rolls back as a whole, so a crash leaves both
 * or neither, as before. The completion's effects move back to the start's place in the batch,
 * so a pair is only made when nothing else was written for that task in between (its extra, a
 * spend, a failure...). The batch tells this table of every write that joins it, with the task
 * it touches (sqliteWrites.ts: a batched write names its task), so any such write drops the
 * pending start, whichever store method made it, and the completion is then written on its own,
 * as before. The batch's end (commit or rollback, also a durable write's) empties the table: a
 * start committed earlier cannot be paired.
 */
import type { Stmt } from './sqliteSchema.js';
import type { BatchedWrite } from './sqliteWrites.js';

interface PairStatements {
  taskStart: Stmt;
  attemptStart: Stmt;
  taskStartComplete: Stmt;
  attemptStartComplete: Stmt;
}

/** One pending batched write: the start, and the completion once it joins it. */
export class StartWrite implements BatchedWrite {
  /** What a failure names: the completion, once it joined. */
  get doing(): string {
    return this.output === undefined ? 'record task start' : 'record task completion';
  }
  /** Set when the completion joined this write. */
  output: string | undefined;
  usageJson: string | null = null;
  costUsd: number | null = null;
  requests = 0;
  retries = 0;
  endedAt = 0;
  /** The completion's place among the batch's writes (sqliteCounters.ts). */
  place = 0;

  constructor(
    private readonly st: PairStatements,
    private readonly counters: { add(runId: string, done: number, usd: number, at: number, place: number): void },
    readonly runId: string,
    readonly taskId: string,
    readonly attempt: number,
    readonly route: string,
    readonly at: number,
  ) {}

  /** The task's completion joins its start. */
  complete(output: string, usageJson: string | null, costUsd: number | null, requests: number, retries: number, at: number, place: number): void {
    this.output = output;
    this.usageJson = usageJson;
    this.costUsd = costUsd;
    this.requests = requests;
    this.retries = retries;
    this.endedAt = at;
    this.place = place;
  }

  /** Run with the batch (a method, not a closure: one object per task start). */
  body(): void {
    if (this.output === undefined) {
      this.st.taskStart.run(this.runId, this.taskId, this.attempt, this.at);
      this.st.attemptStart.run(this.runId, this.taskId, this.attempt, this.route, this.at);
      return;
    }
    // Just started (status running), so this completion is the task's first: it counts.
    this.counters.add(this.runId, 1, 0, this.endedAt, this.place);
    this.st.taskStartComplete.run(this.runId, this.taskId, this.attempt, this.output, this.usageJson, this.costUsd, this.requests, this.retries, this.endedAt);
    this.st.attemptStartComplete.run(this.runId, this.taskId, this.attempt, this.route, this.at, this.endedAt, this.requests, this.usageJson, this.costUsd);
  }
}

/** The task starts pending in the current batch that nothing else for their task has followed. */
export class PendingStarts {
  /** Per run, then per task: no key string built per write. */
  private readonly byRun = new Map<string, Map<string, StartWrite>>();

  /**
   * Every write that joins the batch (sqliteWrites.ts `onWrite`): a start becomes pairable, any
   * other write for its task (or for its whole run) ends the pairing of the task's pending start.
   */
  wrote(write: BatchedWrite): void {
    if (write instanceof StartWrite) {
      let tasks = this.byRun.get(write.runId);
      if (tasks === undefined) this.byRun.set(write.runId, (tasks = new Map()));
      tasks.set(write.taskId, write);
    } else if (write.taskId === null) this.byRun.delete(write.runId);
    else this.byRun.get(write.runId)?.delete(write.taskId);
  }

  /** The pending start this completion can join (and no longer pairable), if there is one. */
  take(runId: string, taskId: string, attempt: number): StartWrite | undefined {
    const tasks = this.byRun.get(runId);
    const write = tasks?.get(taskId);
    if (write === undefined) return undefined;
    tasks!.delete(taskId);
    return write.attempt === attempt ? write : undefined;
  }

  /** The batch ended (committed or rolled back). */
  clear(): void {
    if (this.byRun.size > 0) this.byRun.clear();
  }
}
