/**
 * The supervisor's bookkeeping for one run: every task's state, the ready queue and the
 * dependency counts. Pure logic with no I/O, mutable on purpose: the supervisor keeps one
 * instance in its context by reference, so handling an event costs O(its own work), never a copy
 * of a 10,000-entry table.
 *
 * This class is the face the supervisor uses; the parts are beside it: the lifecycle (which
 * status changes exist, lifecycle.ts), the graph (graph.ts), the ready queue (queue.ts), a
 * resume (restore.ts) and the result (results.ts).
 */
import type { AttemptReport, ErrorInfo, RunStatus, SkipCause, TaskStatus, Usage } from '../protocol.js';
import { verdictOf } from '../review.js';
import { TaskStates, type TaskEvent } from './lifecycle.js';
import { completedBy, failedBy, TaskGraph, type Flow, type GraphMoves } from './graph.js';
import { ReadyQueue } from './queue.js';
import { restoreGraph, type RunRestore } from './restore.js';
import { rejectedCode, resultOf, SpendTally, type RunResult } from './results.js';
import { isAggregator, type Feedback, type ReviewOutcome, type Settlement, type SupervisedTask, type TaskRecord } from './types.js';

const rejectedOutput = (report: AttemptReport) => (report.status === 'failed' && report.output !== undefined ? rejectedCode(report.error) : undefined);

export class RunTable {
  private readonly states = new TaskStates();
  private readonly queue: ReadyQueue;
  private readonly graph: TaskGraph;
  private readonly spend = new SpendTally();

  /** Task ids that were ready at the start, in no particular order. */
  readonly initiallyReady: string[] = [];
  /** Tasks found skipped at the start: on a resume, a dependency had failed or been skipped before the crash, or a condition is false. */
  readonly initiallySkipped: string[] = [];

  /**
   * @param restore what an earlier life of the run had done (a resume): tasks keep their
   *   statuses, outputs and counters, planners their sub-tasks, reviews their rounds; whatever
   *   had not finished starts again from pending.
   */
  constructor(tasks: readonly SupervisedTask[], modelCaps: Readonly<Record<string, number>> = {}, restore?: RunRestore) {
    this.queue = new ReadyQueue(modelCaps);
    // Made once: the graph calls these on every unlock and skip.
    const moves: GraphMoves = {
      added: (count) => this.states.added(count),
      move: (record, event) => this.move(record, event),
      ready: (record) => this.enqueue(record, 'READY'),
    };
    this.graph = new TaskGraph(moves);
    if (restore) {
      const { ready, skipped } = restoreGraph(this.graph, moves, tasks, restore);
      this.initiallyReady.push(...ready);
      this.initiallySkipped.push(...skipped);
      return;
    }
    const flow: Flow = { unlocked: this.initiallyReady, skipped: this.initiallySkipped };
    for (const record of this.graph.link(tasks)) {
      if (record.waitingOn === 0 && record.status === 'pending') this.graph.openOrSkip(record, flow);
    }
  }

  /** Tasks per status. */
  get counts(): Readonly<Record<TaskStatus, number>> { return this.states.counts; }

  get size(): number { return this.graph.size; }

  /** Tasks without a final status. */
  get openTasks(): number { return this.states.openTasks; }

  get readyCount(): number { return this.queue.size; }

  /** The next ready task is a map or reduce (it needs no agent slot). */
  get aggregateReady(): boolean {
    const next = this.queue.peek();
    return next !== undefined && isAggregator(next.spec);
  }

  spec(id: string): SupervisedTask { return this.graph.record(id).spec; }

  status(id: string): TaskStatus { return this.graph.record(id).status; }

  /** A task's output once it completed (a failed task's rejected answer is not one). */
  output(id: string): string | undefined { return this.graph.get(id)?.status === 'completed' ? this.graph.get(id)!.output : undefined; }

  /**
   * A dep's output for a prompt ('' before it has one, and for a join's dep that did not
   * complete): one function for the run, not a closure per dispatch.
   */
  readonly outputText = (id: string): string => this.output(id) ?? '';

  /** A join's deps that did not complete (their `{{id}}` reads nothing, no `<dep>` block is added); undefined for any other task. */
  absentDeps(spec: SupervisedTask): ReadonlySet<string> | undefined {
    if (spec.after !== 'any') return undefined;
    const absent = spec.deps.filter((d) => this.graph.get(d)?.status !== 'completed');
    return absent.length > 0 ? new Set(absent) : undefined;
  }

  /** Why a skipped task was skipped: the cause, and the reason in words. */
  skipOf(id: string): { cause: SkipCause; reason: string } {
    return this.graph.record(id).skip ?? { cause: 'dependency', reason: 'a task it depends on did not complete' };
  }

