/**
 * Vitest global setup: the tests leave no journal behind. It records the clone's own
 * `.swarmstate/` (each file's size and content hash) before the suite, and its teardown fails the
 * run when a test created, changed or removed a file there: a run that journaled to the working
 * directory's default `.swarmstate/runs.db` instead of a store of its own.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The clone's root: this file is test/setup/ in it. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

type FileState = { size: number; hash: string };

/** The files of `<root>/.swarmstate/` by name (none when the folder is absent). */
function journalState(root: string): Map<string, FileState> {
  const folder = path.join(root, '.swarmstate');
  const state = new Map<string, FileState>();
  if (!fs.existsSync(folder)) return state;
  for (const name of fs.readdirSync(folder).sort()) {
    const file = path.join(folder, name);
    const stat = fs.statSync(file);
    const hash = stat.isFile() ? createHash('sha256').update(fs.readFileSync(file)).digest('hex') : 'folder';
    state.set(name, { size: stat.size, hash });
  }
  return state;
}

/** What changed between two states, one clause per file: `runs.db: 3 -> 7 bytes`. */
function changes(before: Map<string, FileState>, after: Map<string, FileState>): string[] {
  const out: string[] = [];
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const was = before.get(name);
    const now = after.get(name);
    if (was === undefined) out.push(`${name}: created, ${now!.size} bytes`);
    else if (now === undefined) out.push(`${name}: removed`);
    else if (was.size !== now.size) out.push(`${name}: ${was.size} -> ${now.size} bytes`);
    else if (was.hash !== now.hash) out.push(`${name}: rewritten, ${now.size} bytes`);
  }
  return out;
}

/** Records `<root>/.swarmstate/` now; the function returned throws if it changed since. */
export function watchJournal(root: string): () => void {
  const before = journalState(root);
  return () => {
    const changed = changes(before, journalState(root));
    if (changed.length === 0) return;
    throw new Error(
      `the tests changed ${path.join(root, '.swarmstate')}${path.sep} (${changed.join('; ')}): a test wrote the clone's own run journal; ` +
        'give it a store of its own (a temp file, "memory" or store: false)',
    );
  };
}

export default function setup(): () => void {
  const check = watchJournal(ROOT);
  return () => {
    try {
      check();
    } catch (error) {
      // Vitest only logs a teardown's error ("error during close"): the exit code is what fails the run.
      process.exitCode = 1;
      throw error;
    }
  };
}
