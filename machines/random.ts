/**
 * A seeded random source that lives in machine context as a plain number, so machines stay pure
 * and replayable: `next(state)` returns a value in [0, 1) and the state to keep.
 * (mulberry32: small, fast, good enough for jitter; not for cryptography.)
 */
export function nextRandom(state: number): [value: number, nextState: number] {
  const s = (state + 0x6d2b79f5) | 0;
  let t = s;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  const value = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  return [value, s];
}

/** A stable 32-bit seed from a string and a base seed (FNV-1a), e.g. per task attempt. */
export function deriveSeed(base: number, label: string): number {
  let h = (0x811c9dc5 ^ base) >>> 0;
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h | 0;
}

/**
 * Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^retry)], and never
 * sooner than `floorMs` (a server's Retry-After).
 */
export function backoffDelay(retry: number, random: number, opts: { baseMs: number; maxMs: number; floorMs?: number }): number {
  const ceiling = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.min(retry, 30));
  const jittered = Math.floor(random * ceiling);
  return Math.max(jittered, Math.ceil(opts.floorMs ?? 0));
}

/** A stateful stream over nextRandom, for code outside the machines (plans, tests, benchmarks). */
export function randomStream(seed: number): () => number {
  let state = seed;
  return () => {
    const [value, next] = nextRandom(state);
    state = next;
    return value;
  };
}
