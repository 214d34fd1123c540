/**
 * The supervisor's bookkeeping for one run: every task's state, the ready queue and the
 * dependency counts. Pure logic with no I/O, mutable on purpose: the supervisor keeps one
 * instance in its context by reference, so handling an event costs O(its own work), never a copy
 * of a 10,000-entry table.
 *
 * Ready order: higher priority first, then the longer remaining critical path, then FIFO.
 */
import type { CallTarget } from './agent/index.js';
import type { Price } from './cost.js';
import { Heap } from './heap.js';
import type { ToolBusStats } from './toolBusBook.js';
import type { AttemptReport, ErrorInfo, Message, OutputCheckSpec, RunStatus, TaskStatus, Usage } from './protocol.js';
import { addUsage, ZERO_USAGE } from './protocol.js';
import { verdictOf } from './review.js';
import { dedupeOutputs, outputValue, type MapSpec, type ReduceSpec } from './mapReduce.js';

/** A task as the supervisor runs it: the plan's task, resolved (model, limits, defaults). */
export interface SupervisedTask {
  id: string;
  deps: string[];
  priority: number;
  /** Tasks on the longest chain from this one to the end of the DAG, itself included. */
  rank: number;
  /** The plan's name for the model (e.g. "fast"). */
  modelName: string;
  provider: string;
  /** The provider's model id. */
  model: string;
  maxTokens: number;
  system?: string;
  prompt: string;
  tools: string[];
  maxTurns: number;
  maxRetries: number;
  timeoutMs: number;
  /** Most input tokens one request may carry (context window less maxTokens, or the task's cap). */
  inputBudget?: number;
  /** The model's price, USD per million tokens (plan or built-in). */
  price?: Price;
  /** Its model's fallbacks, in order. */
  fallbacks?: CallTarget[];
  /** Weighted routes of its model: each attempt picks one (seeded). */
  routes?: (CallTarget & { weight: number })[];
  /** Estimated tokens of its tools' definitions, sent with every turn. */
  toolTokens?: number;
  /**
   * `plan`: its output is a list of sub-tasks that join the run. `review`: it reviews `reviews`.
   * `map`, `reduce`: aggregators (machines/mapReduce.ts), with `map` or `reduce` set.
   */
  kind?: 'plan' | 'review' | 'map' | 'reduce';
  map?: MapSpec;
  reduce?: ReduceSpec;
  /** The task a review task reviews (one of its deps). */
  reviews?: string;
  /** Reviews a review task makes at most (each but the last may send the work back). Default 2. */
  maxRounds?: number;
  /** 0 for the plan's own tasks; a planner's sub-tasks are one deeper. */
  depth?: number;
  /** The planner task that made this one. */
  parent?: string;
  /** Goes out through cache-aware fan-out (its route has explicit cache breakpoints). */
  cacheFanOut?: boolean;
  /** The shortest prefix its model caches (fan-out holds nothing back for shorter ones). Default 1024. */
  cacheMinTokens?: number;
  /** What each final answer is checked against: a structured output's schema, `accept`'s minChars and pattern. */
  output?: OutputCheckSpec;
  /** `accept.judge`: the model that scores an answer that passed its checks, its criteria and passing score. */
  judge?: CallTarget & { prompt: string; threshold: number };
}

/** A task as an earlier life of the run left it (see RunTable's `restore`). */
export interface RestoredTask {
  id: string;
  /** Anything unfinished (running, queued, cancelled) comes back pending. */
  status: 'pending' | 'completed' | 'failed' | 'skipped';
  attempts: number;
  retries: number;
  requests: number;
  usage: Usage;
  costUsd: number;
  output?: string;
  error?: ErrorInfo;
  /** Review task: reviews made. Reviewed task: times sent back. */
  rounds?: number;
  approved?: boolean;
  feedback?: Feedback;
}

/** What a resumed run starts from: its tasks' states and the sub-tasks its planners made, in order. */
export interface RunRestore {
  tasks: RestoredTask[];
  expansions: { planner: string; tasks: SupervisedTask[] }[];
}

/** Why a task runs again: a reviewer's findings, or the problems of a rejected plan. */
export type Feedback =
  | { kind: 'review'; round: number; maxRounds: number; draft: string; findings: string }
  | { kind: 'plan'; issues: string[] }
  /** The last answer failed its output schema or a quality gate (`invalid_output`, `rejected_output`). */
  | { kind: 'output'; code: 'invalid_output' | 'rejected_output'; draft: string; problems: string[] };

