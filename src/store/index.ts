/**
 * The run journal's storage layer: `openStore(spec)` picks the store a run writes to, and the
 * types every caller needs. See `types.ts` for the contract and `journal.ts` for how run events
 * become writes.
 *
 *   openStore(undefined)              -> SqliteStore at .swarmstate/runs.db (relative to cwd)
 *   openStore('memory' | ':memory:')  -> MemoryStore
 *   openStore('<path>')               -> SqliteStore at that file
 */
import { MemoryStore } from './memory.js';
import { DEFAULT_DB_PATH, SqliteStore } from './sqlite.js';
import type { Store, StoreOptions } from './types.js';

export function openStore(spec: string | undefined, options: StoreOptions = {}): Store {
  if (spec === 'memory' || spec === ':memory:') return new MemoryStore(options);
  return new SqliteStore(spec ?? DEFAULT_DB_PATH, options);
}

export { Journal, type JournalEvent } from './journal.js';
export { MemoryStore } from './memory.js';
export { DEFAULT_DB_PATH, SCHEMA_VERSION, SqliteStore } from './sqlite.js';
export * from './types.js';
