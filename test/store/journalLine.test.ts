/**
 * The line a run says on a terminal about the default journal: where it is, how big, and how to
 * make it smaller. The text (src/cli/paths.ts) on a folder of its own; then the built CLI (npm
 * run build first) on a real terminal (a pseudo-terminal from util-linux `script`) and on a pipe.
 */
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { journalLine } from '../../src/cli/paths.js';
import { ROOT, tempDir } from './helpers.js';

const exec = promisify(execFile);
const BIN = path.join(ROOT, 'bin/swarmstate.js');
const PLAN = path.join(ROOT, 'examples/plans/hello.json');
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir();
  dirs.push(d);
  return d;
}

const tty = { isTTY: true };

describe('journalLine', () => {
  it('names the default journal and its size (with its WAL) on a terminal', () => {
    const cwd = dir();
    fs.mkdirSync(path.join(cwd, '.swarmstate'));
    fs.writeFileSync(path.join(cwd, '.swarmstate', 'runs.db'), Buffer.alloc(31_000_000));
    fs.writeFileSync(path.join(cwd, '.swarmstate', 'runs.db-wal'), Buffer.alloc(200_000));
    expect(journalLine(undefined, tty, cwd)).toBe('journal: .swarmstate/runs.db (31.2 MB; swarmstate runs prune --help)\n');
  });

  it('says nothing off a terminal, for a journal chosen on purpose (--store, $SWARMSTATE_STORE), or when there is none', () => {
    const cwd = dir();
    fs.mkdirSync(path.join(cwd, '.swarmstate'));
    fs.writeFileSync(path.join(cwd, '.swarmstate', 'runs.db'), 'x');
    expect(journalLine(undefined, {}, cwd)).toBeUndefined();
    expect(journalLine(undefined, { isTTY: false }, cwd)).toBeUndefined();
    expect(journalLine('runs.db', tty, cwd)).toBeUndefined();
    expect(journalLine('memory', tty, cwd)).toBeUndefined();
    expect(journalLine(undefined, tty, dir())).toBeUndefined();
  });
});

/** util-linux `script`: a pseudo-terminal for the child's stdin, stdout and stderr. */
const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('a run of the CLI', () => {
  it.skipIf(!hasScript)('on a terminal says the journal line once, after the run, with the journal it wrote', async () => {
    const cwd = dir();
    const command = [process.execPath, BIN, 'run', PLAN].map((a) => `'${a}'`).join(' ');
    const { stdout } = await exec('script', ['-qec', command, '/dev/null'], { cwd, env: { ...process.env, SWARMSTATE_STORE: '', NO_COLOR: '1', COLUMNS: '120' }, timeout: 170_000 });
    // The live progress view's control sequences (clear below, show the cursor) go out around it.
    const lines = stdout.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').split(/\r?\n/).filter((l) => l.includes('journal: '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^journal: \.swarmstate\/runs\.db \(\d+\.\d KB; swarmstate runs prune --help\)$/);
    expect(fs.existsSync(path.join(cwd, '.swarmstate', 'runs.db'))).toBe(true);
  });

  it('off a terminal says nothing of it', async () => {
    const cwd = dir();
    const { stderr } = await exec(process.execPath, [BIN, 'run', PLAN], { cwd, env: { ...process.env, SWARMSTATE_STORE: '' }, timeout: 170_000 });
    expect(stderr).not.toContain('journal: ');
    expect(stderr).toContain('resume');
  });
});