/** What a review task's verdict did. */
export interface ReviewOutcome {
  target: string;
  round: number;
  maxRounds: number;
  verdict: 'approve' | 'revise';
  findings?: string;
  /** No more rounds: the reviewer approved, or `maxRounds` reviews were made. */
  final: boolean;
}

export type FinalTaskStatus = 'completed' | 'failed' | 'skipped' | 'cancelled';

export interface TaskResult {
  id: string;
  status: FinalTaskStatus;
  /**
   * The answer's text; for a task with `output.schema`, the parsed value (src: `parsedOutput`).
   * A task that failed with `invalid_output` or `rejected_output` keeps its last answer here.
   */
  output?: unknown;
  error?: ErrorInfo;
  attempts: number;
  /** The plan's model name. */
  model: string;
  usage: Usage;
  requests: number;
  retries: number;
  /** The conversation of the last attempt, kept when the task failed. */
  transcript?: Message[];
  /** The fallback model that served it, when its own model's route was down or overloaded. */
  servedBy?: string;
  /** What its calls cost in USD; null when the model has no price. Filled in by the runtime. */
  costUsd?: number | null;
  /** A planner's sub-tasks, as they ran (`<planner>/<id>`). */
  subtasks?: string[];
  /** The planner task that made this one. */
  parent?: string;
  /** A review task: how many reviews it made, and whether the last one approved. */
  review?: { target: string; rounds: number; approved: boolean };
  /** A reviewed task: how many times a reviewer sent it back. */
  revisions?: number;
  /** A map with `dedupe`: item outputs dropped as duplicates (not in its output, not read by a reduce). */
  dropped?: number;
}

export interface RunTotals {
  tasks: number;
  completed: number;
  failed: number;
  skipped: number;
  cancelled: number;
  requests: number;
  retries: number;
  usage: Usage;
  durationMs: number;
  /** USD over the tasks with a known price; null when none has one. Filled in by the runtime. */
  costUsd?: number | null;
}

export interface RunResult {
  runId: string;
  status: RunStatus;
  tasks: Record<string, TaskResult>;
  totals: RunTotals;
  /** The tool bus's counters: requested, executed, deduplicated, cached, failed, timed out, per tool. */
  tools?: ToolBusStats;
  /** Per route (`<provider>/<model>`): calls, errors, latency percentiles and cost. */
  routes?: Record<string, RouteStats>;
}

export interface RouteStats {
  requests: number;
  errors: number;
  errorRate: number;
  p50Ms: number;
  p99Ms: number;
  /** USD of its priced calls. */
  costUsd: number;
}

interface TaskRecord {
  spec: SupervisedTask;
  status: TaskStatus;
  /** Dependencies not yet completed. */
  waitingOn: number;
  dependents: TaskRecord[];
  /** FIFO tie-break: when it became ready. */
  readySeq: number;
  attempts: number;
  retries: number;
  usage: Usage;
  requests: number;
  output?: string;
  error?: ErrorInfo;
  transcript?: Message[];
  servedBy?: string;
  costUsd: number;
  unpricedCalls: number;
  /** Review task: reviews made. Reviewed task: times sent back. */
  rounds: number;
  /** Why the next attempt runs again (findings, a rejected plan's problems). */
  feedback?: Feedback;
  approved?: boolean;
  subtasks?: string[];
  /** An aggregator that expanded: the sub-tasks it waits for and reads (a map's items, a reduce's root). */
  collect?: string[];
  /** A map that completed: the items whose outputs it kept (after `dedupe`), and how many it dropped. */
  kept?: string[];
  dropped?: number;
  /** Set aside by cache-aware fan-out (queued, but neither in the heap nor parked). */
  held: boolean;
}

/** What settling an attempt did to the run. */
export type Settlement =
  | { kind: 'completed'; unlocked: string[]; review?: ReviewOutcome }
  /** A planner's attempt produced its output: the task stays running until the output is expanded or rejected. */
  | { kind: 'plan'; output: string }
  /** A reviewer asked for changes: the reviewed task is queued again, the reviewer waits for it. */
  | { kind: 'revise'; review: ReviewOutcome }
  | { kind: 'retry' }
  /** An aggregator expanded into sub-tasks (`unlocked`: those ready now); it waits for them. */
  | { kind: 'expanded'; unlocked: string[] }
  | { kind: 'failed'; skipped: string[] }
  | { kind: 'cancelled' }
  | { kind: 'stale' };

