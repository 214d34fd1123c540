/**
 * The run journal's storage layer: `openStore(spec)` picks the store a run writes to, and the
 * types every caller needs. See `types.ts` for the contract and `journal.ts` for how run events
 * become writes.
 *
 *   openStore(undefined)              -> SqliteStore at .swarmstate/runs.db (relative to cwd)
 *   openStore('memory' | ':memory:')  -> MemoryStore
 *   openStore('<path>')               -> SqliteStore at that file
 *
 * `openStoreToRead(spec)` is the same choice for a listing: the file opened read-only, or
 * undefined when there is no journal there yet (a listing creates nothing).
 */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { MemoryStore } from './memory.js';
import { DEFAULT_DB_PATH, SqliteStore } from './sqlite.js';
import { StoreError, type Store, type StoreOptions } from './types.js';

export function openStore(spec: string | undefined, options: StoreOptions = {}): Store {
  if (spec === 'memory' || spec === ':memory:') return new MemoryStore(options);
  return new SqliteStore(spec ?? DEFAULT_DB_PATH, options);
}

export function openStoreToRead(spec: string | undefined): Store | undefined {
  if (spec === 'memory' || spec === ':memory:') return new MemoryStore();
  const file = resolve(spec ?? DEFAULT_DB_PATH);
  // No file, or an empty one (SQLite creates it empty): no run was ever journaled there.
  if (!existsSync(file) || statSync(file).size === 0) return undefined;
  try {
    return new SqliteStore(file, { readOnly: true });
  } catch (error) {
    if (error instanceof StoreError && error.sqliteCode === 'empty') return undefined;
    throw error;
  }
}

export { Journal, type JournalEvent } from './journal.js';
export { MemoryStore } from './memory.js';
export { JournalRowError } from './rows.js';
export { DEFAULT_DB_PATH, SCHEMA_VERSION, SqliteStore } from './sqlite.js';
export * from './types.js';
export * from './extras.js';
