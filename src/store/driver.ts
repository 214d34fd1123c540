/**
 * The SQLite driver under `SqliteStore`: better-sqlite3 when it is installed and loads, else
 * Node's built-in `node:sqlite` (Node >= 22.13, where it needs no flag). Both are synchronous, so
 * the store is the same code on either; this file hides the few differences (pragmas, `pluck`,
 * the transaction flag, error codes).
 *
 * Both are loaded on first use with `require` (both are synchronous to open, and the store's
 * constructor is): `import 'swarmstate'` loads neither, and a run on `--store memory` never does.
 * better-sqlite3 is an optional dependency: absent (or built for another Node, whose ABI does not
 * match) it is passed over for node:sqlite.
 */
import { createRequire } from 'node:module';

export type SqliteDriverName = 'better-sqlite3' | 'node:sqlite';

/** The drivers, in the order they are preferred. */
export const SQLITE_DRIVERS: readonly SqliteDriverName[] = ['better-sqlite3', 'node:sqlite'];

/** The part of a prepared statement the store uses. */
export interface SqlStatement {
  run(...params: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  /** The same statement returning the first column's value instead of a row object. */
  pluck(): SqlStatement;
}

/** One connection, whichever driver holds it. */
export interface SqlDatabase {
  readonly driver: SqliteDriverName;
  prepare(sql: string): SqlStatement;
  exec(sql: string): void;
  /** `PRAGMA <text>`: the first column of the first row (the pragma's value), or undefined. */
  pragma(text: string): unknown;
  /** True while a transaction is open (false when the driver cannot tell and none was begun by us). */
  readonly inTransaction: boolean;
  close(): void;
}

export interface OpenOptions {
  readOnly?: boolean;
  /** SQLite's own wait for a lock another connection holds (`busy_timeout`). */
  timeoutMs?: number;
  /** A driver by name; otherwise the first that loads (see SQLITE_DRIVERS) or `SWARMSTATE_SQLITE`. */
  driver?: SqliteDriverName;
}

/** No driver could be loaded, or the one asked for cannot be: what to install is in the message. */
export class SqliteDriverError extends Error {
  readonly code = 'SQLITE_DRIVER_MISSING';
  constructor(message: string) {
    super(message);
    this.name = 'SqliteDriverError';
  }
}

const require = createRequire(import.meta.url);

type Loaded = { ok: true; open: (file: string, options: OpenOptions) => SqlDatabase } | { ok: false; why: string };
const loaded = new Map<SqliteDriverName, Loaded>();

function load(name: SqliteDriverName): Loaded {
  let entry = loaded.get(name);
  if (entry === undefined) {
    try {
      entry = { ok: true, open: name === 'better-sqlite3' ? loadBetter() : loadNode() };
    } catch (error) {
      entry = { ok: false, why: error instanceof Error ? error.message.split('\n')[0] : String(error) };
    }
    loaded.set(name, entry);
  }
  return entry;
}

/** The drivers that load in this process, in the order they are preferred. */
export function availableDrivers(): SqliteDriverName[] {
  return SQLITE_DRIVERS.filter((name) => load(name).ok);
}

function isDriverName(value: string): value is SqliteDriverName {
  return (SQLITE_DRIVERS as readonly string[]).includes(value);
}

/** The driver a store opens with: the one asked for (option, then SWARMSTATE_SQLITE), else the first that loads. */
export function chooseDriver(asked?: SqliteDriverName): SqliteDriverName {
  const fromEnv = process.env.SWARMSTATE_SQLITE;
  const wanted = asked ?? (fromEnv ? fromEnv : undefined);
  if (wanted !== undefined) {
    if (!isDriverName(wanted)) {
      throw new SqliteDriverError(`SWARMSTATE_SQLITE is "${wanted}": give one of ${SQLITE_DRIVERS.join(', ')}, or unset it`);
    }
    const entry = load(wanted);
    if (!entry.ok) throw new SqliteDriverError(`the SQLite driver ${wanted} cannot be loaded (${entry.why}); ${INSTALL_HINT}`);
    return wanted;
  }
  for (const name of SQLITE_DRIVERS) if (load(name).ok) return name;
  const why = (name: SqliteDriverName) => (load(name) as { why: string }).why;
  const whys = SQLITE_DRIVERS.map((name) => `${name}: ${why(name)}`).join('; ');
  // Installed but not loading: built for another Node, or its install script never ran.
  const hint = /Cannot find module/.test(why('better-sqlite3')) ? INSTALL_HINT : REBUILD_HINT;
  throw new SqliteDriverError(`no SQLite driver can be loaded (${whys}); ${hint}`);
}

const INSTALL_HINT =
  'the SQLite journal needs Node >= 22.13 (built-in node:sqlite) or the better-sqlite3 package (npm install better-sqlite3); ' +
  'or run without a journal file (--store memory)';
const REBUILD_HINT =
  'better-sqlite3 is installed but not built for this Node: npm rebuild better-sqlite3 (its install script must be allowed to run); ' +
  'or use Node >= 22.13 (built-in node:sqlite), or run without a journal file (--store memory)';

export function openDatabase(file: string, options: OpenOptions = {}): SqlDatabase {
  const entry = load(chooseDriver(options.driver)) as Extract<Loaded, { ok: true }>;
  return entry.open(file, options);
}

// ---------------------------------------------------------------------------------------------
// Error codes: better-sqlite3 names them (`SQLITE_BUSY_SNAPSHOT`); node:sqlite gives the number
// (`errcode`, possibly extended) under code ERR_SQLITE_ERROR. The store speaks names.
// ---------------------------------------------------------------------------------------------

const PRIMARY: Record<number, string> = {
  1: 'SQLITE_ERROR', 2: 'SQLITE_INTERNAL', 3: 'SQLITE_PERM', 4: 'SQLITE_ABORT', 5: 'SQLITE_BUSY', 6: 'SQLITE_LOCKED',
  7: 'SQLITE_NOMEM', 8: 'SQLITE_READONLY', 9: 'SQLITE_INTERRUPT', 10: 'SQLITE_IOERR', 11: 'SQLITE_CORRUPT',
  12: 'SQLITE_NOTFOUND', 13: 'SQLITE_FULL', 14: 'SQLITE_CANTOPEN', 15: 'SQLITE_PROTOCOL', 16: 'SQLITE_EMPTY',
  17: 'SQLITE_SCHEMA', 18: 'SQLITE_TOOBIG', 19: 'SQLITE_CONSTRAINT', 20: 'SQLITE_MISMATCH', 21: 'SQLITE_MISUSE',
  22: 'SQLITE_NOLFS', 23: 'SQLITE_AUTH', 24: 'SQLITE_FORMAT', 25: 'SQLITE_RANGE', 26: 'SQLITE_NOTADB',
};

/** The SQLite result code's name (`SQLITE_FULL`) of an error from either driver, else undefined. */
export function sqliteCodeOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; errcode?: unknown } | null;
  if (typeof e?.errcode === 'number' && e.code === 'ERR_SQLITE_ERROR') {
    // Extended codes keep the primary code in their low byte (SQLITE_BUSY_SNAPSHOT = 5 | 2 << 8).
    return PRIMARY[e.errcode & 0xff] ?? `SQLITE_${e.errcode}`;
  }
  return typeof e?.code === 'string' && e.code.startsWith('SQLITE_') ? e.code : undefined;
}