const isAggregator = (spec: SupervisedTask) => spec.kind === 'map' || spec.kind === 'reduce';

/**
 * Ready order: higher priority first, then the longer critical path, then FIFO. Maps and reduces
 * that are ready go before all: they take no slot, and what they expand into may be urgent.
 */
const before = (a: TaskRecord, b: TaskRecord) =>
  isAggregator(a.spec) !== isAggregator(b.spec)
    ? isAggregator(a.spec)
    : a.spec.priority !== b.spec.priority
    ? a.spec.priority > b.spec.priority
    : a.spec.rank !== b.spec.rank
      ? a.spec.rank > b.spec.rank
      : a.readySeq < b.readySeq;

/** An answer that failed its checks: the code, when the report is one. */
const rejectedCode = (error: ErrorInfo | undefined) =>
  error?.code === 'invalid_output' || error?.code === 'rejected_output' ? error.code : undefined;
const rejectedOutput = (report: AttemptReport) => (report.status === 'failed' && report.output !== undefined ? rejectedCode(report.error) : undefined);

const isFinal = (s: TaskStatus) => s === 'completed' || s === 'failed' || s === 'skipped' || s === 'cancelled';

export class RunTable {
  private readonly records = new Map<string, TaskRecord>();
  private readonly ready = new Heap<TaskRecord>(before);
  private seq = 0;
  private open = 0;
  readonly counts: Record<TaskStatus, number> = { pending: 0, queued: 0, running: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0 };

  /** Task ids that were ready at the start, in no particular order. */
  readonly initiallyReady: string[] = [];

  /** Per route: every call's latency and outcome, summed up in the result. */
  private readonly routeCalls = new Map<string, { ms: number[]; errors: number; costUsd: number }>();

  /** Per-model caps on tasks running at once (the plan's model names). */
  private readonly caps: Map<string, number>;
  private readonly runningByModel = new Map<string, number>();
  /** Ready tasks set aside because their model was at its cap, best first. */
  private readonly parked = new Map<string, Heap<TaskRecord>>();

  /** Tasks found skipped while restoring (a dependency had failed before the crash). */
  readonly initiallySkipped: string[] = [];

  /**
   * @param restore what an earlier life of the run had done (a resume): tasks keep their
   *   statuses, outputs and counters, planners their sub-tasks, reviews their rounds; whatever
   *   had not finished starts again from pending.
   */
  constructor(tasks: readonly SupervisedTask[], modelCaps: Readonly<Record<string, number>> = {}, restore?: RunRestore) {
    this.caps = new Map(Object.entries(modelCaps));
    if (!restore) {
      for (const record of this.link(tasks)) {
        if (record.waitingOn === 0) {
          this.enqueue(record);
          this.initiallyReady.push(record.spec.id);
        }
      }
      return;
    }
    const all = this.create([...tasks, ...restore.expansions.flatMap((e) => e.tasks)]);
    for (const saved of restore.tasks) {
      const record = this.records.get(saved.id);
      if (record) this.apply(record, saved);
    }
    // An aggregator that had expanded waits for its sub-tasks again (whatever its status).
    for (const { planner, tasks: subtasks } of restore.expansions) {
      const record = this.records.get(planner);
      if (record && isAggregator(record.spec)) this.collectFrom(record, subtasks.map((t) => this.records.get(t.id)!));
    }
    this.wire(all);
    for (const record of all) {
      if (record.spec.kind !== 'map' || !record.collect) continue;
      this.detachReduces(record);
      // What a completed map kept is not journaled: its items' outputs give it again.
      if (record.status === 'completed' && record.spec.map?.dedupe !== undefined) this.dedupe(record);
    }
    for (const { planner, tasks: subtasks } of restore.expansions) {
      const record = this.records.get(planner);
      if (!record || record.status !== 'completed' || isAggregator(record.spec)) continue;
      record.subtasks = subtasks.map((t) => t.id);
      this.waitForLeaves(record, subtasks.map((t) => this.records.get(t.id)!));
    }
    for (const record of all) if (record.status === 'failed') this.initiallySkipped.push(...this.skipDependentsOf(record));
    for (const record of all) {
      if (record.status === 'pending' && record.waitingOn === 0) {
        this.enqueue(record);
        this.initiallyReady.push(record.spec.id);
      }
    }
  }

