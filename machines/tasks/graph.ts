/**
 * The run's dependency graph: every task's record, its dependents and how many of its
 * dependencies have not ended yet. Wiring new tasks in (the plan's, a planner's sub-tasks, a
 * map's items), unlocking dependents when a task completes, skipping them when it fails or is
 * skipped. Each costs O(the edges it touches): a completion is O(its dependents), a whole run's
 * skips O(edges).
 *
 * Branches: a task that would become ready is first judged once (`open`): its `when` on its deps'
 * outputs (machines/when.ts), and for a join (`after: "any"`) whether one of its deps completed.
 * A task that fails it is skipped, and so is what depends on it, but a join: it waits for its
 * other deps to end.
 *
 * Status changes are the run table's (through `GraphMoves`): the graph only says which.
 */
import type { SkipCause } from '../protocol.js';
import { dedupeOutputs, outputValue } from '../mapReduce.js';
import { holds, whyFalse, type OutputOf } from '../when.js';
import { isFinal, type TaskEvent } from './lifecycle.js';
import { newRecord, type ReviewOutcome, type Settlement, type SupervisedTask, type TaskRecord } from './types.js';

/** What ending a task did to those waiting on it: the ids made ready and skipped, in order. */
export interface Flow {
  unlocked: string[];
  skipped: string[];
}

/** A completion's settlement: what it made ready, and what it skipped when anything (a false condition). */
export function completedBy(flow: Flow, review?: ReviewOutcome): Settlement {
  const settlement: Extract<Settlement, { kind: 'completed' }> = review ? { kind: 'completed', unlocked: flow.unlocked, review } : { kind: 'completed', unlocked: flow.unlocked };
  if (flow.skipped.length > 0) settlement.skipped = flow.skipped;
  return settlement;
}

/** A failure's settlement: what it skipped, and the joins it let run when any. */
export const failedBy = (flow: Flow): Settlement => (flow.unlocked.length > 0 ? { kind: 'failed', skipped: flow.skipped, unlocked: flow.unlocked } : { kind: 'failed', skipped: flow.skipped });

/** A join that has not been judged yet: it waits for its deps to end, not to complete. */
const joining = (r: TaskRecord) => r.spec.after === 'any' && r.opened === undefined;

/** Kinds whose output is JSON whatever their schema: a map's array of its items' outputs, a function step's value. */
const JSON_KINDS: ReadonlySet<string> = new Set(['map', 'fn']);

/** What a condition reads of a task: its output once it completed, parsed where it is structured (a schema, a JSON kind). */
function valueOf(r: TaskRecord): { value: unknown } | undefined {
  if (r.status !== 'completed') return undefined;
  const text = r.output ?? '';
  if (r.spec.output?.schema === undefined && !JSON_KINDS.has(r.spec.kind ?? 'task')) return { value: text };
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return { value: text };
  }
}

/** What the graph asks of the run table. */
export interface GraphMoves {
  /** New records joined (pending). */
  added(count: number): void;
  move(record: TaskRecord, event: TaskEvent): void;
  /** A pending task's dependencies are all complete: it goes to the ready queue. */
  ready(record: TaskRecord): void;
}

export class TaskGraph {
  readonly records = new Map<string, TaskRecord>();

  constructor(private readonly moves: GraphMoves) {}

  get size(): number {
    return this.records.size;
  }

  get(id: string): TaskRecord | undefined {
    return this.records.get(id);
  }

  /** The record of a task the caller knows exists (an unknown id is a bug, named). */
  record(id: string): TaskRecord {
    const r = this.records.get(id);
    if (!r) throw new Error(`unknown task "${id}"`);
    return r;
  }

  /**
   * Adds tasks to the table (pending) with their dependency edges; a dependency already completed
   * does not count. A review task also holds back every other dependent of the task it reviews,
   * so nothing reads a draft that may still change. Returns the new records.
   */
  link(tasks: readonly SupervisedTask[]): TaskRecord[] {
    const added = this.create(tasks);
    this.wire(added);
    return added;
  }

