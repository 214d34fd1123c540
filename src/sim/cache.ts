/**
 * Prompt caching. A cache entry is the identity of a prompt prefix (a hash chain over its pieces,
 * so a prefix costs O(its length) to name once). Entries are planned when a request arrives and
 * committed when its response starts, so a request sent before that first response has begun
 * does not read what it is writing. TTL counts from the commit and is refreshed by every read.
 *
 * Anthropic: entries sit at `cache_control` breakpoints; a read may hit any block boundary up to
 * 20 blocks before a breakpoint (the API's lookback). OpenAI: automatic for prompts of 1024
 * tokens or more, in 128-token steps of the prompt text.
 */
import { chain } from './hash.js';
import type { PromptUnit, SimUsage } from './types.js';

const LOOKBACK_BLOCKS = 20;
const OPENAI_MIN_TOKENS = 1024;
const OPENAI_STEP_TOKENS = 128;
const CHARS_PER_TOKEN = 4;
const ONE_HOUR_MS = 3_600_000;

/** What a request will read and write. */
export interface CachePlan {
  readTokens: number;
  writeTokens: number;
  write5mTokens: number;
  write1hTokens: number;
  /** The entry read (its TTL is refreshed when the request is admitted). */
  read?: { hash: string; ttlMs: number };
  /** Entries made readable when the response starts. */
  writes: { hash: string; ttlMs: number }[];
}

const NO_CACHE: CachePlan = { readTokens: 0, writeTokens: 0, write5mTokens: 0, write1hTokens: 0, writes: [] };

/** The entries: prefix hash -> expiry time. */
export class PromptCache {
  private readonly entries = new Map<string, number>();
  private commits = 0;

  constructor(
    readonly ttlMs: number,
    private readonly now: () => number,
    /** Anthropic's minimum cacheable prefix, in tokens. */
    private readonly minTokens = 0,
  ) {}

  has(hash: string): boolean {
    const expires = this.entries.get(hash);
    if (expires === undefined) return false;
    if (expires > this.now()) return true;
    this.entries.delete(hash);
    return false;
  }

  /** Makes entries readable (or extends them) from now on. */
  commit(entries: readonly { hash: string; ttlMs: number }[]): void {
    const now = this.now();
    for (const { hash, ttlMs } of entries) {
      this.entries.set(hash, Math.max(this.entries.get(hash) ?? 0, now + ttlMs));
    }
    // Expired entries are dropped lazily by has(); sweep now and then so memory stays bounded.
    if (++this.commits % 1000 === 0) for (const [hash, expires] of this.entries) if (expires <= now) this.entries.delete(hash);
  }

  ttlOf(kind: '5m' | '1h' | undefined): number {
    return kind === '1h' ? Math.max(ONE_HOUR_MS, this.ttlMs) : this.ttlMs;
  }

  /** Anthropic: read the longest cached prefix near a breakpoint, write every later breakpoint. */
  planAnthropic(namespace: string, units: readonly PromptUnit[]): CachePlan {
    const breakpoints: number[] = [];
    units.forEach((unit, i) => unit.breakpointTtl && breakpoints.push(i));
    if (breakpoints.length === 0) return NO_CACHE;
    const last = breakpoints[breakpoints.length - 1]!;
    const hashes: string[] = [];
    const cumulative: number[] = [];
    let hash = namespace;
    let tokens = 0;
    for (let i = 0; i <= last; i++) {
      hash = chain(hash, units[i]!.text);
      tokens += units[i]!.tokens;
      hashes.push(hash);
      cumulative.push(tokens);
    }

    let readAt = -1;
    for (let b = breakpoints.length - 1; b >= 0 && readAt < 0; b--) {
      const at = breakpoints[b]!;
      for (let p = at; p >= Math.max(0, at - LOOKBACK_BLOCKS + 1); p--) {
        if (this.has(hashes[p]!)) {
          readAt = p;
          break;
        }
      }
    }
    const plan: CachePlan = { ...NO_CACHE, writes: [] };
    if (readAt >= 0) {
      plan.readTokens = cumulative[readAt]!;
      plan.read = { hash: hashes[readAt]!, ttlMs: this.ttlOf(units[readAt]!.breakpointTtl) };
    }
    let covered = plan.readTokens;
    for (const at of breakpoints) {
      if (at <= readAt) continue;
      // Below the minimum cacheable length the API neither writes nor errs: it just doesn't cache.
      if (cumulative[at]! < this.minTokens) continue;
      const kind = units[at]!.breakpointTtl;
      plan.writes.push({ hash: hashes[at]!, ttlMs: this.ttlOf(kind) });
      const written = cumulative[at]! - covered;
      covered = cumulative[at]!;
      if (kind === '1h') plan.write1hTokens += written;
      else plan.write5mTokens += written;
    }
    plan.writeTokens = plan.write5mTokens + plan.write1hTokens;
    return plan;
  }

  /** OpenAI: automatic prefix caching of long prompts in 128-token steps. */
  planOpenAI(namespace: string, units: readonly PromptUnit[], inputTokens: number): CachePlan {
    if (inputTokens < OPENAI_MIN_TOKENS) return NO_CACHE;
    const text = units.map((u) => u.text).join('');
    const step = OPENAI_STEP_TOKENS * CHARS_PER_TOKEN;
    const hashes: string[] = [];
    let hash = namespace;
    for (let end = step; end <= text.length; end += step) {
      hash = chain(hash, text.slice(end - step, end));
      hashes.push(hash);
    }
    const first = OPENAI_MIN_TOKENS / OPENAI_STEP_TOKENS; // steps in the shortest cacheable prefix
    let readSteps = 0;
    for (let s = hashes.length; s >= first; s--) {
      if (this.has(hashes[s - 1]!)) {
        readSteps = s;
        break;
      }
    }
    const plan: CachePlan = { ...NO_CACHE, writes: [] };
    if (readSteps > 0) {
      plan.readTokens = Math.min(inputTokens, readSteps * OPENAI_STEP_TOKENS);
      plan.read = { hash: hashes[readSteps - 1]!, ttlMs: this.ttlMs };
    }
    for (let s = Math.max(first, readSteps + 1); s <= hashes.length; s++) plan.writes.push({ hash: hashes[s - 1]!, ttlMs: this.ttlMs });
    if (plan.writes.length > 0) {
      plan.writeTokens = Math.max(0, Math.min(inputTokens, hashes.length * OPENAI_STEP_TOKENS) - plan.readTokens);
      plan.write5mTokens = plan.writeTokens;
    }
    return plan;
  }
}

/**
 * The usage of a request with this plan: input tokens split into uncached, read and written.
 * OpenAI bills cache writes as ordinary input, so there `billWrites` is false and written tokens
 * stay in `inputTokens`.
 */
export function usageOf(inputTokens: number, plan: CachePlan, outputTokens: number, billWrites: boolean): SimUsage {
  const written = billWrites ? plan.writeTokens : 0;
  return {
    inputTokens: Math.max(0, inputTokens - plan.readTokens - written),
    outputTokens,
    cacheReadTokens: plan.readTokens,
    cacheWriteTokens: written,
    cacheWrite5mTokens: billWrites ? plan.write5mTokens : 0,
    cacheWrite1hTokens: billWrites ? plan.write1hTokens : 0,
  };
}