  /** A restored task's state (its record is still pending, fresh from `create`). */
  private apply(record: TaskRecord, saved: RestoredTask): void {
    record.attempts = saved.attempts;
    record.retries = saved.retries;
    record.requests = saved.requests;
    record.usage = saved.usage;
    record.costUsd = saved.costUsd;
    record.rounds = saved.rounds ?? 0;
    if (saved.approved !== undefined) record.approved = saved.approved;
    if (saved.feedback) record.feedback = saved.feedback;
    if (saved.output !== undefined) record.output = saved.output;
    if (saved.error) record.error = saved.error;
    if (saved.status !== 'pending') this.move(record, saved.status);
    else if (saved.retries > record.spec.maxRetries) {
      // Interrupted by crashes more often than its retries allow: it is not dispatched yet again.
      record.error = { code: 'internal', message: `task "${saved.id}" was in flight at ${saved.retries} crashes, more than its ${record.spec.maxRetries} retries allow`, retryable: false };
      this.move(record, 'failed');
    }
  }

  /** A task's counters over all its attempts so far. */
  countersOf(id: string): { requests: number; retries: number } {
    const r = this.record(id);
    return { requests: r.requests, retries: r.retries };
  }

  /**
   * Adds tasks to the table (pending) with their dependency edges; a dependency already completed
   * does not count. A review task also holds back every other dependent of the task it reviews,
   * so nothing reads a draft that may still change. Returns the new records.
   */
  private link(tasks: readonly SupervisedTask[]): TaskRecord[] {
    const added = this.create(tasks);
    this.wire(added);
    return added;
  }

  private create(tasks: readonly SupervisedTask[]): TaskRecord[] {
    const added: TaskRecord[] = [];
    for (const spec of tasks) {
      if (this.records.has(spec.id)) throw new Error(`duplicate task "${spec.id}"`);
      const record: TaskRecord = {
        spec,
        status: 'pending',
        waitingOn: 0,
        dependents: [],
        readySeq: 0,
        attempts: 0,
        retries: 0,
        usage: ZERO_USAGE,
        requests: 0,
        costUsd: 0,
        unpricedCalls: 0,
        rounds: 0,
        held: false,
      };
      this.records.set(spec.id, record);
      added.push(record);
    }
    this.counts.pending += added.length;
    this.open += added.length;
    return added;
  }

  private wire(added: readonly TaskRecord[]): void {
    for (const record of added) {
      for (const dep of record.spec.deps) {
        const parent = this.records.get(dep);
        if (!parent) throw new Error(`task "${record.spec.id}" depends on unknown task "${dep}"`);
        parent.dependents.push(record);
        if (parent.status !== 'completed') record.waitingOn += 1;
      }
    }
    for (const reviewer of added) {
      if (reviewer.spec.kind !== 'review' || reviewer.spec.reviews === undefined || reviewer.status === 'completed') continue;
      for (const other of this.records.get(reviewer.spec.reviews)?.dependents ?? []) {
        if (other === reviewer || other.status !== 'pending') continue;
        reviewer.dependents.push(other);
        other.waitingOn += 1;
      }
    }
  }

  /**
   * What depended on a planner also waits for its sub-tasks that no sibling depends on (the
   * leaves), and reads them; a leaf that is a review is read as the work it reviewed.
   */
  private waitForLeaves(planner: TaskRecord, added: readonly TaskRecord[]): void {
    const inPlan = new Set(added);
    const leaves = added.filter((r) => !r.dependents.some((d) => inPlan.has(d)));
    if (leaves.length === 0) return;
    const read = [...new Set(leaves.map((l) => (l.spec.kind === 'review' && l.spec.reviews !== undefined ? this.records.get(l.spec.reviews) ?? l : l)))];
    const waitOn = [...new Set([...leaves, ...read])];
    for (const waiting of planner.dependents) {
      if (waiting.status !== 'pending' || inPlan.has(waiting)) continue;
      waiting.spec = { ...waiting.spec, deps: [...waiting.spec.deps, ...read.map((r) => r.spec.id)] };
      for (const leaf of waitOn) {
        leaf.dependents.push(waiting);
        if (leaf.status !== 'completed') waiting.waitingOn += 1;
      }
    }
  }

  get size(): number {
    return this.records.size;
  }

  /** Tasks without a final status. */
  get openTasks(): number {
    return this.open;
  }

  get readyCount(): number {
    return this.ready.size;
  }

  /** The next ready task is a map or reduce (it needs no agent slot). */
  get aggregateReady(): boolean {
    const next = this.ready.peek();
    return next !== undefined && isAggregator(next.spec);
  }

