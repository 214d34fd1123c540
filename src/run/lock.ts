/**
 * One process runs a journaled run at a time: it takes the run's lock in the store before it
 * starts (or resumes, or retries) it, keeps it alive with a heartbeat, and gives it back at the
 * end. A lock whose holder stopped beating goes stale and the next resume takes it over.
 */
import type { LockOwner, RunSummary, Store } from '../store/index.js';

/** Another process is running (or resuming) this run. */
export class RunLockedError extends Error {
  readonly code = 'RUN_LOCKED';
  constructor(
    readonly runId: string,
    readonly holder: { pid: number; host: string; since: number },
  ) {
    super(`run ${runId} is already being run by process ${holder.pid} on ${holder.host} (since ${new Date(holder.since).toISOString()}); not starting it twice`);
    this.name = 'RunLockedError';
  }
}

/** Runs this process is running now (a lock it holds for any other run is stale). */
export const runningHere = new Set<string>();

/** How often a running run tells the store it is alive. */
const HEARTBEAT_MS = 10_000;

/** Takes the run's lock for this process, or says who holds it (RunLockedError). */
export function takeLock(durable: Store, runId: string, owner: LockOwner): void {
  if (runningHere.has(runId)) throw new RunLockedError(runId, { pid: process.pid, host: owner.host, since: Date.now() });
  let got = durable.acquireLock(runId, owner);
  // Held by this very process for a run it no longer runs (its journal broke before it could
  // let go): stale, take it over.
  if (!got.ok && got.holder.pid === process.pid && got.holder.host === owner.host && !runningHere.has(runId)) got = durable.acquireLock(runId, owner, -1);
  if (!got.ok) throw new RunLockedError(runId, got.holder);
}

/** Gives the lock back; a broken journal has none to give (the next resume takes it over: dead pid). */
export function releaseLock(durable: Store | undefined, runId: string, owner: LockOwner): void {
  try {
    durable?.releaseLock(runId, owner.id);
  } catch {
    // Nothing to give back through a journal that cannot be written.
  }
}

/**
 * Keeps the lock alive while the run goes on; `onLost` when another process took it over (this
 * one stalled past the stale limit), so the run never goes on in two places. Returns the stop.
 */
export function keepLock(durable: Store, runId: string, owner: LockOwner, onLost: () => void): () => void {
  const timer = setInterval(() => {
    try {
      if (!durable.heartbeat(runId, owner.id)) onLost();
    } catch {
      // A journal that fails stops the run through its next write.
    }
  }, HEARTBEAT_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** A run journaled as `running` whose lock no live process holds died (or never started): `interrupted`. */
export function withLiveness(store: Store, runs: RunSummary[]): RunSummary[] {
  return runs.map((r) => (r.status === 'running' && !runningHere.has(r.id) && !store.isHeld(r.id) ? { ...r, status: 'interrupted' as const } : r));
}
