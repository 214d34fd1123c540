/**
 * Journal upkeep, the part both stores share: the check of a prune rule, which runs it picks
 * (pure: the stores give their runs newest first and say which are held), and how many bytes a
 * row counts for. Each store removes what is picked in one write (sqlitePrune.ts, memory.ts).
 */
import type { PruneResult, PruneRule, PrunedRun, Store } from './types.js';

/** Throws a TypeError naming the field for a rule that is not one (or picks nothing). */
export function checkPruneRule(rule: PruneRule): void {
  const { olderThanMs, keep } = (rule ?? {}) as { olderThanMs?: unknown; keep?: unknown };
  if (olderThanMs === undefined && keep === undefined) throw new TypeError('a prune rule needs olderThanMs or keep');
  if (olderThanMs !== undefined && !(typeof olderThanMs === 'number' && Number.isFinite(olderThanMs) && olderThanMs >= 0)) {
    throw new TypeError(`olderThanMs must be a number of milliseconds, 0 or more (got ${shown(olderThanMs)})`);
  }
  if (keep !== undefined && !(typeof keep === 'number' && Number.isSafeInteger(keep) && keep >= 0)) {
    throw new TypeError(`keep must be a whole number of runs, 0 or more (got ${shown(keep)})`);
  }
}

function shown(value: unknown): string {
  return typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? typeof value).slice(0, 40);
}

/** A run as a prune sees it (its row's values as read: a damaged row may hold anything). */
export interface PruneCandidate {
  id: string;
  status: unknown;
  createdAt: unknown;
}

export interface Picked {
  remove: PruneCandidate[];
  live: string[];
  interrupted: string[];
}

/**
 * The runs `rule` removes, of `runs` given newest first, at time `now`: beyond the `keep` newest
 * and started more than `olderThanMs` before `now` (each rule given), except a run `isHeld` says a
 * live process holds, and one journaled as running (interrupted) or paused: a resume continues it. A run
 * whose start time cannot be read is never older than anything.
 */
export function pickPrunable(runs: readonly PruneCandidate[], rule: PruneRule, now: number, isHeld: (id: string) => boolean): Picked {
  const picked: Picked = { remove: [], live: [], interrupted: [] };
  runs.forEach((run, index) => {
    if (rule.keep !== undefined && index < rule.keep) return;
    if (rule.olderThanMs !== undefined && !(typeof run.createdAt === 'number' && now - run.createdAt > rule.olderThanMs)) return;
    if (isHeld(run.id)) picked.live.push(run.id);
    // Paused too: approvals wait for a person, and a resume continues it.
    else if (run.status === 'running' || run.status === 'paused') picked.interrupted.push(run.id);
    else picked.remove.push(run);
  });
  return picked;
}

/** What `pruneRuns` says of a run it removes. */
export function prunedRun(run: PruneCandidate, bytes: number): PrunedRun {
  return {
    id: run.id,
    status: typeof run.status === 'string' ? run.status : String(run.status),
    createdAt: typeof run.createdAt === 'number' && Number.isFinite(run.createdAt) ? run.createdAt : null,
    bytes,
  };
}

/** A row's bytes as both stores count them: its text columns' UTF-8 length, 8 per number column. */
export function rowBytes(texts: ReadonlyArray<string | null>, numbers: number): number {
  let bytes = 8 * numbers;
  for (const text of texts) if (text !== null) bytes += Buffer.byteLength(text, 'utf8');
  return bytes;
}

/**
 * The journal's tables, each with the column that names the run, its text columns and how many
 * number columns it has: what a prune deletes and counts. A table added to the schema is added
 * here (a test checks that a pruned run leaves no row in any table).
 */
export const RUN_TABLES: ReadonlyArray<{ table: string; runColumn: string; texts: readonly string[]; numbers: number }> = [
  { table: 'runs', runColumn: 'id', texts: ['id', 'status', 'source', 'options_json'], numbers: 5 },
  { table: 'run_plans', runColumn: 'run_id', texts: ['run_id', 'plan_json'], numbers: 0 },
  { table: 'run_results', runColumn: 'run_id', texts: ['run_id', 'result_json'], numbers: 0 },
  {
    table: 'tasks',
    runColumn: 'run_id',
    texts: ['run_id', 'task_id', 'status', 'output', 'error_json', 'reason', 'usage_json', 'spec_json', 'parent', 'extra_json', 'rejected_json'],
    numbers: 5,
  },
  { table: 'attempts', runColumn: 'run_id', texts: ['run_id', 'task_id', 'route', 'status', 'usage_json'], numbers: 5 },
  { table: 'tool_results', runColumn: 'run_id', texts: ['run_id', 'key', 'content'], numbers: 2 },
  { table: 'spend', runColumn: 'run_id', texts: ['run_id', 'task_id', 'model'], numbers: 1 },
  { table: 'locks', runColumn: 'run_id', texts: ['run_id', 'owner', 'host'], numbers: 3 },
];

/**
 * `createSwarm({ retention })`: the journal pruned by `rule`, then compacted when a run was
 * removed. Upkeep must not stop the run that asked for it: a failure is a process warning (code
 * SWARMSTATE_RETENTION); a journal that failed stops the run through its next write anyway.
 */
export function applyRetention(store: Store, rule: PruneRule): PruneResult | undefined {
  try {
    const result = store.pruneRuns(rule);
    if (result.removed.length > 0) store.compact();
    return result;
  } catch (error) {
    process.emitWarning(`journal retention failed: ${error instanceof Error ? error.message : String(error)}`, { code: 'SWARMSTATE_RETENTION' });
    return undefined;
  }
}