  spec(id: string): SupervisedTask {
    return this.record(id).spec;
  }

  status(id: string): TaskStatus {
    return this.record(id).status;
  }

  output(id: string): string | undefined {
    return this.records.get(id)?.output;
  }

  /** Takes the best ready task and marks it running with a new attempt. */
  startNext(): { spec: SupervisedTask; attempt: number; retriesLeft: number; feedback?: Feedback } | undefined {
    let record = this.ready.pop();
    // A task whose model is at its cap waits aside (in the order it came out) for a free slot.
    while (record && this.atCap(record.spec.modelName)) {
      const model = record.spec.modelName;
      const parked = this.parked.get(model) ?? this.parked.set(model, new Heap<TaskRecord>(before)).get(model)!;
      parked.push(record);
      record = this.ready.pop();
    }
    if (!record) return undefined;
    this.move(record, 'running');
    record.attempts += 1;
    const next = { spec: record.spec, attempt: record.attempts, retriesLeft: Math.max(0, record.spec.maxRetries - record.retries) };
    return record.feedback ? { ...next, feedback: record.feedback } : next;
  }

  /** Cache-aware fan-out holds back a task just started: it is queued again, outside the heap. */
  hold(id: string): void {
    const record = this.record(id);
    if (record.status !== 'running') return;
    record.attempts -= 1;
    record.held = true;
    this.move(record, 'queued');
  }

  /** A task just started goes back to the ready queue, in its old place (it found no slot). */
  requeue(id: string): void {
    const record = this.record(id);
    if (record.status !== 'running') return;
    record.attempts -= 1;
    this.move(record, 'queued');
    this.ready.push(record);
  }

  /** Held tasks go back to the ready queue (in their old FIFO place). */
  release(ids: readonly string[]): void {
    for (const id of ids) {
      const record = this.records.get(id);
      if (!record || !record.held) continue;
      record.held = false;
      if (record.status === 'queued') this.ready.push(record);
    }
  }

  /**
   * A planner's output became sub-tasks: they join the run (ready ones queued), the planner
   * completes, and whatever depended on the planner now also waits for the sub-tasks that
   * nothing else in the plan depends on (its leaves), whose outputs it then reads.
   */
  expand(plannerId: string, attempt: number, subtasks: readonly SupervisedTask[]): Settlement {
    const planner = this.records.get(plannerId);
    if (!planner || planner.status !== 'running' || planner.attempts !== attempt) return { kind: 'stale' };
    const added = this.link(subtasks);
    this.waitForLeaves(planner, added);
    planner.subtasks = added.map((r) => r.spec.id);
    delete planner.feedback;
    const unlocked: string[] = [];
    for (const record of added) {
      if (record.waitingOn === 0) {
        this.enqueue(record);
        unlocked.push(record.spec.id);
      }
    }
    this.move(planner, 'completed');
    unlocked.push(...this.unlockDependentsOf(planner));
    return { kind: 'completed', unlocked };
  }

  /** Whether an aggregator (map, reduce) has expanded: it is ready again only once its sub-tasks are done. */
  expanded(id: string): boolean {
    return this.record(id).collect !== undefined;
  }

  /** The sub-tasks a task made (a planner's, a map's items), if it made any. */
  subtasksOf(id: string): readonly string[] | undefined {
    return this.records.get(id)?.subtasks;
  }

  /** A completed map's items whose outputs it kept (after `dedupe`). */
  keptOf(id: string): readonly string[] | undefined {
    return this.records.get(id)?.kept;
  }

  /**
   * An aggregator (map, reduce) expanded: its sub-tasks join the run and it waits for those that
   * no other sub-task depends on (a map's items, a reduce tree's root), pending again. A reduce
   * over a map that has no `dedupe` stops waiting for the map: its groups wait for the items.
   */
  expandInPlace(id: string, attempt: number, subtasks: readonly SupervisedTask[]): Settlement {
    const record = this.records.get(id);
    if (!record || record.status !== 'running' || record.attempts !== attempt) return { kind: 'stale' };
    const added = this.link(subtasks);
    this.collectFrom(record, added);
    for (const leaf of record.collect!) {
      const r = this.records.get(leaf)!;
      r.dependents.push(record);
      if (r.status !== 'completed') record.waitingOn += 1;
    }
    this.move(record, 'pending');
    const unlocked: string[] = [];
    const ready = [...added, ...(record.spec.kind === 'map' ? this.detachReduces(record) : [])];
    if (record.waitingOn === 0) ready.push(record);
    for (const r of ready) {
      if (r.waitingOn === 0 && r.status === 'pending') {
        this.enqueue(r);
        unlocked.push(r.spec.id);
      }
    }
    return { kind: 'expanded', unlocked };
  }

