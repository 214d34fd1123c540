/**
 * The run's dependency graph: every task's record, its dependents and how many of its
 * dependencies are not yet completed. Wiring new tasks in (the plan's, a planner's sub-tasks, a
 * map's items), unlocking dependents when a task completes, skipping them when it fails. Each
 * costs O(the edges it touches): a completion is O(its dependents), a whole run's skips O(edges).
 *
 * Status changes are the run table's (through `GraphMoves`): the graph only says which.
 */
import { dedupeOutputs, outputValue } from '../mapReduce.js';
import type { TaskEvent } from './lifecycle.js';
import { newRecord, type SupervisedTask, type TaskRecord } from './types.js';

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
        if (parent.status !== 'completed') record.waitingOn += 1;
      }
    }
    for (const reviewer of added) {
      if (reviewer.spec.reviews === undefined || reviewer.status === 'completed') continue;
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
        if (leaf.status !== 'completed') waiting.waitingOn += 1;
      }
    }
  }

  /** Its sub-tasks that no sibling depends on become what the aggregator waits for (not yet wired). */
  collectFrom(record: TaskRecord, added: readonly TaskRecord[]): void {
    const depended = new Set(added.flatMap((r) => r.spec.deps));
    const leaves = added.filter((r) => !depended.has(r.spec.id));
    record.collect = leaves.map((r) => r.spec.id);
    record.subtasks = added.map((r) => r.spec.id);
    record.spec = { ...record.spec, deps: [...record.spec.deps, ...record.collect] };
  }

  /** The aggregator waits for what it collects (wired now: its sub-tasks are in the table). */
  waitForCollected(record: TaskRecord): void {
    for (const leaf of record.collect!) {
      const r = this.records.get(leaf)!;
      r.dependents.push(record);
      if (r.status !== 'completed') record.waitingOn += 1;
    }
  }

  /** Reduces over this map (without dedupe) wait for its items, not for the map: they stop depending on it. */
  detachReduces(map: TaskRecord): TaskRecord[] {
    if (map.spec.map?.dedupe !== undefined) return [];
    const detached: TaskRecord[] = [];
    map.dependents = map.dependents.filter((d) => {
      // A function reduce merges once, every input at hand: it waits for the map.
      const over = d.spec.kind === 'reduce' && d.spec.fn === undefined && !d.spec.reduce?.group && d.spec.reduce?.over === map.spec.id;
      if (!over || d.status !== 'pending') return true;
      if (map.status !== 'completed') d.waitingOn -= 1;
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

  /** A task completed: each dependent waits for one fewer; those waiting for none go to the ready queue (ids into `unlocked`). */
  unlockDependentsOf(record: TaskRecord, unlocked: string[] = []): string[] {
    for (const child of record.dependents) {
      child.waitingOn -= 1;
      if (child.waitingOn === 0 && child.status === 'pending') {
        this.moves.ready(child);
        unlocked.push(child.spec.id);
      }
    }
    return unlocked;
  }

  /** Every task downstream of a failed one is skipped, once each: O(edges) over the whole run. */
  skipDependentsOf(failed: TaskRecord): string[] {
    const skipped: string[] = [];
    const stack = [...failed.dependents];
    while (stack.length > 0) {
      const record = stack.pop()!;
      if (record.status !== 'pending') continue;
      record.error = { code: 'skipped', message: `skipped: depends on "${failed.spec.id}", which failed`, retryable: false };
      this.moves.move(record, 'SKIP');
      skipped.push(record.spec.id);
      for (const child of record.dependents) stack.push(child);
    }
    return skipped;
  }
}
