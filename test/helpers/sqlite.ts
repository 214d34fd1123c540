/**
 * The SQLite drivers this Node can load, for tests that run on each (describe.each), and a raw
 * connection through the same driver layer the store uses: another program's view of the file.
 */
import { availableDrivers, openDatabase, type SqlDatabase, type SqliteDriverName } from '../../src/store/driver.js';

/** better-sqlite3 where it is installed and built for this Node; node:sqlite on Node >= 22.13. */
export const DRIVERS: SqliteDriverName[] = availableDrivers();

/** A connection of its own to `file` (read-only when asked), on `driver` or the default one. */
export function rawDb(file: string, options: { readOnly?: boolean; driver?: SqliteDriverName } = {}): SqlDatabase {
  return openDatabase(file, options);
}