  /**
   * A task's counters over all its attempts so far (every life of the run): what the events that
   * end an attempt carry, for the journal to keep.
   */
  countersOf(id: string): { requests: number; retries: number; taskUsage: Usage } {
    const r = this.graph.record(id);
    return { requests: r.requests, retries: r.retries, taskUsage: r.usage };
  }

  /** The same counters read in place (no object per call): read them at once, they change with the task. */
  countersNow(id: string): Readonly<{ requests: number; retries: number; usage: Usage }> { return this.graph.record(id); }

  /** Whether an aggregator (map, reduce) has expanded: it is ready again only once its sub-tasks are done. */
  expanded(id: string): boolean { return this.graph.record(id).collect !== undefined; }

  /** The sub-tasks a task made (a planner's, a map's items), if it made any. */
  subtasksOf(id: string): readonly string[] | undefined { return this.graph.get(id)?.subtasks; }

  /** A completed map's items whose outputs it kept (after `dedupe`). */
  keptOf(id: string): readonly string[] | undefined { return this.graph.get(id)?.kept; }

  /** Takes the best ready task (whose model has a free slot) and marks it running with a new attempt. */
  startNext(): { spec: SupervisedTask; attempt: number; retriesLeft: number; feedback?: Feedback } | undefined {
    const record = this.queue.next();
    if (!record) return undefined;
    this.move(record, 'START');
    record.attempts += 1;
    const next = { spec: record.spec, attempt: record.attempts, retriesLeft: Math.max(0, record.spec.maxRetries - record.retriesCounted) };
    return record.feedback ? { ...next, feedback: record.feedback } : next;
  }

  /** An agent was started for the task's attempt in flight (`task:started`): an attempt it reports. */
  agentStarted(id: string): void { this.graph.record(id).started += 1; }

  /** Cache-aware fan-out holds back a task just started: it is queued again, outside the heap. */
  hold(id: string): void {
    const record = this.graph.record(id);
    if (record.status !== 'running') return;
    record.attempts -= 1;
    this.queue.hold(record);
    this.move(record, 'REQUEUE');
  }

  /** A task just started goes back to the ready queue, in its old place (it found no slot). */
  requeue(id: string): void {
    const record = this.graph.record(id);
    if (record.status !== 'running') return;
    record.attempts -= 1;
    this.move(record, 'REQUEUE');
    this.queue.putBack(record);
  }

  /** Held tasks go back to the ready queue (in their old FIFO place). */
  release(ids: readonly string[]): void {
    for (const record of ids.map((id) => this.graph.get(id))) if (record) this.queue.release(record);
  }

  /**
   * A planner's output became sub-tasks: they join the run (ready ones queued), the planner
   * completes, and whatever depended on the planner now also waits for the sub-tasks that
   * nothing else in the plan depends on (its leaves), whose outputs it then reads.
   */
  expand(plannerId: string, attempt: number, subtasks: readonly SupervisedTask[]): Settlement {
    const planner = this.current(plannerId, attempt);
    if (!planner) return { kind: 'stale' };
    const added = this.graph.link(subtasks);
    this.graph.waitForLeaves(planner, added);
    planner.subtasks = added.map((r) => r.spec.id);
    delete planner.feedback;
    const flow: Flow = { unlocked: [], skipped: [] };
    for (const record of added) {
      if (record.waitingOn === 0 && record.status === 'pending') this.graph.openOrSkip(record, flow);
    }
    this.move(planner, 'COMPLETE');
    return completedBy(this.graph.unlockDependentsOf(planner, flow));
  }

  /**
   * An aggregator (map, reduce) expanded: its sub-tasks join the run and it waits for those that
   * no other sub-task depends on (a map's items, a reduce tree's root), pending again. A reduce
   * over a map that has no `dedupe` stops waiting for the map: its groups wait for the items.
   */
  expandInPlace(id: string, attempt: number, subtasks: readonly SupervisedTask[]): Settlement {
    const record = this.current(id, attempt);
    if (!record) return { kind: 'stale' };
    const added = this.graph.link(subtasks);
    this.graph.collectFrom(record, added);
    this.graph.waitForCollected(record);
    this.move(record, 'WAIT');
    const unlocked: string[] = [];
    const ready = [...added, ...(record.spec.kind === 'map' ? this.graph.detachReduces(record) : [])];
    if (record.waitingOn === 0) ready.push(record);
    for (const r of ready) {
      if (r.waitingOn === 0 && r.status === 'pending') {
        this.enqueue(r, 'READY');
        unlocked.push(r.spec.id);
      }
    }
    return { kind: 'expanded', unlocked };
  }