// ---------------------------------------------------------------------------------------------
// better-sqlite3
// ---------------------------------------------------------------------------------------------

interface BetterStatement {
  run(...p: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...p: unknown[]): unknown;
  all(...p: unknown[]): unknown[];
  pluck(toggle?: boolean): BetterStatement;
}
interface BetterDb {
  prepare(sql: string): BetterStatement;
  exec(sql: string): void;
  pragma(text: string, options: { simple: true }): unknown;
  readonly inTransaction: boolean;
  close(): void;
}
type BetterCtor = new (file: string, options: Record<string, unknown>) => BetterDb;

function loadBetter(): (file: string, options: OpenOptions) => SqlDatabase {
  const Database = require('better-sqlite3') as BetterCtor;
  // The native part loads with the first connection: one in memory proves it matches this Node.
  new Database(':memory:', {}).close();
  return (file, options) => {
    const db = new Database(file, {
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
      ...(options.readOnly ? { readonly: true, fileMustExist: true } : {}),
    });
    const adapt = (st: BetterStatement, sql: string): SqlStatement => ({
      run: st.run.bind(st),
      get: st.get.bind(st),
      all: st.all.bind(st),
      // pluck(true) changes the statement it is called on: a statement of its own keeps this one as it is.
      pluck: () => adapt(db.prepare(sql).pluck(true), sql),
    });
    return {
      driver: 'better-sqlite3',
      prepare: (sql) => adapt(db.prepare(sql), sql),
      exec: (sql) => db.exec(sql),
      pragma: (text) => db.pragma(text, { simple: true }),
      get inTransaction() {
        return db.inTransaction;
      },
      close: () => db.close(),
    };
  };
}

