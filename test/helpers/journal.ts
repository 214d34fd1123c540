/** Reading a run journal that another process is writing, to act on its progress (not on time). */
import { existsSync } from 'node:fs';
import { openDatabase, type SqlDatabase } from '../../src/store/driver.js';

/** Tasks the SQLite journal at `db` has committed as done (0 before the run's row exists). */
export function journaledDone(db: string): number {
  if (!existsSync(db)) return 0;
  let conn: SqlDatabase | undefined;
  try {
    // Read-only, and WAL lets it read beside the writer without waiting for it.
    conn = openDatabase(db, { readOnly: true });
    return (conn.prepare('SELECT max(tasks_done) AS n FROM runs').get() as { n: number | null }).n ?? 0;
  } catch {
    return 0; // the writer has not created the schema yet
  } finally {
    conn?.close();
  }
}