  /**
   * An expanded aggregator whose sub-tasks are done completes: a map with the JSON array of its
   * items' outputs (duplicates dropped), a reduce with its root's output.
   */
  completeAggregate(id: string, attempt: number): { settlement: Settlement; output: string; dropped?: number; items?: number } {
    const record = this.current(id, attempt);
    if (!record || !record.collect) return { settlement: { kind: 'stale' }, output: '' };
    const output = this.graph.collected(record);
    const dropped = record.spec.kind === 'map' && record.spec.map?.dedupe !== undefined ? record.dropped : undefined;
    record.output = output;
    delete record.error;
    this.move(record, 'COMPLETE');
    const settlement = completedBy(this.graph.unlockDependentsOf(record));
    return dropped === undefined ? { settlement, output } : { settlement, output, dropped, items: record.collect.length };
  }

  /** A planner's output was not a valid plan: a failed attempt (retried with the problems as feedback). */
  rejectPlan(plannerId: string, attempt: number, error: ErrorInfo, issues: string[], opts: { retry: boolean }): Settlement {
    const planner = this.current(plannerId, attempt);
    if (!planner) return { kind: 'stale' };
    planner.error = error;
    if (opts.retry && error.retryable && planner.retriesCounted < planner.spec.maxRetries) {
      planner.retries += 1;
      planner.retriesCounted += 1;
      planner.feedback = { kind: 'plan', issues };
      this.enqueue(planner, 'RETRY');
      return { kind: 'retry' };
    }
    this.move(planner, 'FAIL');
    return failedBy(this.graph.skipDependentsOf(planner));
  }

  /**
   * Records an attempt's end. A completed task unlocks its dependents; a failed one is retried
   * while its error is retryable and its budget lasts, otherwise its dependents are skipped.
   */
  settle(report: AttemptReport, opts: { retry: boolean }): Settlement {
    const record = this.current(report.taskId, report.attempt);
    if (!record) return { kind: 'stale' };
    this.spend.tally(record, report);
    if (report.status === 'completed') {
      if (record.spec.kind === 'plan') {
        // Kept for the planner's dependents and the result; the planner completes once it is expanded.
        record.output = report.output ?? '';
        return { kind: 'plan', output: record.output };
      }
      if (record.spec.kind === 'review') return this.review(record, report.output ?? '', opts.retry);
      record.output = report.output ?? '';
      delete record.error;
      delete record.feedback;
      this.move(record, 'COMPLETE');
      return completedBy(this.graph.unlockDependentsOf(record));
    }
    if (report.error) record.error = report.error;
    const rejected = rejectedOutput(report);
    // Kept for inspection (the result shows a failed task's last answer when it was rejected).
    if (rejected) record.output = report.output ?? '';
    if (report.status === 'cancelled') {
      this.move(record, 'CANCEL');
      return { kind: 'cancelled' };
    }
    const retryable = report.error?.retryable === true && record.retriesCounted < record.spec.maxRetries;
    if (opts.retry && retryable) {
      record.retries += 1;
      record.retriesCounted += 1;
      if (rejected) record.feedback = { kind: 'output', code: rejected, draft: report.output ?? '', problems: report.error?.problems ?? [report.error?.message ?? ''] };
      this.enqueue(record, 'RETRY');
      return { kind: 'retry' };
    }
    record.transcript = report.messages;
    this.move(record, 'FAIL');
    return failedBy(this.graph.skipDependentsOf(record));
  }

  /**
   * A reviewer's verdict. Approval, or the last round, completes the review (and unlocks what
   * waited for it); findings before the last round send the reviewed task back with them, and
   * the reviewer waits for the new draft.
   */
  private review(record: TaskRecord, output: string, mayRevise: boolean): Settlement {
    record.rounds += 1;
    record.output = output;
    const maxRounds = record.spec.maxRounds ?? 2;
    const target = this.graph.get(record.spec.reviews ?? '');
    const { verdict, findings } = verdictOf(output);
    // A run that is stopping sends nothing back: the verdict is recorded, the draft stands.
    const final = verdict === 'approve' || record.rounds >= maxRounds || target?.status !== 'completed' || !mayRevise;
    const outcome: ReviewOutcome = { target: target?.spec.id ?? '', round: record.rounds, maxRounds, verdict, final };
    if (findings !== undefined) outcome.findings = findings;
    if (final) {
      record.approved = verdict === 'approve';
      delete record.error;
      this.move(record, 'COMPLETE');
      return completedBy(this.graph.unlockDependentsOf(record), outcome);
    }
    this.sendBack(record, target!, maxRounds, findings ?? '');
    return { kind: 'revise', review: outcome };
  }

