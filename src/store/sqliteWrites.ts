/**
 * The write side of `SqliteStore`: batches, durable-now writes, and waiting for a write lock that
 * another process holds. Apart from the store's statements so each file reads on its own.
 *
 * A batch is not an open transaction: batched writes are kept in order (closures over their bound
 * values) and run together in one `BEGIN IMMEDIATE` ... `COMMIT` when the batch commits (the
 * `setImmediate` armed by its first write, a durable-now write, `flush()`, a read, or
 * BATCH_MAX_WRITES pending). So the
 * write lock is held for the statements only, never while the run works between two writes, and
 * several processes can share the file. A lock held by another process is waited for (busy.ts):
 * a durable write blocks, within a limit; a batch committing by itself tries again on a timer.
 */
import { sqliteCodeOf, type SqlDatabase } from './driver.js';
import { backoffMs, isBusy, retryBusy } from './busy.js';
import type { Stmt } from './sqliteSchema.js';
import { StoreError } from './types.js';

/** A SQLite error's code (`SQLITE_FULL`...) from either driver, or what else failed (`EACCES`), for the message. */
export function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return sqliteCodeOf(error) ?? (typeof code === 'string' ? code : 'internal');
}

/** The error's own words, short: SQLite's messages describe the failure, never the data bound. */
export function reasonOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/**
 * A batch commits by itself once this many writes are pending, without waiting for the next
 * macrotask: a run whose calls all settle in microtasks (an instant provider, a cache) would
 * otherwise keep its whole journal pending until it ends, which loses that much in a crash and
 * keeps every pending write alive for the garbage collector to walk.
 */
export const BATCH_MAX_WRITES = 512;

/** One batched write, and the task it touches (null: the run as a whole). */
export interface BatchedWrite {
  readonly doing: string;
  readonly runId: string;
  readonly taskId: string | null;
  body(): void;
}

export interface WriteOptions {
  path: string;
  readOnly: boolean;
  busyLimitMs: number;
  onError: ((error: StoreError) => void) | undefined;
  /** The run counters the batch's writes changed: written after them, in the same transaction. */
  counters?: { apply(): void; reset(): void };
  /** The batch's writes were run (then committed) or dropped: what was pending is no longer. */
  onBatchEnd?: () => void;
  /** A write joins the batch (told before it is kept: keeping it may commit a full batch). */
  onWrite?: (write: BatchedWrite) => void;
}

export class SqliteWrites {
  /** Batched writes not yet run: each runs, in order, inside the next write transaction. */
  private pending: BatchedWrite[] = [];
  /** The commit armed by the first write of a batch. */
  private timer: NodeJS.Immediate | null = null;
  /** The next try of a commit that found the write lock held by another process. */
  private retry: NodeJS.Timeout | null = null;
  private busySince: number | null = null;
  /** A full batch found the write lock held: it waits for the armed commit. */
  private fullWaits = false;
  private busyTries = 0;
  /** Set by the first failed write; every later write throws it. */
  private failed: StoreError | null = null;
  private closed = false;
  private readonly path: string;
  private readonly readOnly: boolean;
  private readonly busyLimitMs: number;
  private readonly onError: ((error: StoreError) => void) | undefined;
  private readonly counters: WriteOptions['counters'];
  private readonly onBatchEnd: (() => void) | undefined;
  private readonly onWrite: WriteOptions['onWrite'];

  constructor(
    private readonly db: SqlDatabase,
    private readonly st: { begin: Stmt; commit: Stmt },
    options: WriteOptions,
  ) {
    this.path = options.path;
    this.readOnly = options.readOnly;
    this.busyLimitMs = options.busyLimitMs;
    this.onError = options.onError;
    this.counters = options.counters;
    this.onBatchEnd = options.onBatchEnd;
    this.onWrite = options.onWrite;
  }

  flush(): void {
    this.usable();
    if (this.pending.length > 0) this.transact(undefined, undefined, true);
  }

  close(): void {
    if (this.closed) return;
    try {
      if (this.failed === null && this.pending.length > 0) this.transact(undefined, undefined, true);
    } catch {
      // Poisoned and rolled back by transact: what was committed before stays.
    } finally {
      this.closed = true;
      this.clearTimers();
      if (this.db.inTransaction) this.rollbackQuietly();
      this.db.close();
    }
  }

  /**
   * A batched write of `taskId` (null: of the run as a whole): kept in order and run with the
   * batch, in one short transaction. Every batched write names its task, so what is pending per
   * task (sqliteStarts.ts) is known from the batch itself.
   */
  batched(doing: string, runId: string, taskId: string | null, body: () => void): void {
    this.add({ doing, runId, taskId, body });
  }

  /** A batched write as an object of its own (its `body` called as its method). */
  add(write: BatchedWrite): void {
    this.usable();
    this.onWrite?.(write);
    this.pending.push(write);
    if (this.timer === null && this.retry === null) this.timer = setImmediate(this.autoCommit);
    else if (this.pending.length >= BATCH_MAX_WRITES && this.retry === null && !this.fullWaits) this.commitFull();
  }

  /** A durable-now write: the pending batch and then `body`, committed together before this returns. */
  durable<T>(doing: string, body: () => T): T {
    this.usable();
    return this.transact(doing, body, true) as T;
  }

