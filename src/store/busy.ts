/**
 * SQLITE_BUSY: another connection (another run sharing the journal file) holds the write lock.
 * That is contention, never a broken disk, so the store waits and tries again, within limits.
 *
 * Why a loop of our own on top of SQLite's busy timeout: SQLite's busy handler polls with
 * sleeps of up to 100 ms, and two other processes that take the lock in turn can keep it busy
 * at every poll for longer than any single timeout. Trying again with a fresh timeout until a
 * deadline bounds the wait by time, not by luck.
 */
import { sqliteCodeOf } from './driver.js';

/** SQLite's own wait for the write lock, per try (`busy_timeout`). Short: the deadline below bounds the whole wait. */
export const BUSY_TIMEOUT_MS = 250;

/** How long a write waits in all for the write lock before it fails with SQLITE_BUSY. */
export const BUSY_LIMIT_MS = 60_000;

/** True for SQLITE_BUSY and its extended codes (SQLITE_BUSY_RECOVERY, SQLITE_BUSY_SNAPSHOT...). */
export function isBusy(error: unknown): boolean {
  return sqliteCodeOf(error)?.startsWith('SQLITE_BUSY') === true;
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/** Blocks this thread for `ms` (the store is synchronous: its caller waits either way). */
function sleepSync(ms: number): void {
  Atomics.wait(pause, 0, 0, ms);
}

/** The wait before try `n` (from 0): doubling from 10 ms up to 500 ms, with jitter so waiters spread out. */
export function backoffMs(n: number): number {
  const cap = Math.min(500, 10 * 2 ** Math.min(n, 10));
  return cap / 2 + Math.random() * (cap / 2);
}

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, or until `limitMs` has passed (then
 * the last busy error is thrown). `attempt` must leave nothing half-done when it throws.
 */
export function retryBusy<T>(attempt: () => T, limitMs = BUSY_LIMIT_MS, now: () => number = Date.now): T {
  const deadline = now() + limitMs;
  for (let n = 0; ; n++) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error) || now() >= deadline) throw error;
      sleepSync(Math.min(backoffMs(n), Math.max(0, deadline - now())));
    }
  }
}
