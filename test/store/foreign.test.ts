/**
 * `swarmstate runs` never writes, and a database that is not a swarmstate journal is refused
 * untouched: the CLI as a real child process on real SQLite files, each file hashed before and
 * after (and no -wal / -shm file left beside it).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore, StoreError } from '../../src/store/index.js';
import { ROOT, tempDir } from './helpers.js';
import { DRIVERS, rawDb } from '../helpers/sqlite.js';
import { migrate, recognise } from '../../src/store/sqliteMigrate.js';
import type { SqlDatabase } from '../../src/store/driver.js';

const exec = promisify(execFile);
const BIN = path.join(ROOT, 'bin/swarmstate.js');
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir();
  dirs.push(d);
  return d;
}

const hash = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

describe.each(DRIVERS)('on %s', (driver) => {
  async function cli(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], { cwd, env: { ...process.env, SWARMSTATE_STORE: '', SWARMSTATE_SQLITE: driver } });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  /** Another program's database, in its own (rollback journal) mode. */
  function foreignDb(file: string, tables = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me');"): void {
    const db = rawDb(file, { driver });
    db.exec(tables);
    db.pragma('user_version = 7');
    db.close();
  }

  describe('a new file set up by another process while this one looks at it', () => {
    /** `db` seen through a proxy that runs `between` once, right after it reads `pragma`: the other process's whole set-up lands between two reads. */
    function interleaved(db: SqlDatabase, pragma: string, between: () => void): SqlDatabase {
      let done = false;
      return {
        driver: db.driver,
        prepare: (sql: string) => db.prepare(sql),
        exec: (sql: string) => db.exec(sql),
        close: () => db.close(),
        get inTransaction() {
          return db.inTransaction;
        },
        pragma: (text: string) => {
          const value = db.pragma(text);
          if (text === pragma && !done) {
            done = true;
            between();
          }
          return value;
        },
      };
    }

    // CI once refused a journal three processes opened at once: "not a swarmstate journal (8
    // table(s) of its own...)". The mark and the version were read before another process set the
    // file up, its tables after. Read in one snapshot, the file is still new to this process.
    it.each(['application_id', 'user_version'])('is not taken for someone else\'s database when the set-up lands after reading %s', (pragma) => {
      const file = path.join(dir(), 'runs.db');
      const other = rawDb(file, { driver });
      other.pragma('journal_mode = WAL'); // as the first process leaves it: readers keep their snapshot while it writes
      const mine = rawDb(file, { driver });
      let setUp = false;
      const looking = interleaved(mine, pragma, () => {
        migrate(other, file);
        setUp = true;
      });
      expect(recognise(looking, file)).toBe('new');
      expect(setUp).toBe(true); // the interleaving really happened
      expect(mine.inTransaction).toBe(false); // and the snapshot was let go
      expect(recognise(mine, file)).toBe('ours');
      migrate(mine, file); // what openJournal does next: nothing left to do, and no error
      other.close();
      mine.close();
    });
  });

  describe('runs on a file that is not a swarmstate journal', () => {
    it('refuses another program\'s database, leaving it byte for byte as it was', async () => {
      const d = dir();
      const file = path.join(d, 'app.db');
      foreignDb(file);
      const before = hash(file);
      const listed = await cli(['runs', '--store', file], d);
      expect(listed.code).toBe(4);
      expect(listed.stderr).toContain(`run journal ${file}: not a swarmstate journal`);
      expect(listed.stderr).toContain('notes');
      expect(hash(file)).toBe(before);
      expect(fs.readdirSync(d)).toEqual(['app.db']);

      // A run on it is refused the same way, before anything is written (no WAL switch, no tables).
      fs.writeFileSync(path.join(d, 'plan.json'), JSON.stringify({
        providers: { sim: { type: 'sim' } },
        models: { m: { provider: 'sim', model: 'sim-fast', maxTokens: 16 } },
        tasks: [{ id: 'a', model: 'm', prompt: 'hi' }],
      }));
      const run = await cli(['run', 'plan.json', '--store', file, '--quiet'], d);
      expect(run.code).toBe(4);
      expect(run.stderr).toContain('not a swarmstate journal');
      expect(hash(file)).toBe(before);
      expect(fs.readdirSync(d).sort()).toEqual(['app.db', 'plan.json']);
    });

    it('refuses a database marked by another application, and one with tables of ours missing', () => {
      const d = dir();
      const marked = path.join(d, 'marked.db');
      const db = rawDb(marked, { driver });
      db.pragma('application_id = 1234');
      db.close();
      const partial = path.join(d, 'partial.db');
      foreignDb(partial, 'CREATE TABLE runs (id TEXT); CREATE TABLE tasks (id TEXT);');
      for (const file of [marked, partial]) {
        const before = hash(file);
        for (const readOnly of [true, false]) {
          let caught: unknown;
          try {
            new SqliteStore(file, { readOnly, driver }).close();
          } catch (error) {
            caught = error;
          }
          expect(caught).toBeInstanceOf(StoreError);
          expect(caught).toMatchObject({ sqliteCode: 'foreign', path: file });
        }
        expect(hash(file)).toBe(before);
      }
    });

    it('lists a journal without writing to it, and creates nothing where there is none', async () => {
      const d = dir();
      const file = path.join(d, 'runs.db');
      const store = new SqliteStore(file, { driver });
      store.createRun({ id: 'r1', plan: {}, options: {}, tasksTotal: 2, createdAt: Date.UTC(2026, 0, 1) });
      store.setRunStatus('r1', 'completed', {});
      store.close(); // the last connection: SQLite folds the WAL back into the file
      const before = hash(file);
      const listed = await cli(['runs', '--store', file, '--json'], d);
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: 'r1', status: 'completed' })]);
      expect(hash(file)).toBe(before);

      const none = path.join(d, 'nothing', 'runs.db');
      const empty = await cli(['runs', '--store', none], d);
      expect(empty).toMatchObject({ code: 2, stdout: '' }); // a journal named that does not exist: a typo, said so
      expect(empty.stderr).toMatch(/no run journal at/);
      expect(fs.existsSync(path.dirname(none))).toBe(false);
    });

    it('still opens a journal written before files were marked (the tables say it is ours), and marks it', () => {
      const d = dir();
      const file = path.join(d, 'old.db');
      const store = new SqliteStore(file, { driver });
      store.createRun({ id: 'r1', plan: {}, options: {}, tasksTotal: 1, createdAt: 1 });
      store.database.pragma('application_id = 0'); // as an older swarmstate left it
      store.close();
      const reader = new SqliteStore(file, { readOnly: true, driver });
      expect(reader.listRuns().map((r) => r.id)).toEqual(['r1']);
      expect(() => reader.setRunStatus('r1', 'failed')).toThrow(/opened read-only/);
      reader.close();
      const writer = new SqliteStore(file, { driver });
      expect(writer.database.pragma('application_id')).not.toBe(0);
      writer.close();
    });
  });
});