  /** Its sub-tasks that no sibling depends on become what the aggregator waits for (not yet wired). */
  private collectFrom(record: TaskRecord, added: readonly TaskRecord[]): void {
    const depended = new Set(added.flatMap((r) => r.spec.deps));
    const leaves = added.filter((r) => !depended.has(r.spec.id));
    record.collect = leaves.map((r) => r.spec.id);
    record.subtasks = added.map((r) => r.spec.id);
    record.spec = { ...record.spec, deps: [...record.spec.deps, ...record.collect] };
  }

  /** Reduces over this map (without dedupe) wait for its items, not for the map: they stop depending on it. */
  private detachReduces(map: TaskRecord): TaskRecord[] {
    if (map.spec.map?.dedupe !== undefined) return [];
    const detached: TaskRecord[] = [];
    map.dependents = map.dependents.filter((d) => {
      const over = d.spec.kind === 'reduce' && !d.spec.reduce?.group && d.spec.reduce?.over === map.spec.id;
      if (!over || d.status !== 'pending') return true;
      if (map.status !== 'completed') d.waitingOn -= 1;
      detached.push(d);
      return false;
    });
    return detached;
  }

  /**
   * An expanded aggregator whose sub-tasks are done completes: a map with the JSON array of its
   * items' outputs (duplicates dropped), a reduce with its root's output.
   */
  completeAggregate(id: string, attempt: number): { settlement: Settlement; output: string; dropped?: number; items?: number } {
    const record = this.records.get(id);
    if (!record || record.status !== 'running' || record.attempts !== attempt || !record.collect) return { settlement: { kind: 'stale' }, output: '' };
    const outputOf = (x: string) => this.records.get(x)?.output ?? '';
    let output: string;
    let dropped: number | undefined;
    if (record.spec.kind === 'map') {
      const kept = this.dedupe(record);
      if (record.spec.map?.dedupe !== undefined) dropped = record.dropped;
      output = JSON.stringify(kept.map((x) => outputValue(outputOf(x))));
    } else {
      output = record.collect.length === 1 ? outputOf(record.collect[0]!) : JSON.stringify(record.collect.map((x) => outputValue(outputOf(x))));
    }
    record.output = output;
    delete record.error;
    this.move(record, 'completed');
    const settlement: Settlement = { kind: 'completed', unlocked: this.unlockDependentsOf(record) };
    return dropped === undefined ? { settlement, output } : { settlement, output, dropped, items: record.collect.length };
  }

  /** The items of a map whose outputs it keeps (its `dedupe` applied), recorded with the count dropped. */
  private dedupe(record: TaskRecord): string[] {
    const { kept, dropped } = dedupeOutputs(record.collect!, (x) => this.records.get(x)?.output ?? '', record.spec.map?.dedupe);
    record.kept = kept;
    if (record.spec.map?.dedupe !== undefined) record.dropped = dropped;
    return kept;
  }

  /** A planner's output was not a valid plan: a failed attempt (retried with the problems as feedback). */
  rejectPlan(plannerId: string, attempt: number, error: ErrorInfo, issues: string[], opts: { retry: boolean }): Settlement {
    const planner = this.records.get(plannerId);
    if (!planner || planner.status !== 'running' || planner.attempts !== attempt) return { kind: 'stale' };
    planner.error = error;
    if (opts.retry && error.retryable && planner.retries < planner.spec.maxRetries) {
      planner.retries += 1;
      planner.feedback = { kind: 'plan', issues };
      this.enqueue(planner);
      return { kind: 'retry' };
    }
    this.move(planner, 'failed');
    return { kind: 'failed', skipped: this.skipDependentsOf(planner) };
  }