  /** New records, not yet wired (a restore wires them once every status is known). */
  create(tasks: readonly SupervisedTask[]): TaskRecord[] {
    const added: TaskRecord[] = [];
    for (const spec of tasks) {
      if (this.records.has(spec.id)) throw new Error(`duplicate task "${spec.id}"`);
      const record = newRecord(spec);
      this.records.set(spec.id, record);
      added.push(record);
    }
    this.moves.added(added.length);
    return added;
  }

  wire(added: readonly TaskRecord[]): void {
    for (const record of added) {
      for (const dep of record.spec.deps) {
        const parent = this.records.get(dep);
        if (!parent) throw new Error(`task "${record.spec.id}" depends on unknown task "${dep}"`);
        parent.dependents.push(record);
        // A dep that has ended already is not waited for (one that failed or was skipped skips it: see `flow`).
        if (!isFinal(parent.status)) record.waitingOn += 1;
      }
    }
    for (const reviewer of added) {
      if (reviewer.spec.reviews === undefined || isFinal(reviewer.status)) continue;
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
  waitForLeaves(planner: TaskRecord, added: readonly TaskRecord[]): void {
    const inPlan = new Set(added);
    const leaves = added.filter((r) => !r.dependents.some((d) => inPlan.has(d)));
    if (leaves.length === 0) return;
    const read = [...new Set(leaves.map((l) => (l.spec.reviews !== undefined ? this.records.get(l.spec.reviews) ?? l : l)))];
    const waitOn = [...new Set([...leaves, ...read])];
    for (const waiting of planner.dependents) {
      if (waiting.status !== 'pending' || inPlan.has(waiting)) continue;
      waiting.spec = { ...waiting.spec, deps: [...waiting.spec.deps, ...read.map((r) => r.spec.id)] };
      for (const leaf of waitOn) {
        leaf.dependents.push(waiting);
        if (!isFinal(leaf.status)) waiting.waitingOn += 1;
      }
    }
  }

  /** Its sub-tasks that no sibling depends on become what the aggregator waits for (not yet wired). */
  collectFrom(record: TaskRecord, added: readonly TaskRecord[]): void {
    const depended = new Set(added.flatMap((r) => r.spec.deps));
    const leaves = added.filter((r) => !depended.has(r.spec.id));
    record.collect = leaves.map((r) => r.spec.id);
    record.subtasks = added.map((r) => r.spec.id);
    // It was judged before it expanded: waiting for its sub-tasks is no join, nor a condition.
    record.opened = true;
    record.spec = { ...record.spec, deps: [...record.spec.deps, ...record.collect] };
  }

  /** The aggregator waits for what it collects (wired now: its sub-tasks are in the table). */
  waitForCollected(record: TaskRecord): void {
    for (const leaf of record.collect!) {
      const r = this.records.get(leaf)!;
      r.dependents.push(record);
      if (!isFinal(r.status)) record.waitingOn += 1;
    }
  }

  /**
   * Reduces over this map (without dedupe) wait for its items, not for the map: they stop depending
   * on it. Not one with a condition or a join: it is judged on its deps, the map among them.
   */
  detachReduces(map: TaskRecord): TaskRecord[] {
    if (map.spec.map?.dedupe !== undefined) return [];
    const detached: TaskRecord[] = [];
    map.dependents = map.dependents.filter((d) => {
      // A function reduce merges once, every input at hand: it waits for the map.
      const over = d.spec.kind === 'reduce' && d.spec.fn === undefined && !d.spec.reduce?.group && d.spec.reduce?.over === map.spec.id && d.spec.when === undefined && d.spec.after === undefined;
      if (!over || d.status !== 'pending') return true;
      if (!isFinal(map.status)) d.waitingOn -= 1;
      detached.push(d);
      return false;
    });
    return detached;
  }

  /**
   * What an expanded aggregator's sub-tasks give it: a map, the JSON array of its items' outputs
   * (duplicates dropped); a reduce, its root's output.
   */
  collected(record: TaskRecord): string {
    const outputOf = (x: string) => this.records.get(x)?.output ?? '';
    if (record.spec.kind === 'map') return JSON.stringify(this.dedupe(record).map((x) => outputValue(outputOf(x))));
    const collect = record.collect!;
    return collect.length === 1 ? outputOf(collect[0]!) : JSON.stringify(collect.map((x) => outputValue(outputOf(x))));
  }

  /** The items of a map whose outputs it keeps (its `dedupe` applied), recorded with the count dropped. */
  dedupe(record: TaskRecord): string[] {
    const { kept, dropped } = dedupeOutputs(record.collect!, (x) => this.records.get(x)?.output ?? '', record.spec.map?.dedupe);
    record.kept = kept;
    if (record.spec.map?.dedupe !== undefined) record.dropped = dropped;
    return kept;
  }

  /** The outputs a condition reads (one function for the graph, not a closure per task). */
  private readonly outputOf: OutputOf = (id) => {
    const r = this.records.get(id);
    return r ? valueOf(r) : undefined;
  };

  /**
   * A pending task waits for nothing more: judged the first time (a join needs a dep that
   * completed, a `when` must hold), it goes to the ready queue (true) or is skipped (false).
   */
  open(record: TaskRecord): boolean {
    if (record.opened === undefined) {
      if (record.spec.after === 'any' && !record.spec.deps.some((d) => this.records.get(d)?.status === 'completed')) {
        this.skip(record, 'dependency', `none of its deps completed (${this.endings(record.spec.deps)}); it joins them with after: "any"`);
        return false;
      }
      const when = record.spec.when;
      if (when !== undefined && !holds(when, this.outputOf)) {
        this.skip(record, 'condition', `its condition is false: ${whyFalse(when, this.outputOf)}`);
        return false;
      }
      record.opened = true;
    }
    this.moves.ready(record);
    return true;
  }

  /** `"a" failed, "b" was skipped` (at most 5 named). */
  private endings(ids: readonly string[]): string {
    const named = ids.slice(0, 5).map((id) => `"${id}" ${this.records.get(id)?.status === 'failed' ? 'failed' : 'was skipped'}`);
    return ids.length > 5 ? `${named.join(', ')} and ${ids.length - 5} more` : named.join(', ');
  }

  private skip(record: TaskRecord, cause: SkipCause, reason: string): void {
    record.error = { code: 'skipped', message: `skipped: ${reason}`, retryable: false };
    record.skip = { cause, reason };
    this.moves.move(record, 'SKIP');
  }

  /** A task completed: each dependent waits for one fewer; those waiting for none are opened (ids into `out`). */
  unlockDependentsOf(record: TaskRecord, out: Flow = { unlocked: [], skipped: [] }): Flow {
    for (const child of record.dependents) {
      child.waitingOn -= 1;
      if (child.waitingOn === 0 && child.status === 'pending') this.openOrSkip(child, out);
    }
    return out;
  }

  /**
   * A task ended without completing (failed, or skipped): what depends on it is skipped, once
   * each, but a join, which waits for its other deps to end. O(edges) over the whole run.
   * `counted`: its dependents count it among the deps they wait for (false for one restored
   * final: `wire` did not count it).
   */
  skipDependentsOf(ended: TaskRecord, out: Flow = { unlocked: [], skipped: [] }, counted = true): Flow {
    this.flow(ended, counted, out);
    return out;
  }

  /** Opens a task that waits for nothing more; one skipped takes what depends on it along (ids into `out`). */
  openOrSkip(record: TaskRecord, out: Flow): void {
    if (this.open(record)) {
      out.unlocked.push(record.spec.id);
      return;
    }
    out.skipped.push(record.spec.id);
    this.flow(record, true, out);
  }

  /** The skips that follow one task ending without completing, as a loop (a long chain would overflow the stack). */
  private flow(start: TaskRecord, counted: boolean, out: Flow): void {
    const stack: { from: TaskRecord; counted: boolean }[] = [{ from: start, counted }];
    while (stack.length > 0) {
      const { from, counted: edge } = stack.pop()!;
      for (const child of from.dependents) {
        if (child.status !== 'pending') continue;
        if (edge) child.waitingOn -= 1;
        if (joining(child)) {
          if (child.waitingOn > 0) continue;
          if (this.open(child)) {
            out.unlocked.push(child.spec.id);
            continue;
          }
        } else {
          this.skip(child, 'dependency', `depends on "${from.spec.id}", which ${from.status === 'failed' ? 'failed' : 'was skipped'}`);
        }
        out.skipped.push(child.spec.id);
        stack.push({ from: child, counted: true });
      }
    }
  }
}
