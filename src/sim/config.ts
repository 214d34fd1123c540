/**
 * startSim's options, checked at the boundary (a TypeError names the option) and filled with
 * their defaults.
 */
import { fingerprint } from './hash.js';
import { KeyLimiter } from './limits.js';
import type { SimFaultKind, SimOptions } from './types.js';

/** Fault kinds in the order their rates are stacked on one draw (earlier wins past a sum of 1). */
export const FAULT_ORDER: readonly SimFaultKind[] = ['http500', 'http529', 'reset', 'stall', 'streamError'];

/** The options with defaults applied; keys map each accepted secret to its limiter. */
export interface Config {
  port: number;
  seed: number;
  keys: Map<string, KeyLimiter> | 'any';
  ttft: number | [number, number];
  tokensPerSecond: number;
  /** ms of prompt processing per 1,000 uncached input tokens, added to the time to first token. */
  prefillMsPer1k: number;
  faults: Required<NonNullable<SimOptions['faults']>>;
  stallMs: number;
  cacheTtlMs: number;
  minCacheTokens: number;
  contextWindow: number;
  now: () => number;
  /** Rate-limit headers and Retry-After sent (SimOptions.headers). */
  headers: boolean;
}

/** @throws TypeError naming the option that is out of range. */
export function resolveConfig(options: SimOptions): Config {
  const now = options.now ?? Date.now;
  const bad = (name: string, value: unknown): never => {
    throw new TypeError(`startSim: ${name} must be a finite number, got ${String(value)}`);
  };
  const nonNegative = (value: number | undefined, name: string, fallback: number): number => {
    const v = value ?? fallback;
    if (typeof v !== 'number' || Number.isNaN(v) || v < 0) throw new TypeError(`startSim: ${name} must be a number >= 0, got ${String(value)}`);
    return v;
  };
  const ttft = options.latency?.ttftMs ?? 0;
  if (Array.isArray(ttft) ? !(ttft[0] >= 0 && ttft[1] >= ttft[0]) : !(ttft >= 0)) throw new TypeError(`startSim: latency.ttftMs must be >= 0 or [min, max] with 0 <= min <= max`);
  const tokensPerSecond = options.latency?.tokensPerSecond ?? Infinity;
  if (!(tokensPerSecond > 0)) throw new TypeError(`startSim: latency.tokensPerSecond must be > 0, got ${tokensPerSecond}`);
  const faults = { http500: 0, http529: 0, reset: 0, stall: 0, streamError: 0 };
  for (const kind of FAULT_ORDER) {
    const rate = options.faults?.[kind] ?? 0;
    if (!(rate >= 0 && rate <= 1)) throw new TypeError(`startSim: faults.${kind} must be a rate in [0, 1], got ${rate}`);
    faults[kind] = rate;
  }
  let keys: Config['keys'] = 'any';
  if (options.keys !== undefined && options.keys !== 'any') {
    keys = new Map();
    for (const [secret, limits] of Object.entries(options.keys)) {
      for (const name of ['rpm', 'itpm', 'otpm'] as const) {
        const v = limits[name];
        if (v !== undefined && !(v >= 0)) throw new TypeError(`startSim: keys[${fingerprint(secret)}].${name} must be >= 0 (0: every request refused), got ${v}`);
        const b = limits.burst?.[name];
        if (b !== undefined && !(b > 0)) throw new TypeError(`startSim: keys[${fingerprint(secret)}].burst.${name} must be > 0, got ${b}`);
      }
      keys.set(secret, new KeyLimiter(limits, now));
    }
  }
  return {
    port: nonNegative(options.port, 'port', 0),
    seed: Number.isFinite(options.seed ?? 0) ? (options.seed ?? 0) : bad('seed', options.seed),
    keys,
    ttft,
    tokensPerSecond,
    prefillMsPer1k: nonNegative(options.latency?.prefillMsPer1kTokens, 'latency.prefillMsPer1kTokens', 0),
    faults,
    stallMs: nonNegative(options.stallMs, 'stallMs', 120_000),
    cacheTtlMs: nonNegative(options.cacheTtlMs, 'cacheTtlMs', 300_000),
    minCacheTokens: nonNegative(options.minCacheTokens, 'minCacheTokens', 1024),
    contextWindow: nonNegative(options.contextWindow, 'contextWindow', 200_000),
    now,
    headers: options.headers === undefined ? true : typeof options.headers === 'boolean' ? options.headers : badHeaders(options.headers),
  };
}

function badHeaders(value: unknown): never {
  throw new TypeError(`startSim: headers must be true or false, got ${String(value)}`);
}