  private unlockDependentsOf(record: TaskRecord): string[] {
    const unlocked: string[] = [];
    for (const child of record.dependents) {
      child.waitingOn -= 1;
      if (child.waitingOn === 0 && child.status === 'pending') {
        this.enqueue(child);
        unlocked.push(child.spec.id);
      }
    }
    return unlocked;
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
    const target = this.records.get(record.spec.reviews ?? '');
    const { verdict, findings } = verdictOf(output);
    // A run that is stopping sends nothing back: the verdict is recorded, the draft stands.
    const final = verdict === 'approve' || record.rounds >= maxRounds || target?.status !== 'completed' || !mayRevise;
    const outcome: ReviewOutcome = { target: target?.spec.id ?? '', round: record.rounds, maxRounds, verdict, final };
    if (findings !== undefined) outcome.findings = findings;
    if (final) {
      record.approved = verdict === 'approve';
      delete record.error;
      this.move(record, 'completed');
      return { kind: 'completed', unlocked: this.unlockDependentsOf(record), review: outcome };
    }
    // Back to the drawing board: the reviewer waits for the new draft, and so does whatever
    // depended on the draft (it was held back by the reviewer all along).
    this.move(record, 'pending');
    target!.rounds += 1;
    target!.feedback = { kind: 'review', round: record.rounds, maxRounds, draft: target!.output ?? '', findings: findings ?? '' };
    this.move(target!, 'pending');
    for (const child of target!.dependents) if (child.status === 'pending') child.waitingOn += 1;
    this.enqueue(target!);
    return { kind: 'revise', review: outcome };
  }