// ---------------------------------------------------------------------------------------------
// node:sqlite
// ---------------------------------------------------------------------------------------------

interface NodeStatement {
  run(...p: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...p: unknown[]): Record<string, unknown> | undefined;
  all(...p: unknown[]): Array<Record<string, unknown>>;
}
interface NodeDb {
  prepare(sql: string): NodeStatement;
  exec(sql: string): void;
  close(): void;
  /** Node >= 22.16 and 24. */
  readonly isTransaction?: boolean;
}
type NodeCtor = new (file: string, options: Record<string, unknown>) => NodeDb;

/** Loads node:sqlite without its ExperimentalWarning on stderr (the CLI's stderr is for the user). */
function requireNodeSqlite(): { DatabaseSync: NodeCtor } {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    if (/SQLite is an experimental feature/.test(text)) return;
    return (emit as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return require('node:sqlite') as { DatabaseSync: NodeCtor };
  } finally {
    process.emitWarning = emit;
  }
}

function firstValue(row: Record<string, unknown> | undefined): unknown {
  if (row === undefined) return undefined;
  for (const key in row) return row[key];
  return undefined;
}

function loadNode(): (file: string, options: OpenOptions) => SqlDatabase {
  const { DatabaseSync } = requireNodeSqlite();
  return (file, options) => {
    const db = new DatabaseSync(file, options.readOnly ? { readOnly: true } : {});
    // Tracked for Node versions without `isTransaction`: set by BEGIN, cleared by COMMIT/ROLLBACK.
    let open = false;
    const tracked = (sql: string): void => {
      const word = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase();
      if (word === 'BEGIN') open = true;
      else if (word === 'COMMIT' || word === 'END' || word === 'ROLLBACK') open = false;
    };
    const statement = (sql: string): SqlStatement => {
      const st = db.prepare(sql);
      const run = /^\s*(BEGIN|COMMIT|END|ROLLBACK)\b/i.test(sql)
        ? (...p: unknown[]) => {
            const result = st.run(...p);
            tracked(sql);
            return result;
          }
        : st.run.bind(st);
      const plucked: SqlStatement = {
        run,
        get: (...p) => firstValue(st.get(...p)),
        all: (...p) => st.all(...p).map(firstValue),
        pluck: () => plucked,
      };
      return { run, get: st.get.bind(st), all: st.all.bind(st), pluck: () => plucked };
    };
    const wrapped: SqlDatabase = {
      driver: 'node:sqlite',
      prepare: statement,
      exec: (sql) => {
        db.exec(sql);
        tracked(sql);
      },
      pragma: (text) => firstValue(db.prepare(`PRAGMA ${text}`).get()),
      get inTransaction() {
        return typeof db.isTransaction === 'boolean' ? db.isTransaction : open;
      },
      close: () => db.close(),
    };
    try {
      // The `timeout` option is Node >= 22.16: the pragma works on every version.
      if (options.timeoutMs !== undefined) wrapped.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.timeoutMs))}`);
    } catch (error) {
      db.close();
      throw error;
    }
    return wrapped;
  };
}
