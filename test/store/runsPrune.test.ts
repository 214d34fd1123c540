/**
 * `swarmstate runs prune` as a user runs it: the built CLI (npm run build first) as a child
 * process on a real SQLite journal in a temp dir. It says what it removes (or would), with the
 * count and the bytes; it never removes a run a live process holds or one interrupted midway;
 * VACUUM shrinks the file; a bad flag is one line and exit 2. And the duration parser (pure).
 */
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/index.js';
import { HOST } from '../../src/store/shared.js';
import { parseDuration } from '../../src/cli/commands.js';
import { ROOT, tempDir, usage } from './helpers.js';

const exec = promisify(execFile);
const BIN = path.join(ROOT, 'bin/swarmstate.js');
const DAY = 86_400_000;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

async function cli(args: string[], cwd = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], { cwd, env: { ...process.env, SWARMSTATE_STORE: '' } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const hash = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/**
 * A journal at real times, newest first: recent (1 h), held (9 days, running, its lock held by
 * this live process, beating until tomorrow), old2 (8 days, 500 KB of output), dead (9.5 days,
 * running, no holder: interrupted), old1 (10 days, 500 KB).
 */
function journal(): string {
  const dir = tempDir();
  dirs.push(dir);
  const file = path.join(dir, 'runs.db');
  const now = Date.now();
  const store = new SqliteStore(file, { now: () => now + DAY });
  const run = (id: string, ageMs: number, status: 'completed' | 'running', output = '') => {
    store.createRun({ id, plan: { tasks: [{ id: 't' }] }, options: {}, tasksTotal: 1, createdAt: now - ageMs });
    if (output !== '') store.taskCompleted(id, 't', 1, output, usage(1, 1), null, 1, 0, now - ageMs);
    if (status !== 'running') store.setRunStatus(id, status);
  };
  run('old1', 10 * DAY, 'completed', 'a'.repeat(500_000));
  run('dead', 9.5 * DAY, 'running');
  run('held', 9 * DAY, 'running');
  store.acquireLock('held', { id: 'test', pid: process.pid, host: HOST });
  run('old2', 8 * DAY, 'completed', 'b'.repeat(500_000));
  run('recent', 3_600_000, 'completed');
  store.close();
  return file;
}

const listed = async (file: string) => (JSON.parse((await cli(['runs', '--store', file, '--json'])).stdout) as Array<{ id: string }>).map((r) => r.id);

describe('swarmstate runs prune', () => {
  it('--dry-run says what it would remove, with the count and bytes, and what it keeps; the file is left as it was', async () => {
    const file = journal();
    const before = hash(file);
    const r = await cli(['runs', 'prune', '--older-than', '7d', '--dry-run', '--store', file]);
    expect([r.code, r.stderr]).toEqual([0, '']);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('would remove 2 runs (about 1.0 MB of rows; the journal is not changed):');
    expect(lines[1]).toMatch(/^ {2}old2 +completed +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +500\.3 KB$/);
    expect(lines[2]).toMatch(/^ {2}old1 +completed +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +500\.3 KB$/);
    expect(lines.slice(3)).toEqual([
      'kept 1 live run (a running process holds it): held',
      'kept 1 interrupted run (swarmstate resume <runId> continues it): dead',
    ]);
    expect(hash(file)).toBe(before);
    expect(await listed(file)).toEqual(['recent', 'old2', 'held', 'dead', 'old1']);
  });

  it('removes them, VACUUMs, and says the bytes the file gave back', async () => {
    const file = journal();
    const r = await cli(['runs', 'prune', '--older-than', '7d', '--store', file]);
    expect([r.code, r.stderr]).toEqual([0, '']);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('removed 2 runs (about 1.0 MB of rows):');
    expect(lines[3]!.startsWith(`journal ${file}: `)).toBe(true);
    expect(lines[3]!.slice(`journal ${file}: `.length)).toMatch(/^1\.\d MB -> \d+\.\d KB after VACUUM \(freed (1\.0 MB|9\d\d\.\d KB)\)$/);
    expect(fs.statSync(file).size).toBeLessThan(100_000);
    expect(await listed(file)).toEqual(['recent', 'held', 'dead']);
    const json = JSON.parse((await cli(['runs', 'prune', '--keep', '1', '--store', file, '--json'])).stdout) as Record<string, unknown>;
    expect(json).toEqual({ dryRun: false, removed: [], bytes: 0, live: ['held'], interrupted: ['dead'], fileBytes: expect.any(Object) });
    expect(await listed(file)).toEqual(['recent', 'held', 'dead']);
  });

  it('--keep n keeps the n newest; nothing to remove says so', async () => {
    const file = journal();
    const kept = await cli(['runs', 'prune', '--keep', '3', '--store', file]);
    expect(kept.stdout.split('\n')[0]).toBe('removed 1 run (about 500.3 KB of rows):');
    expect(await listed(file)).toEqual(['recent', 'old2', 'held', 'dead']);
    const none = await cli(['runs', 'prune', '--older-than', '30d', '--store', file]);
    expect([none.code, none.stdout]).toEqual([0, 'nothing to remove: no run is older than 30d\n']);
  });

  it('refuses a bad command line in one line, exit 2, before it opens anything', async () => {
    const file = journal();
    const before = hash(file);
    const cases: Array<[string[], string]> = [
      [['runs', 'prune'], 'swarmstate runs: prune needs --older-than <duration> or --keep <n> (see swarmstate runs --help)'],
      [['runs', 'prune', '--older-than', '7'], 'swarmstate runs: --older-than must be a duration like 30m, 12h or 7d (got "7") (see swarmstate runs --help)'],
      [['runs', 'prune', '--older-than=-1d'], 'swarmstate runs: --older-than must be a duration like 30m, 12h or 7d (got "-1d") (see swarmstate runs --help)'],
      [['runs', 'prune', '--keep', '1.5'], 'swarmstate runs: --keep must be a whole number, 0 or more (got "1.5") (see swarmstate runs --help)'],
      [['runs', 'prune', '--keep', '0x10'], 'swarmstate runs: --keep must be a whole number, 0 or more (got "0x10") (see swarmstate runs --help)'],
      [['runs', '--keep', '3'], 'swarmstate runs: --keep is an option of swarmstate runs prune (see swarmstate runs --help)'],
      [['runs', '--dry-run'], 'swarmstate runs: --dry-run is an option of swarmstate runs prune (see swarmstate runs --help)'],
      [['runs', 'purge'], 'swarmstate runs: unexpected argument "purge" (see swarmstate runs --help)'],
      [['runs', 'prune', '--keep', '1', '--store', 'memory'], 'swarmstate runs: a journal kept in memory ends with its process: there is nothing to prune (see swarmstate runs --help)'],
    ];
    for (const [args, line] of cases) {
      const r = await cli([...args, ...(args.includes('--store') ? [] : ['--store', file])]);
      expect([args, r.code, r.stderr, r.stdout]).toEqual([args, 2, `${line}\n`, '']);
    }
    const missing = await cli(['runs', 'prune', '--keep', '1', '--store', path.join(path.dirname(file), 'nope.db')]);
    expect([missing.code, missing.stderr]).toEqual([2, `swarmstate: no run journal at ${path.join(path.dirname(file), 'nope.db')} (check --store or $SWARMSTATE_STORE)\n`]);
    expect(fs.existsSync(path.join(path.dirname(file), 'nope.db'))).toBe(false);
    expect(hash(file)).toBe(before);
  });

  it('--help shows prune', async () => {
    const r = await cli(['runs', 'prune', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('swarmstate runs prune (--older-than <duration> | --keep <n>) [--dry-run] [--store <file>] [--json]');
  });
});

describe('parseDuration', () => {
  it('reads whole numbers of s, m, h, d and w, and nothing else', () => {
    expect(['30s', '30m', '12h', '7d', '2w', '0m'].map(parseDuration)).toEqual([30_000, 1_800_000, 43_200_000, 604_800_000, 1_209_600_000, 0]);
    for (const bad of ['7', 'd', '7 d', '1.5h', '-1d', '7D', '0x10d', '1e3m', '', '7dd', '99999999999999999999d']) expect([bad, parseDuration(bad)]).toEqual([bad, undefined]);
  });
});
