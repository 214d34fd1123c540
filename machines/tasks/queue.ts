/**
 * The ready queue: tasks that may start, best first, with the per-model caps on tasks running at
 * once and the tasks cache-aware fan-out holds back. Every task in here is `queued`; the run
 * table moves the statuses, this keeps the order. Push and pop are O(log n).
 *
 * Ready order: higher priority first, then the longer remaining critical path, then FIFO. Maps
 * and reduces that are ready go before all: they take no slot, and what they expand into may be
 * urgent.
 */
import { Heap } from '../heap.js';
import { isAggregator, type TaskRecord } from './types.js';

const before = (a: TaskRecord, b: TaskRecord) =>
  isAggregator(a.spec) !== isAggregator(b.spec)
    ? isAggregator(a.spec)
    : a.spec.priority !== b.spec.priority
      ? a.spec.priority > b.spec.priority
      : a.spec.rank !== b.spec.rank
        ? a.spec.rank > b.spec.rank
        : a.readySeq < b.readySeq;

export class ReadyQueue {
  private readonly heap = new Heap<TaskRecord>(before);
  private seq = 0;
  /** Per-model caps on tasks running at once (the plan's model names). */
  private readonly caps: Map<string, number>;
  private readonly runningByModel = new Map<string, number>();
  /** Ready tasks set aside because their model was at its cap, best first. */
  private readonly parked = new Map<string, Heap<TaskRecord>>();

  constructor(modelCaps: Readonly<Record<string, number>>) {
    this.caps = new Map(Object.entries(modelCaps));
  }

  get size(): number {
    return this.heap.size;
  }

  peek(): TaskRecord | undefined {
    return this.heap.peek();
  }

  /** A task just became ready: behind every task that was ready before it (at equal priority and rank). */
  add(record: TaskRecord): void {
    record.readySeq = this.seq++;
    this.heap.push(record);
  }

  /** A task goes back in its old place (its start was undone, or it was held). */
  putBack(record: TaskRecord): void {
    this.heap.push(record);
  }

  /** The best ready task whose model has a free slot; one whose model is at its cap waits aside (in the order it came out). */
  next(): TaskRecord | undefined {
    let record = this.heap.pop();
    while (record && this.atCap(record.spec.modelName)) {
      const model = record.spec.modelName;
      const parked = this.parked.get(model) ?? this.parked.set(model, new Heap<TaskRecord>(before)).get(model)!;
      parked.push(record);
      record = this.heap.pop();
    }
    return record;
  }

  /** A task entered `running`: it takes a slot of its model (counted only for a model with a cap: nothing else reads it). */
  started(record: TaskRecord): void {
    const model = record.spec.modelName;
    if (!this.caps.has(model)) return;
    this.runningByModel.set(model, (this.runningByModel.get(model) ?? 0) + 1);
  }

  /** A task left `running`: a slot of its model is free, and the best task that waited for one goes back to the queue. */
  stopped(record: TaskRecord): void {
    const model = record.spec.modelName;
    if (!this.caps.has(model)) return;
    this.runningByModel.set(model, this.runningByModel.get(model)! - 1);
    const next = this.parked.get(model)?.pop();
    if (next) this.heap.push(next);
  }

  /** Cache-aware fan-out holds a task back: queued, but neither in the heap nor parked, until released. */
  hold(record: TaskRecord): void {
    record.held = true;
  }

  /** A held task goes back to the queue in its old FIFO place (if it is still queued). */
  release(record: TaskRecord): void {
    if (!record.held) return;
    record.held = false;
    if (record.status === 'queued') this.heap.push(record);
  }

  /** Empties the queue: every task that is queued and not started (in the heap, then parked, then held). */
  drain(records: Iterable<TaskRecord>): TaskRecord[] {
    const parked = [...this.parked.values()].flatMap((heap) => heap.drain());
    this.parked.clear();
    const held: TaskRecord[] = [];
    for (const r of records) if (r.held && r.status === 'queued') held.push(r);
    const out = [...this.heap.drain(), ...parked, ...held];
    for (const record of out) record.held = false;
    return out;
  }

  private atCap(model: string): boolean {
    const cap = this.caps.get(model);
    return cap !== undefined && (this.runningByModel.get(model) ?? 0) >= cap;
  }
}
