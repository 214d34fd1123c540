/**
 * What both stores share, so `SqliteStore` and `MemoryStore` agree to the byte: how an opaque
 * value is stored (JSON, undefined as null; read back by rows.ts), and the rule for taking a run's lock from its holder
 * (a holder that stopped heart-beating, or that ran on this host and whose process is gone, has
 * lost the lock).
 */
import { hostname } from 'node:os';

/** This machine's name, read once (it is compared on every contested acquire). */
export const HOST = hostname();

/** True when a process with this pid exists here (EPERM: it exists, it is just not ours). */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

export interface HeldLock {
  owner: string;
  pid: number;
  host: string;
  acquiredAt: number;
  heartbeatAt: number;
}

/** Whether `owner` may take the lock `held` at time `now`. */
export function mayTake(held: HeldLock, ownerId: string, now: number, staleMs: number): boolean {
  if (held.owner === ownerId) return true;
  if (now - held.heartbeatAt > staleMs) return true;
  return held.host === HOST && !pidAlive(held.pid);
}

/** An opaque value as stored: JSON, or null for undefined. */
export function toJson(value: unknown): string | null {
  return value === undefined ? null : (JSON.stringify(value) ?? null);
}

/** The kinds whose task, once it has rows made under it, is a container: counted apart, never as a task. */
export const CONTAINER_KINDS = ['map', 'reduce'] as const;

/**
 * A run's summary with its containers left out of its tasks (`tasksTotal`, `tasksDone`), as the
 * result's totals, `show` and the report count them: a map or reduce that made rows under it.
 * `containers` holds each one's status.
 */
export function withoutContainers<S extends { tasksTotal: number; tasksDone: number }>(summary: S, containers: readonly string[]): S {
  if (containers.length === 0) return summary;
  const done = containers.filter((status) => status === 'completed').length;
  return { ...summary, tasksTotal: Math.max(0, summary.tasksTotal - containers.length), tasksDone: Math.max(0, summary.tasksDone - done) };
}
