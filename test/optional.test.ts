/**
 * Optional packages, really absent: real child processes (the CLI, or a script on the built
 * package) in which a preload (fixtures/hide-packages.cjs) makes them look uninstalled to both
 * require() and import. The feature that needs one fails at once, with code
 * OPTIONAL_PACKAGE_MISSING and what to install; everything else runs without them, and
 * `import 'swarmstate'` loads none of them.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './store/helpers.js';

const exec = promisify(execFile);
const BIN = join(ROOT, 'bin/swarmstate.js');
const HIDE = join(ROOT, 'test/fixtures/hide-packages.cjs');
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-optional-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PLAN = join(dir, 'plan.json');
writeFileSync(PLAN, JSON.stringify({
  providers: { s: { type: 'sim' } },
  models: { m: { provider: 's', model: 'sim-fast', maxTokens: 16 } },
  tasks: [{ id: 'a', model: 'm', prompt: 'hi' }],
}));

/** Runs node with `hidden` packages hidden; never throws, gives the exit code and the output. */
async function node(args: string[], hidden: string[], cwd = dir): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, SWARMSTATE_TEST_HIDE: hidden.join(','), SWARMSTATE_STORE: '', SWARMSTATE_SQLITE: '' };
  try {
    const { stdout, stderr } = await exec(process.execPath, ['--require', HIDE, ...args], { cwd, env });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('without the optional packages', () => {
  it('run --redis and worker say to install bullmq and ioredis, before connecting to anything', async () => {
    for (const args of [['run', PLAN, '--redis', 'redis://127.0.0.1:1', '--store', 'memory'], ['worker', '--redis', 'redis://127.0.0.1:1']]) {
      const r = await node([BIN, ...args], ['bullmq', 'ioredis']);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/needs the optional packages bullmq and ioredis, not installed here: npm install bullmq ioredis/);
      expect(r.stderr).not.toContain('connecting to');
      // Said once: not `swarmstate: swarmstate worker needs ...`.
      expect(r.stderr).not.toMatch(/swarmstate: swarmstate/);
    }
  });

  it('--inspect says to install @statelyai/inspect; the same run without it completes', async () => {
    const r = await node([BIN, 'run', PLAN, '--inspect', '--store', 'memory', '--quiet'], ['@statelyai/inspect', 'bullmq', 'ioredis']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--inspect needs the optional package @statelyai/inspect, not installed here: npm install @statelyai/inspect');
    const plain = await node([BIN, 'run', PLAN, '--store', 'memory', '--json'], ['@statelyai/inspect', 'bullmq', 'ioredis']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(JSON.parse(plain.stdout).status).toBe('completed');
  });

  it('the API: createSwarm({ redis }) throws OPTIONAL_PACKAGE_MISSING; import loads no optional package', async () => {
    const script = `
      import { createRequire } from 'node:module';
      const { createSwarm } = await import(${JSON.stringify(join(ROOT, 'dist/src/index.js'))});
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((f) => /node_modules\\/(bullmq|ioredis|better-sqlite3|@statelyai)\\//.test(f));
      let thrown;
      try { createSwarm({ redis: 'redis://127.0.0.1:1', store: false }); } catch (error) { thrown = { code: error.code, name: error.name, message: error.message }; }
      console.log(JSON.stringify({ loaded, thrown }));
    `;
    const r = await node(['--input-type=module', '-e', script], ['bullmq', 'ioredis']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { loaded: string[]; thrown: { code: string; name: string; message: string } };
    expect(out.loaded).toEqual([]);
    expect(out.thrown).toMatchObject({ code: 'OPTIONAL_PACKAGE_MISSING', name: 'MissingPackageError' });
    expect(out.thrown.message).toContain('npm install bullmq ioredis');
  });

  it('without better-sqlite3: the journal runs on node:sqlite where Node has it, else says what to install', async () => {
    const cwd = mkdtempSync(join(dir, 'journal-'));
    const r = await node([BIN, 'run', PLAN, '--json'], ['better-sqlite3'], cwd);
    const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
    if (major > 22 || (major === 22 && minor >= 13)) {
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).status).toBe('completed');
      expect(existsSync(join(cwd, '.swarmstate', 'runs.db'))).toBe(true);
      expect(r.stderr).not.toContain('ExperimentalWarning');
    } else {
      expect(r.code).toBe(4);
      expect(r.stderr).toContain('no SQLite driver can be loaded');
      expect(r.stderr).toContain('npm install better-sqlite3');
      expect(r.stderr).toContain('--store memory');
    }
  });
});
