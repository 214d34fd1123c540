/**
 * Journal upkeep on a SQLite file (`SqliteStore.pruneRuns`, `compact`): the runs a rule picks,
 * their rows counted and deleted from every table in one write transaction (the live check made
 * inside it, so a run resumed meanwhile is kept), and VACUUM to give the space back. Its
 * statements are prepared per call: a prune is rare, and a listing's read-only store of an older
 * schema has fewer tables and columns, which are read from the file.
 */
import type { SqlDatabase } from './driver.js';
import { retryBusy } from './busy.js';
import { mayTake } from './shared.js';
import { checkPruneRule, pickPrunable, prunedRun, RUN_TABLES, type PruneCandidate } from './prune.js';
import { codeOf, reasonOf, type SqliteWrites } from './sqliteWrites.js';
import { StoreError, type PruneResult, type PruneRule } from './types.js';

export interface PruneContext {
  db: SqlDatabase;
  writes: SqliteWrites;
  now: () => number;
}

export function pruneSqlite(ctx: PruneContext, rule: PruneRule, options: { dryRun?: boolean; staleMs?: number } = {}): PruneResult {
  checkPruneRule(rule);
  const staleMs = options.staleMs ?? 30_000;
  const body = (): PruneResult => {
    const { db } = ctx;
    const runs = db.prepare('SELECT id, status, created_at AS createdAt FROM runs ORDER BY created_at DESC, rowid DESC').all() as PruneCandidate[];
    const lockOf = db.prepare('SELECT owner, pid, host, acquired_at AS acquiredAt, heartbeat_at AS heartbeatAt FROM locks WHERE run_id = ?');
    const now = ctx.now();
    const isHeld = (id: string) => {
      const lock = lockOf.get(id) as Parameters<typeof mayTake>[0] | undefined;
      return lock !== undefined && !mayTake(lock, '', now, staleMs);
    };
    const picked = pickPrunable(runs, rule, now, isHeld);
    const tables = tablesOf(db);
    const removed = picked.remove.map((run) => prunedRun(run, tables.reduce((sum, t) => sum + (t.bytes.get(run.id) as number), 0)));
    if (!options.dryRun) for (const run of picked.remove) for (const t of tables) t.remove.run(run.id);
    return { removed, bytes: removed.reduce((sum, r) => sum + r.bytes, 0), live: picked.live, interrupted: picked.interrupted };
  };
  return options.dryRun ? ctx.writes.read(body) : ctx.writes.durable('prune runs', body);
}

/** The journal's tables that this file has, each with its byte count and delete by run. */
function tablesOf(db: SqlDatabase) {
  const present = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]);
  return RUN_TABLES.filter((t) => present.has(t.table)).map((t) => {
    const columns = new Set(db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(t.table) as string[]);
    const texts = t.texts.filter((c) => columns.has(c)).map((c) => `ifnull(length(CAST(${c} AS BLOB)), 0)`);
    const perRow = [...texts, String(8 * t.numbers)].join(' + ');
    const bytes = db.prepare(`SELECT ifnull(sum(${perRow}), 0) FROM ${t.table} WHERE ${t.runColumn} = ?`).pluck();
    return { bytes, remove: db.prepare(`DELETE FROM ${t.table} WHERE ${t.runColumn} = ?`) };
  });
}

/**
 * VACUUM (the file rewritten without its free pages), then a WAL checkpoint that truncates the
 * WAL (VACUUM writes the whole database there first). Another process reading at that moment
 * only keeps the WAL from shrinking now; a failure is a StoreError that poisons nothing.
 */
export function compactSqlite(db: SqlDatabase, path: string, busyLimitMs: number): void {
  try {
    retryBusy(() => db.exec('VACUUM'), busyLimitMs);
    retryBusy(() => db.pragma('wal_checkpoint(TRUNCATE)'), busyLimitMs);
  } catch (error) {
    throw new StoreError(
      `run journal ${path}: VACUUM failed: ${codeOf(error)} (${reasonOf(error)}); the removed runs stay removed, the file keeps its size until a VACUUM succeeds`,
      path,
      codeOf(error),
    );
  }
}