  /**
   * Back to the drawing board: the reviewer (or approval) waits for the new draft, and so does
   * whatever depended on the draft (it was held back by the reviewer all along).
   */
  private sendBack(record: TaskRecord, target: TaskRecord, maxRounds: number, findings: string): void {
    this.move(record, 'WAIT');
    target.rounds += 1;
    target.feedback = { kind: 'review', round: record.rounds, maxRounds, draft: target.output ?? '', findings };
    this.move(target, 'REVISE');
    for (const child of target.dependents) if (child.status === 'pending') child.waitingOn += 1;
    this.enqueue(target, 'READY');
  }

  /** An approval task started: it waits for a person (no agent, no slot, no model cap). */
  awaitDecision(id: string, attempt: number): boolean {
    const record = this.current(id, attempt);
    if (!record) return false;
    this.move(record, 'AWAIT');
    return true;
  }

  /**
   * A decision on a waiting approval. Approval completes it (an edited output first replaces the
   * approved task's); a rejection with a note and a round left sends the draft back with the
   * note, as a reviewer's findings do; any other rejection fails it (dependents skipped).
   */
  decide(id: string, decision: { approved: boolean; note?: string; output?: string; by?: string }, mayRevise: boolean): Settlement {
    const record = this.graph.get(id);
    if (!record || record.status !== 'waiting') return { kind: 'stale' };
    record.rounds += 1;
    const maxRounds = record.spec.maxRounds ?? 2;
    const target = this.graph.get(record.spec.reviews ?? '');
    if (decision.output !== undefined && target) target.output = decision.output;
    record.output = JSON.stringify(decision.note === undefined ? { approved: decision.approved } : { approved: decision.approved, note: decision.note });
    const revise = !decision.approved && decision.note !== undefined && decision.by !== 'timeout' && record.rounds < maxRounds && target?.status === 'completed' && mayRevise;
    const outcome: ReviewOutcome = { target: target?.spec.id ?? '', round: record.rounds, maxRounds, verdict: decision.approved ? 'approve' : 'revise', final: !revise };
    if (decision.note !== undefined) outcome.findings = decision.note;
    record.approved = decision.approved;
    if (decision.approved) {
      delete record.error;
      this.move(record, 'APPROVE');
      return completedBy(this.graph.unlockDependentsOf(record), outcome);
    }
    if (revise) {
      this.sendBack(record, target!, maxRounds, decision.note!);
      return { kind: 'revise', review: outcome };
    }
    record.error = { code: 'rejected', message: decision.note === undefined ? 'rejected' : `rejected: ${decision.note}`, retryable: false };
    this.move(record, 'REJECT');
    return failedBy(this.graph.skipDependentsOf(record));
  }

  /** Marks every task that has not started cancelled (queued first, then pending). */
  cancelNotStarted(): string[] {
    const out: string[] = [];
    for (const record of this.queue.drain(this.graph.records.values())) {
      this.move(record, 'CANCEL');
      out.push(record.spec.id);
    }
    for (const record of this.graph.records.values()) {
      if (record.status === 'pending' || record.status === 'waiting') {
        this.move(record, 'CANCEL');
        out.push(record.spec.id);
      }
    }
    return out;
  }

  /** Builds the result once, at the end: O(tasks). */
  result(runId: string, status: RunStatus, durationMs: number): RunResult { return resultOf({ runId, status, durationMs }, this.graph.records.values(), this.spend); }

  /** A summary for inspectors and logs, instead of the whole table. */
  toJSON(): { tasks: number; counts: Record<TaskStatus, number>; ready: number } {
    return { tasks: this.graph.size, counts: { ...this.states.counts }, ready: this.queue.size };
  }

  /** Rounds of a review or approval so far; attempts started; the last error. */
  roundsOf = (id: string): number => this.graph.record(id).rounds;
  attemptsOf = (id: string): number => this.graph.record(id).attempts;
  errorOf = (id: string): ErrorInfo | undefined => this.graph.record(id).error;

  /** The task's record if `attempt` is its attempt in flight; undefined for a stale report. */
  private current(id: string, attempt: number): TaskRecord | undefined {
    const record = this.graph.get(id);
    return record && record.status === 'running' && record.attempts === attempt ? record : undefined;
  }

  /** A task became ready (READY) or failed with a retry left (RETRY): to the back of its place in the queue. */
  private enqueue(record: TaskRecord, event: 'READY' | 'RETRY'): void {
    this.move(record, event);
    this.queue.add(record);
  }

  /** Every status change: checked against the lifecycle table; a move in or out of `running` takes or frees its model's slot. */
  private move(record: TaskRecord, event: TaskEvent): void {
    const from = this.states.move(record, event);
    if (record.status === 'running') this.queue.started(record);
    else if (from === 'running') this.queue.stopped(record);
  }
}
