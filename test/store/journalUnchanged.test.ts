/**
 * The suite's check that tests leave no journal behind (test/setup/journalUnchanged.ts): on
 * a folder of its own, what it records before, and the error its teardown throws when a test
 * created, changed or removed a file in `.swarmstate/`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { watchJournal } from '../setup/journalUnchanged.js';
import { tempDir } from './helpers.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function root(): string {
  const dir = tempDir();
  dirs.push(dir);
  return dir;
}

describe('the journal-unchanged check', () => {
  it('passes when .swarmstate/ is as it was: absent, or the same files untouched', () => {
    const none = root();
    expect(() => watchJournal(none)()).not.toThrow();
    const some = root();
    fs.mkdirSync(path.join(some, '.swarmstate'));
    fs.writeFileSync(path.join(some, '.swarmstate', 'runs.db'), 'x'.repeat(10));
    expect(() => watchJournal(some)()).not.toThrow();
  });

  it('fails naming each file a test created, changed or removed', () => {
    const dir = root();
    const folder = path.join(dir, '.swarmstate');
    const created = watchJournal(dir);
    fs.mkdirSync(folder);
    fs.writeFileSync(path.join(folder, 'runs.db'), 'abc');
    expect(created).toThrow(`the tests changed ${folder}${path.sep} (runs.db: created, 3 bytes): a test wrote the clone's own run journal; give it a store of its own (a temp file, "memory" or store: false)`);

    fs.writeFileSync(path.join(folder, 'runs.db-wal'), '');
    const changed = watchJournal(dir);
    fs.appendFileSync(path.join(folder, 'runs.db'), 'defg');
    fs.rmSync(path.join(folder, 'runs.db-wal'));
    expect(changed).toThrow(`(runs.db: 3 -> 7 bytes; runs.db-wal: removed)`);
  });

  it('sees a write that keeps the size', () => {
    const dir = root();
    const file = path.join(dir, '.swarmstate', 'runs.db');
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, 'aaaa');
    const teardown = watchJournal(dir);
    fs.writeFileSync(file, 'bbbb');
    expect(teardown).toThrow('(runs.db: rewritten, 4 bytes)');
  });
});