  /**
   * Records an attempt's end. A completed task unlocks its dependents; a failed one is retried
   * while its error is retryable and its budget lasts, otherwise its dependents are skipped.
   */
  settle(report: AttemptReport, opts: { retry: boolean }): Settlement {
    const record = this.records.get(report.taskId);
    if (!record || record.status !== 'running' || report.attempt !== record.attempts) return { kind: 'stale' };
    record.usage = addUsage(record.usage, report.usage);
    for (const call of report.calls ?? []) {
      const r = this.routeCalls.get(call.route) ?? this.routeCalls.set(call.route, { ms: [], errors: 0, costUsd: 0 }).get(call.route)!;
      r.ms.push(call.ms);
      if (!call.ok) r.errors += 1;
      if (call.costUsd !== undefined) r.costUsd += call.costUsd;
    }
    if (report.costUsd !== undefined) record.costUsd += report.costUsd;
    if (report.unpricedCalls) record.unpricedCalls += report.unpricedCalls;
    record.requests += report.requests;
    record.retries += report.retries;
    // Only the last attempt's route counts: a retry on the task's own model clears it.
    if (report.servedBy !== undefined) record.servedBy = report.servedBy;
    else delete record.servedBy;
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
      this.move(record, 'completed');
      return { kind: 'completed', unlocked: this.unlockDependentsOf(record) };
    }
    if (report.error) record.error = report.error;
    const rejected = rejectedOutput(report);
    // Kept for inspection (the result shows a failed task's last answer when it was rejected).
    if (rejected) record.output = report.output ?? '';
    if (report.status === 'cancelled') {
      this.move(record, 'cancelled');
      return { kind: 'cancelled' };
    }
    const retryable = report.error?.retryable === true && record.retries < record.spec.maxRetries;
    if (opts.retry && retryable) {
      record.retries += 1;
      if (rejected) record.feedback = { kind: 'output', code: rejected, draft: report.output ?? '', problems: report.error?.problems ?? [report.error?.message ?? ''] };
      this.enqueue(record);
      return { kind: 'retry' };
    }
    record.transcript = report.messages;
    this.move(record, 'failed');
    return { kind: 'failed', skipped: this.skipDependentsOf(record) };
  }

  /** Marks every task that has not started cancelled (queued first, then pending). */
  cancelNotStarted(): string[] {
    const out: string[] = [];
    const parked = [...this.parked.values()].flatMap((heap) => heap.drain());
    this.parked.clear();
    const held = [...this.records.values()].filter((r) => r.held && r.status === 'queued');
    for (const record of [...this.ready.drain(), ...parked, ...held]) {
      record.held = false;
      this.move(record, 'cancelled');
      out.push(record.spec.id);
    }
    for (const record of this.records.values()) {
      if (record.status === 'pending') {
        this.move(record, 'cancelled');
        out.push(record.spec.id);
      }
    }
    return out;
  }

  /** Builds the result once, at the end: O(tasks). */
  result(runId: string, status: RunStatus, durationMs: number): RunResult {
    // Keyed by the plan's task ids: `__proto__` or `constructor` must be a task like any other.
    const tasks = Object.create(null) as Record<string, TaskResult>;
    const totals: RunTotals = {
      tasks: this.records.size,
      completed: this.counts.completed,
      failed: this.counts.failed,
      skipped: this.counts.skipped,
      cancelled: this.counts.cancelled,
      requests: 0,
      retries: 0,
      usage: ZERO_USAGE,
      durationMs,
    };
    for (const r of this.records.values()) {
      const status = isFinal(r.status) ? (r.status as FinalTaskStatus) : 'cancelled';
      const task: TaskResult = {
        id: r.spec.id,
        status,
        attempts: r.attempts,
        model: r.spec.modelName,
        usage: r.usage,
        requests: r.requests,
        retries: r.retries,
      };
      if (r.output !== undefined && (status === 'completed' || (status === 'failed' && rejectedCode(r.error)))) task.output = r.output;
      if (r.error !== undefined && status !== 'completed') task.error = r.error;
      if (r.transcript !== undefined && status === 'failed') task.transcript = r.transcript;
      if (r.servedBy !== undefined) task.servedBy = r.servedBy;
      if (r.subtasks) task.subtasks = r.subtasks;
      if (r.dropped !== undefined) task.dropped = r.dropped;
      if (r.spec.parent !== undefined) task.parent = r.spec.parent;
      if (r.spec.kind === 'review') task.review = { target: r.spec.reviews ?? '', rounds: r.rounds, approved: r.approved === true };
      else if (r.rounds > 0) task.revisions = r.rounds;
      // Known only when every call was priced (a partly unknown total would mislead).
      if (r.unpricedCalls === 0 && r.requests > 0) task.costUsd = Math.round(r.costUsd * 1e8) / 1e8;
      tasks[r.spec.id] = task;
      totals.requests += r.requests;
      totals.retries += r.retries;
      totals.usage = addUsage(totals.usage, r.usage);
    }
    const result: RunResult = { runId, status, tasks, totals };
    if (this.routeCalls.size > 0) {
      result.routes = {};
      for (const [route, r] of this.routeCalls) {
        const sorted = [...r.ms].sort((a, b) => a - b);
        const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
        result.routes[route] = {
          requests: sorted.length,
          errors: r.errors,
          errorRate: Math.round((r.errors / sorted.length) * 1e4) / 1e4,
          p50Ms: at(0.5),
          p99Ms: at(0.99),
          costUsd: Math.round(r.costUsd * 1e8) / 1e8,
        };
      }
    }
    return result;
  }

  /** A summary for inspectors and logs, instead of the whole table. */
  toJSON(): { tasks: number; counts: Record<TaskStatus, number>; ready: number } {
    return { tasks: this.records.size, counts: { ...this.counts }, ready: this.ready.size };
  }

  private record(id: string): TaskRecord {
    const r = this.records.get(id);
    if (!r) throw new Error(`unknown task "${id}"`);
    return r;
  }

  private enqueue(record: TaskRecord): void {
    record.readySeq = this.seq++;
    this.move(record, 'queued');
    this.ready.push(record);
  }

  private move(record: TaskRecord, to: TaskStatus): void {
    const from = record.status;
    this.counts[from] -= 1;
    this.counts[to] += 1;
    if (!isFinal(from) && isFinal(to)) this.open -= 1;
    else if (isFinal(from) && !isFinal(to)) this.open += 1; // a reviewed task sent back
    record.status = to;
    const model = record.spec.modelName;
    if (to === 'running') this.runningByModel.set(model, (this.runningByModel.get(model) ?? 0) + 1);
    if (from === 'running') {
      this.runningByModel.set(model, this.runningByModel.get(model)! - 1);
      // A slot of this model is free: the best task that waited for one goes back to the queue.
      const next = this.parked.get(model)?.pop();
      if (next) this.ready.push(next);
    }
  }

  private atCap(model: string): boolean {
    const cap = this.caps.get(model);
    return cap !== undefined && (this.runningByModel.get(model) ?? 0) >= cap;
  }

  /** Every task downstream of a failed one is skipped, once each: O(edges) over the whole run. */
  private skipDependentsOf(failed: TaskRecord): string[] {
    const skipped: string[] = [];
    const stack = [...failed.dependents];
    while (stack.length > 0) {
      const record = stack.pop()!;
      if (record.status !== 'pending') continue;
      record.error = { code: 'skipped', message: `skipped: depends on "${failed.spec.id}", which failed`, retryable: false };
      this.move(record, 'skipped');
      skipped.push(record.spec.id);
      for (const child of record.dependents) stack.push(child);
    }
    return skipped;
  }
}