  /**
   * One write transaction: BEGIN IMMEDIATE (waiting for the write lock when `wait`, within
   * BUSY_LIMIT_MS), the pending writes in order, then `body`, COMMIT. Any failure rolls all of it
   * back and poisons the store; without `wait`, a busy lock is thrown as SQLite's own error and
   * nothing changes (the caller tries again later).
   */
  private transact<T>(doing: string | undefined, body: (() => T) | undefined, wait: boolean): T | undefined {
    try {
      if (wait) retryBusy(() => this.st.begin.run(), this.busyLimitMs);
      else this.st.begin.run();
    } catch (error) {
      if (!wait && isBusy(error)) throw error;
      throw this.poison(error, doing ?? this.pending[0]?.doing ?? 'commit', true);
    }
    let step = doing ?? 'commit';
    try {
      for (const write of this.pending) {
        step = write.doing;
        write.body();
      }
      this.pending = [];
      this.onBatchEnd?.();
      step = 'record run counters';
      this.counters?.apply();
      step = doing ?? 'commit';
      let value: T | undefined;
      let refused: StoreError | undefined;
      try {
        value = body?.();
      } catch (error) {
        // A refusal of ours (the run exists) wrote nothing: what was pending still commits.
        if (!(error instanceof StoreError && error.sqliteCode === 'exists')) throw error;
        refused = error;
      }
      this.st.commit.run();
      this.clearTimers();
      if (refused) throw refused;
      return value;
    } catch (error) {
      if (error instanceof StoreError && error.sqliteCode === 'exists') throw error;
      throw this.poison(error, step, false);
    }
  }

  read<T>(body: () => T): T {
    if (this.closed) throw this.closedError();
    // Reads see this store's own writes: what is pending is committed first.
    if (this.pending.length > 0 && this.failed === null) {
      try {
        this.transact(undefined, undefined, true);
      } catch (error) {
        // Nobody on this stack writes: the owner hears of it as of a failed batch. The read goes on
        // over what was committed.
        this.onError?.(error as StoreError);
      }
    }
    return body();
  }

  /** Commits the batch on the next macrotask; while another process holds the lock, again later (with backoff). */
  private readonly autoCommit = (): void => {
    this.timer = null;
    this.retry = null;
    if (this.closed || this.failed !== null || this.pending.length === 0) return;
    try {
      this.transact(undefined, undefined, false);
      this.busySince = null;
    } catch (error) {
      if (error instanceof StoreError) {
        this.onError?.(error);
        return;
      }
      // Busy: wait without blocking this process, up to the limit, then fail as a synchronous write would.
      const now = Date.now();
      this.busySince ??= now;
      if (now - this.busySince < this.busyLimitMs) {
        this.retry = setTimeout(this.autoCommit, backoffMs(this.busyTries++));
        return;
      }
      this.onError?.(this.poison(error, this.pending[0]?.doing ?? 'commit', true));
    }
  };

  /** A full batch commits now, as the armed commit would (which stays armed while the lock is busy). */
  private commitFull(): void {
    try {
      this.transact(undefined, undefined, false);
    } catch (error) {
      if (error instanceof StoreError) this.onError?.(error);
      // Busy: the armed commit tries again on the next macrotask, and waits from there; until a
      // commit succeeds, later writes do not try (each try can block for SQLite's busy timeout).
      else this.fullWaits = true;
    }
  }

  private clearTimers(): void {
    if (this.timer !== null) clearImmediate(this.timer);
    if (this.retry !== null) clearTimeout(this.retry);
    this.timer = null;
    this.retry = null;
    this.busySince = null;
    this.busyTries = 0;
    this.fullWaits = false;
  }

  /** Throws when the store cannot take writes: read-only, closed, or failed before. */
  private usable(): void {
    if (this.closed) throw this.closedError();
    if (this.readOnly) {
      throw new StoreError(`run journal ${this.path}: opened read-only (for a listing): it takes no writes`, this.path, 'read-only');
    }
    if (this.failed !== null) throw this.failed;
  }

  private closedError(): StoreError {
    return new StoreError(`run journal ${this.path}: the store is closed`, this.path, 'closed');
  }

  /** Rolls the batch back, remembers the failure and returns it (the same error from now on). */
  private poison(error: unknown, doing: string, waited: boolean): StoreError {
    this.clearTimers();
    this.pending = [];
    this.onBatchEnd?.();
    this.counters?.reset();
    if (this.db.inTransaction) this.rollbackQuietly();
    if (this.failed !== null) return this.failed;
    const code = codeOf(error);
    const why = waited && isBusy(error) ? `other processes held the journal's write lock for ${this.busyLimitMs / 1000} s` : reasonOf(error);
    this.failed = new StoreError(
      `run journal ${this.path}: ${doing} failed: ${code} (${why}); ` +
        'the uncommitted batch was rolled back and the store takes no more writes until it is reopened',
      this.path,
      code,
    );
    return this.failed;
  }

  private rollbackQuietly(): void {
    try {
      this.db.exec('ROLLBACK');
    } catch {
      // SQLite may have rolled back by itself (SQLITE_FULL, SQLITE_IOERR): nothing is left to undo.
    }
  }
}
