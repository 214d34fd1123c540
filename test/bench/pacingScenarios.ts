/**
 * The pacing benchmark's scenarios (test/bench/pacing.ts runs them, pacingTable.ts writes their
 * table): each against a simulator that enforces each key's limits as the providers document them.
 */

/** Time to first token of every call. */
export const TTFT_MS = 150;

export interface Scenario {
  name: string;
  what: string;
  tasks: number;
  keys: number;
  /** Keys the server refuses (401): the last ones of the list. */
  revoked: number;
  rpm: number;
  /** The server's bucket (requests); default one second of `rpm`, at least 1. */
  burst?: number;
  /** The plan states the limits (`rpm`, and `burst` when `statedBurst`); else the runtime has only the headers and the 429s. */
  stated: boolean;
  statedBurst?: boolean;
  /** The server sends rate-limit headers and Retry-After (false: `headers: false`, it says nothing). */
  headers: boolean;
  /** The share of 429s the goal allows swarmstate. */
  maxShare: number;
  /** Makespan over the bound the goal allows swarmstate. */
  maxOverBound: number;
}

const BASE: Scenario[] = [
  { name: 'stated', what: '120 tasks, 3 keys, limits stated', tasks: 120, keys: 3, revoked: 0, rpm: 300, stated: true, headers: true, maxShare: 0.02, maxOverBound: 1.15 },
  { name: 'unknown', what: '120 tasks, 2 keys, limits unknown', tasks: 120, keys: 2, revoked: 0, rpm: 300, stated: false, headers: true, maxShare: 0.1, maxOverBound: 1.15 },
  { name: 'revoked', what: '120 tasks, 3 keys, one revoked, limits stated', tasks: 120, keys: 3, revoked: 1, rpm: 300, stated: true, headers: true, maxShare: 0.02, maxOverBound: 1.15 },
  { name: 'wide', what: '400 tasks, 4 keys, limits unknown', tasks: 400, keys: 4, revoked: 0, rpm: 300, stated: false, headers: true, maxShare: 0.1, maxOverBound: 1.15 },
];

/** Each base scenario with headers, then without (nothing announced), then the cases of issue 27. */
export const SCENARIOS: Scenario[] = [
  ...BASE,
  ...BASE.map((s) => ({ ...s, name: `${s.name}-quiet`, what: `${s.what}, no headers`, headers: false, ...(s.stated ? {} : { maxShare: 0.1 }) })),
  { name: 'quiet-200', what: '400 tasks, 4 keys at 200 rpm (burst 10), nothing stated, no headers', tasks: 400, keys: 4, revoked: 0, rpm: 200, burst: 10, stated: false, headers: false, maxShare: 0.1, maxOverBound: 1.15 },
  { name: 'quiet-revoked', what: '120 tasks, 3 keys at 120 rpm, one revoked, nothing stated, no headers', tasks: 120, keys: 3, revoked: 1, rpm: 120, stated: false, headers: false, maxShare: 0.1, maxOverBound: 1.15 },
  { name: 'burst', what: '300 tasks, 3 keys at 200 rpm (burst 10), rpm and burst stated', tasks: 300, keys: 3, revoked: 0, rpm: 200, burst: 10, stated: true, statedBurst: true, headers: true, maxShare: 0.02, maxOverBound: 1.05 },
];

/** max(one call, (N - total burst) / total rate) over the keys the server accepts. */
export function lowerBoundMs(s: Scenario): number {
  const live = s.keys - s.revoked;
  const burst = s.burst ?? Math.max(1, s.rpm / 60);
  return Math.max(TTFT_MS, ((s.tasks - live * burst) / (live * s.rpm)) * 60_000);
}

