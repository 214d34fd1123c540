/**
 * The files a command reads and writes: which journal `--store` means and how big it is, and the checks that keep
 * an output flag from destroying an input (`--events plan.json` would empty the plan before the
 * run read it again on a resume) and a read-only command from creating a journal.
 */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { DEFAULT_DB_PATH } from '../store/index.js';

/** What `--store` (else $SWARMSTATE_STORE, else the default) names, as `createSwarm` reads it. */
export function storeSpecOf(flag: string | undefined, env: Record<string, string | undefined> = process.env): string | undefined {
  return flag ?? (env.SWARMSTATE_STORE || undefined);
}

/** The journal's file, or undefined for a journal kept in memory (nothing to resume from). */
export function storeFileOf(spec: string | undefined): string | undefined {
  if (spec === 'memory' || spec === ':memory:') return undefined;
  return resolve(spec ?? DEFAULT_DB_PATH);
}

/** One file by two names: the same path, or the same inode (a link, `./x` and `x`). */
export function sameFile(a: string, b: string): boolean {
  if (resolve(a) === resolve(b)) return true;
  try {
    const [sa, sb] = [statSync(a), statSync(b)];
    return sa.dev === sb.dev && sa.ino === sb.ino;
  } catch {
    return false;
  }
}

/**
 * Why the output flags cannot be used, or undefined when they can: an output that is the plan
 * file, the journal, or the other output.
 */
export function outputConflict(outputs: { flag: string; path: string | undefined }[], inputs: { what: string; path: string | undefined }[]): string | undefined {
  const given = outputs.filter((o): o is { flag: string; path: string } => o.path !== undefined);
  for (const [i, out] of given.entries()) {
    for (const input of inputs) {
      if (input.path !== undefined && sameFile(out.path, input.path)) {
        return `${out.flag} ${out.path} is ${input.what}: writing there would destroy it; choose another file`;
      }
    }
    const other = given.slice(i + 1).find((o) => sameFile(o.path, out.path));
    if (other) return `${out.flag} and ${other.flag} name the same file (${out.path}): choose two files`;
  }
  return undefined;
}

/**
 * A read-only command (`runs`, `resume`) must not create a journal where none is: a typo in
 * `--store` would otherwise leave folders and an empty database behind and answer "no runs".
 */
export function missingJournal(spec: string | undefined): string | undefined {
  const file = storeFileOf(spec);
  return file !== undefined && !existsSync(file) ? file : undefined;
}

/** A size in bytes for people: `31.2 MB` (decimal units, one decimal). */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 999.95 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** The journal file's size on disk with its WAL (where SQLite keeps the latest commits until a checkpoint). */
export function journalBytes(file: string): number {
  let bytes = 0;
  for (const end of ['', '-wal']) bytes += statSync(file + end, { throwIfNoEntry: false })?.size ?? 0;
  return bytes;
}

/**
 * What a run says once on a terminal (stderr a TTY) about the default journal, which grows with
 * every run: where it is, its size, and how to make it smaller. Nothing for a journal named on
 * purpose (--store, $SWARMSTATE_STORE) or when there is none.
 */
export function journalLine(spec: string | undefined, stderr: { isTTY?: boolean }, cwd: string = process.cwd()): string | undefined {
  if (spec !== undefined || stderr.isTTY !== true) return undefined;
  const file = resolve(cwd, DEFAULT_DB_PATH);
  if (!existsSync(file)) return undefined;
  return `journal: ${DEFAULT_DB_PATH} (${formatBytes(journalBytes(file))}; swarmstate runs prune --help)\n`;
}
