/**
 * A run's events as async iterators (`for await (const event of run)`, `run.stream()`).
 *
 * The handle keeps the run's events in one log, whoever iterates, so an iterator made late (even
 * after the run ended) reads from the first; each iterator has its own cursor into it. The log
 * is a window: it drops its oldest events once it holds more than its bound, the default
 * (DEFAULT_MAX_BUFFERED) or the largest `maxBuffered` of the iterators reading it. A push never
 * waits for a reader: an iterator more than its `maxBuffered` events behind is cut off, and it
 * throws EventStreamOverflowError instead of skipping what it missed.
 *
 * Events are kept as the run sent them, with their time beside them: the stamped copy (`at`) is
 * made when an iterator reads one, so a run nobody iterates makes no copies.
 */

/** How many events a run keeps for its iterators, and how far behind one may fall, unless told. */
export const DEFAULT_MAX_BUFFERED = 100_000;

/** Options of `run.stream()`. */
export interface StreamOptions {
  /**
   * How many events this iterator may fall behind the run (events the run sent that it has not
   * read yet). Beyond that it is cut off and its next read throws EventStreamOverflowError:
   * events are never skipped silently. While it reads, the run's handle keeps at least this many
   * events. Default 100,000. The run sends some events in bursts (a task:queued for each task a
   * completion unlocks, in one step), so a small bound cuts off even a reader that keeps up.
   */
  maxBuffered?: number;
}

/**
 * An iterator over a run's events. `return()` (what `break` out of a `for await` calls) releases
 * it: it reads nothing more, and the run keeps nothing for it.
 */
export interface EventStream<E> extends AsyncIterableIterator<E> {
  next(): Promise<IteratorResult<E, undefined>>;
  return(): Promise<IteratorReturnResult<undefined>>;
}

/**
 * Thrown by an event iterator that cannot go on without skipping events: it fell more than its
 * `maxBuffered` behind the run, or it was made after the run's first events were dropped.
 */
export class EventStreamOverflowError extends Error {
  readonly code = 'EVENT_STREAM_OVERFLOW' as const;
  constructor(
    message: string,
    readonly runId: string,
    /** The iterator's bound. */
    readonly maxBuffered: number,
    /** How many events it had read before this. */
    readonly read: number,
  ) {
    super(message);
    this.name = 'EventStreamOverflowError';
  }
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

type Waiter<E> = { resolve(result: IteratorResult<E, undefined>): void; reject(error: unknown): void };

/** How a run ended, for its iterators: normally, or with the error its `result` rejects with. */
type Ending = { error?: unknown };

/** A run's event log; `E` is the event as sent, the iterators read `E & { at }`. */
export class EventLog<E extends object> {
  private readonly events: (E | undefined)[] = [];
  private readonly times: number[] = [];
  /** Index in `events` of the oldest event kept. */
  private head = 0;
  /** How many events were dropped from the front: the absolute index of the oldest kept. */
  private base = 0;
  private readonly keep: number;
  private readonly live = new Set<Reader<E>>();
  private ending: Ending | undefined;

  constructor(
    readonly runId: string,
    options: { keep?: number } = {},
  ) {
    this.keep = options.keep ?? DEFAULT_MAX_BUFFERED;
  }

  /** How many events the run has sent. */
  get sent(): number {
    return this.base + this.events.length - this.head;
  }

  /** How many events the log holds now. */
  get kept(): number {
    return this.events.length - this.head;
  }

  /** How many iterators are reading (made, not released, not ended, not cut off). */
  get readers(): number {
    return this.live.size;
  }

  /** One event of the run, at `at` on the swarm's clock. Never waits for a reader. */
  push(event: E, at: number): void {
    if (this.ending) return;
    this.events.push(event);
    this.times.push(at);
    if (this.live.size === 0) {
      while (this.kept > this.keep) this.dropOldest();
      return;
    }
    const sent = this.sent;
    let bound = this.keep;
    for (const reader of this.live) {
      if (reader.waiting()) reader.hand(this.stamped(sent - 1));
      else if (sent - reader.cursor > reader.maxBuffered) {
        reader.cutOff(this.behind(reader));
        continue;
      }
      if (reader.maxBuffered > bound) bound = reader.maxBuffered;
    }
    // Every live reader is at most its maxBuffered behind, so nothing it has yet to read is dropped.
    while (this.kept > bound) this.dropOldest();
  }

  /** The run ended: each iterator reads what is left, then is done. */
  end(): void {
    this.finish({});
  }

  /** The run ended with an error (it could not start, its journal failed): each iterator reads what is left, then throws it. */
  fail(error: unknown): void {
    this.finish({ error });
  }

