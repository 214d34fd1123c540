/**
 * Opening a journal file for `SqliteStore` (sqlite.ts): the folder made, a file its owner made
 * read-only refused, the file recognised before anything is written (another program's database
 * stays as it was), then WAL, `synchronous=NORMAL` and the schema brought up to date (or, read
 * only, its version checked), and every statement prepared once. Whatever fails comes out as a
 * `StoreError` that names the file, with the handle closed.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { BUSY_TIMEOUT_MS, retryBusy } from './busy.js';
import { openDatabase, SqliteDriverError, type SqlDatabase, type SqliteDriverName } from './driver.js';
import { checkVersion, migrate, recognise } from './sqliteMigrate.js';
import { prepare, SCHEMA_VERSION, type Statements } from './sqliteSchema.js';
import { codeOf, reasonOf } from './sqliteWrites.js';
import { StoreError } from './types.js';

export interface OpenOptions {
  readOnly: boolean;
  /** How long to retry while another process holds the write lock. */
  busyLimitMs: number;
  driver?: SqliteDriverName;
}

/** The open connection and its prepared statements. `path` is resolved already (or `:memory:`). */
export function openJournal(path: string, { readOnly, busyLimitMs, driver }: OpenOptions): { db: SqlDatabase; st: Statements; version: number } {
  let db: SqlDatabase | undefined;
  try {
    if (path !== ':memory:' && !readOnly) {
      mkdirSync(dirname(path), { recursive: true });
      // Root ignores permission bits, so SQLite would write a file its owner made read-only: refuse here.
      const mode = statSync(path, { throwIfNoEntry: false })?.mode;
      if (mode !== undefined && (mode & 0o222) === 0) {
        throw Object.assign(new Error('the file is read-only'), { code: 'SQLITE_READONLY' });
      }
    }
    db = openDatabase(path, { timeoutMs: BUSY_TIMEOUT_MS, readOnly, driver });
    const opened = db;
    // Before anything is written (WAL, the schema): another program's database stays as it was.
    const kind = retryBusy(() => recognise(opened, path), busyLimitMs);
    let version = SCHEMA_VERSION;
    if (readOnly) {
      if (kind === 'new') throw new StoreError(`run journal ${path}: the file holds no journal yet`, path, 'empty');
      version = checkVersion(opened, path);
    } else {
      retryBusy(() => opened.pragma('journal_mode = WAL'), busyLimitMs);
      opened.pragma('synchronous = NORMAL');
      retryBusy(() => migrate(opened, path), busyLimitMs);
    }
    return { db, st: prepare(db, version, readOnly), version };
  } catch (error) {
    try {
      db?.close();
    } catch {
      // Closing a half-open handle: nothing more to report than the first error.
    }
    if (error instanceof StoreError) throw error;
    // Said in full: what to install is the point of it.
    if (error instanceof SqliteDriverError) throw new StoreError(`run journal ${path}: ${error.message}`, path, error.code);
    throw new StoreError(`run journal ${path}: cannot open: ${codeOf(error)} (${reasonOf(error)})`, path, codeOf(error));
  }
}
