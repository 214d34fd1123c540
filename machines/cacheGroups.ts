/**
 * Cache-aware fan-out. Tasks whose requests share a byte-identical prefix (same route, tools and
 * system prompt: a shared brief) form a group. A cold group sends ONE task first, the leader, and
 * holds the others back; when the leader's response starts, the provider has written the prefix
 * to its cache and the held tasks go out to read it (0.1x the input price) instead of all writing
 * it at once (1.25x each). A group stays warm for the cache's lifetime after its last use.
 *
 * Pure bookkeeping, mutable and held by reference in the supervisor's context (O(1) per task).
 */

export type Admission = 'go' | 'lead' | 'hold';

interface Group {
  /** The task whose response will warm the cache, while it is in flight. */
  leader?: { taskId: string; attempt: number };
  /** The cache is readable until then (ms, the run's clock). */
  warmUntil: number;
  /** Task ids held back behind the leader, in the order they came. */
  held: string[];
}

export class CacheGroups {
  private readonly groups = new Map<string, Group>();
  /** Leader task id -> its group key. */
  private readonly leaders = new Map<string, string>();
  /** Tasks held back right now, across groups. */
  heldCount = 0;

  /** @param ttlMs how long a written prefix stays readable after its last use (Anthropic: 5 minutes). */
  constructor(private readonly ttlMs = 300_000) {}

  /** What to do with a task about to go out in group `key`: send it, send it as the leader, or hold it. */
  admit(key: string, taskId: string, attempt: number, now: number): Admission {
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = { warmUntil: 0, held: [] }));
    if (group.warmUntil > now) {
      // A read refreshes the entry's lifetime.
      group.warmUntil = now + this.ttlMs;
      return 'go';
    }
    if (group.leader) {
      group.held.push(taskId);
      this.heldCount += 1;
      return 'hold';
    }
    group.leader = { taskId, attempt };
    this.leaders.set(taskId, key);
    return 'lead';
  }

  /**
   * The leader's response started (`warm`), or its attempt ended (`warm` if it completed, so the
   * prefix was written). Returns the held task ids to send now; empty if `taskId` leads nothing.
   * A cold release lets the next dispatch pick a new leader among them.
   */
  release(taskId: string, attempt: number | undefined, warm: boolean, now: number): { key: string; released: string[] } | undefined {
    const key = this.leaders.get(taskId);
    if (key === undefined) return undefined;
    const group = this.groups.get(key)!;
    if (attempt !== undefined && group.leader?.attempt !== attempt) return undefined;
    this.leaders.delete(taskId);
    delete group.leader;
    if (warm) group.warmUntil = now + this.ttlMs;
    const released = group.held;
    group.held = [];
    this.heldCount -= released.length;
    return { key, released };
  }

  /** Drops every held task (the run is stopping); returns their ids. */
  drainHeld(): string[] {
    const out: string[] = [];
    for (const group of this.groups.values()) {
      out.push(...group.held);
      group.held = [];
    }
    this.heldCount = 0;
    return out;
  }
}

/** The shortest prefix worth holding tasks back for (Anthropic caches nothing shorter). */
export const MIN_CACHE_PREFIX_TOKENS = 1024;

/** A short stable name for a group's prefix (53-bit hash): route, tools and system prompt. */
export function cacheGroupKey(route: string, tools: readonly string[], system: string): string {
  const text = `${route}\u0000${tools.join('\u0001')}\u0000${system}`;
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}