  /** A new iterator from the run's first event (see StreamOptions). */
  stream(options: StreamOptions = {}): EventStream<E & { at: number }> {
    const maxBuffered = options.maxBuffered ?? DEFAULT_MAX_BUFFERED;
    if (typeof maxBuffered !== 'number' || !Number.isSafeInteger(maxBuffered) || maxBuffered < 1) {
      const shown = typeof maxBuffered === 'string' ? JSON.stringify(maxBuffered) : String(maxBuffered);
      throw new TypeError(`run.stream({ maxBuffered }) must be a positive integer (a count of events), got ${shown}`);
    }
    const reader = new Reader<E>(this, maxBuffered);
    if (this.base > 0) reader.cutOff(this.dropped(reader));
    else if (this.sent > maxBuffered) reader.cutOff(this.behind(reader));
    else if (!this.ending) this.live.add(reader);
    return reader;
  }

  /** @internal The event at absolute index `index`, stamped with its time. */
  stamped(index: number): E & { at: number } {
    const i = index - this.base + this.head;
    return { ...this.events[i]!, at: this.times[i]! };
  }

  /** @internal How the run ended, once it has. */
  get ended(): Ending | undefined {
    return this.ending;
  }

  /** @internal */
  release(reader: Reader<E>): void {
    this.live.delete(reader);
  }

  private finish(ending: Ending): void {
    if (this.ending) return;
    this.ending = ending;
    for (const reader of this.live) reader.ended(ending);
    this.live.clear();
  }

  private dropOldest(): void {
    this.events[this.head] = undefined;
    this.head++;
    this.base++;
    // Compacted now and then, not on every drop: each surviving event moves O(1) times on average.
    if (this.head >= 1024 && this.head * 2 >= this.events.length) {
      this.events.splice(0, this.head);
      this.times.splice(0, this.head);
      this.head = 0;
    }
  }

  private behind(reader: Reader<E>): EventStreamOverflowError {
    const { maxBuffered, cursor } = reader;
    return new EventStreamOverflowError(
      `run ${this.runId}: this event iterator fell more than ${maxBuffered} events behind the run after reading ${cursor}, and the events it had not read are not kept for it; read faster, or raise the bound: run.stream({ maxBuffered: n })`,
      this.runId,
      maxBuffered,
      cursor,
    );
  }

  private dropped(reader: Reader<E>): EventStreamOverflowError {
    return new EventStreamOverflowError(
      `run ${this.runId}: this event iterator was made after the run's first ${this.base} events were dropped (a run keeps its last ${this.keep} events for iterators made later); make it right after swarm.run(), with run.stream({ maxBuffered: n }) if it may fall more than ${this.keep} events behind`,
      this.runId,
      reader.maxBuffered,
      0,
    );
  }
}

/** One iterator: its cursor (the absolute index of the next event it reads) and its waiting reads. */
class Reader<E extends object> implements EventStream<E & { at: number }> {
  cursor = 0;
  private readonly waiters: Waiter<E & { at: number }>[] = [];
  /** Set once it can read nothing more from the log: released, cut off, or the run ended and it read everything. */
  private closed = false;
  /** What its next read throws (a cut-off, or the run's error), once. */
  private pendingError: { error: unknown } | undefined;

  constructor(
    private readonly log: EventLog<E>,
    readonly maxBuffered: number,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<E & { at: number }, undefined>> {
    if (this.pendingError) {
      const { error } = this.pendingError;
      this.pendingError = undefined;
      this.closed = true;
      return Promise.reject(error);
    }
    if (this.closed) return Promise.resolve(DONE);
    if (this.cursor < this.log.sent) return Promise.resolve({ done: false, value: this.log.stamped(this.cursor++) });
    const ending = this.log.ended;
    if (ending) {
      this.closed = true;
      return 'error' in ending ? Promise.reject(ending.error) : Promise.resolve(DONE);
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorReturnResult<undefined>> {
    this.closed = true;
    this.pendingError = undefined;
    this.log.release(this);
    for (const waiter of this.waiters.splice(0)) waiter.resolve(DONE);
    return Promise.resolve(DONE);
  }

  /** @internal Whether a read waits for the next event (it has read every event so far). */
  waiting(): boolean {
    return this.waiters.length > 0;
  }

  /** @internal The next event, to the oldest waiting read. */
  hand(event: E & { at: number }): void {
    this.cursor++;
    this.waiters.shift()!.resolve({ done: false, value: event });
  }

  /** @internal It fell too far behind: its next read throws. */
  cutOff(error: EventStreamOverflowError): void {
    this.pendingError = { error };
    this.log.release(this);
  }

  /** @internal The run ended: reads waiting get the end (it had read everything). */
  ended(ending: Ending): void {
    const waiters = this.waiters.splice(0);
    if (waiters.length === 0) return;
    this.closed = true;
    const [first, ...rest] = waiters;
    if ('error' in ending) first!.reject(ending.error);
    else first!.resolve(DONE);
    for (const waiter of rest) waiter.resolve(DONE);
  }
}

/** What a run's handle gets from its log: `stream()` and `for await`. */
export function iterationOf<E extends object>(log: EventLog<E>): { stream(options?: StreamOptions): EventStream<E & { at: number }>; [Symbol.asyncIterator](): EventStream<E & { at: number }> } {
  return { stream: (options) => log.stream(options), [Symbol.asyncIterator]: () => log.stream() };
}
