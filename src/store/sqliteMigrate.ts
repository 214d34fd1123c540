/**
 * Whose file it is and which schema it holds: a swarmstate journal is marked (`application_id`)
 * and versioned (`user_version`); another program's database is refused untouched; ours is
 * brought up to date in one write transaction.
 */
import type { SqlDatabase } from './driver.js';
import { MIGRATIONS, OLDEST_READABLE, SCHEMA_VERSION } from './sqliteSchema.js';
import { StoreError } from './types.js';

/**
 * Marks a file as a swarmstate journal (`PRAGMA application_id`, 4 bytes of the header meant for
 * this): "SwSt". Files written before the mark existed are recognised by their tables.
 */
export const APPLICATION_ID = 0x53775374;

/** The tables of the schema: a file without the mark is ours only if it has them all. */
const OUR_TABLES = ['attempts', 'locks', 'runs', 'spend', 'tasks', 'tool_results'];

/**
 * What the file holds: `new` (an empty database: ours to set up), `ours`, or it throws a
 * StoreError (code `foreign`) for any other database. Reads only: a refused file is left as it was.
 */
export function recognise(db: SqlDatabase, path: string): 'new' | 'ours' {
  if (db.inTransaction) return recogniseIn(db, path);
  // Three reads, one snapshot: read one by one, another process setting the file up between
  // them shows version 0 with all our tables, which looks like someone else's database.
  db.exec('BEGIN');
  try {
    return recogniseIn(db, path);
  } finally {
    if (db.inTransaction) db.exec('COMMIT');
  }
}

function recogniseIn(db: SqlDatabase, path: string): 'new' | 'ours' {
  const appId = db.pragma('application_id') as number;
  if (appId === APPLICATION_ID) return 'ours';
  const version = db.pragma('user_version') as number;
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").pluck().all() as string[]).sort();
  if (appId === 0 && version === 0 && tables.length === 0) return 'new';
  if (appId === 0 && version >= 1 && OUR_TABLES.every((t) => tables.includes(t))) return 'ours';
  const what = appId !== 0 ? `application_id ${appId}` : `${tables.length} table(s) of its own${tables.length > 0 ? `: ${tables.slice(0, 5).join(', ')}${tables.length > 5 ? ', ...' : ''}` : ''}`;
  throw new StoreError(
    `run journal ${path}: not a swarmstate journal (${what}); it was left untouched: give the journal a file of its own`,
    path,
    'foreign',
  );
}

/** The file's schema version; throws unless this swarmstate reads it as it is (a read-only store cannot migrate it). */
export function checkVersion(db: SqlDatabase, path: string): number {
  const version = db.pragma('user_version') as number;
  if (version >= OLDEST_READABLE && version <= SCHEMA_VERSION) return version;
  const older = version < SCHEMA_VERSION;
  throw new StoreError(
    `run journal ${path}: schema version ${version} is ${older ? 'older' : 'newer'} than this swarmstate reads (${SCHEMA_VERSION})${older ? '; a run (or resume) on it brings it up to date' : ''}`,
    path,
    'schema',
  );
}

/** Brings the file's schema to SCHEMA_VERSION and marks it as ours, in one write transaction (idempotent). */
export function migrate(db: SqlDatabase, path: string): void {
  const versionOf = () => db.pragma('user_version') as number;
  const marked = () => db.pragma('application_id') === APPLICATION_ID;
  if (versionOf() === SCHEMA_VERSION && marked()) return;
  db.exec('BEGIN IMMEDIATE');
  try {
    // Again, now that we hold the write lock: another process may have done it, or written
    // something of its own meanwhile.
    recognise(db, path);
    const version = versionOf();
    if (version > SCHEMA_VERSION) {
      throw new StoreError(
        `run journal ${path}: schema version ${version} is newer than this swarmstate knows (${SCHEMA_VERSION})`,
        path,
        'schema',
      );
    }
    for (let v = version; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
    db.pragma(`application_id = ${APPLICATION_ID}`);
    db.exec('COMMIT');
  } catch (error) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw error;
  }
}
