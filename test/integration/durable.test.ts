/**
 * Durable runs through the API and the CLI, on real SQLite files: a resume continues where the
 * journal stopped (budgets included, reviews and planners too); a journal that cannot write
 * stops the run cleanly and the next resume works; keys never reach the journal, the events,
 * the report or any output.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocketServer } from 'ws';
import { createSwarm, startSim, StoreError, SqliteStore, type RunEvent, type SimServer } from '../../src/index.js';

const exec = promisify(execFile);
let dir: string;
let sim: SimServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-durable-'));
  sim = await startSim({ seed: 9, latency: { ttftMs: 15 } });
});
afterAll(() => sim.close());

const chain = (n: number, extra: Record<string, unknown> = {}) => ({
  providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'DURABLE_KEY' }] } },
  models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64, price: { input: 1, output: 5 } } },
  defaults: { maxInFlight: 4 },
  tasks: Array.from({ length: n }, (_, i) => ({ id: `t${i}`, model: 'm', deps: i >= 4 ? [`t${i - 4}`] : [], prompt: `step ${i}` })),
  ...extra,
});
const env = { DURABLE_KEY: 'sk-durable-secret-value' };

describe('resume through the API', () => {
  it('a journal that fills up stops the run with a clear error; committed work is intact and the resume finishes it', async () => {
    const file = join(dir, 'full.db');
    // The failure surfaces inside an agent's report: the run's cancel must not nest the
    // supervisor's transition in that action (XState's development build warns when it does).
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const store = new SqliteStore(file);
    const swarm = createSwarm({ env, store, seed: 1 });
    const run = swarm.run(chain(60));
    let completed = 0;
    run.events.on('task:completed', () => {
      // A real SQLITE_FULL: the database may not grow past the pages it has now.
      if (++completed === 12) {
        const pages = store.database.pragma('page_count') as number;
        store.database.pragma(`max_page_count = ${pages}`);
      }
    });
    const error = await run.result.then(
      () => undefined,
      (e: unknown) => e,
    );
    await swarm.close();
    expect(warn.mock.calls.map((c) => String(c[0])).filter((w) => w.includes('should not call'))).toEqual([]);
    warn.mockRestore();
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).message).toContain('SQLITE_FULL');
    expect((error as StoreError).message).toContain(file);
    store.close();

    // What was committed is consistent: every task the journal calls completed has its output.
    const check = new SqliteStore(file);
    expect(check.database.pragma('integrity_check')).toBe('ok');
    const rows = check.loadTasks(run.id);
    const done = rows.filter((r) => r.status === 'completed');
    expect(done.length).toBeGreaterThanOrEqual(10);
    expect(done.length).toBeLessThan(60);
    for (const r of done) expect(r.output).toBeTruthy();
    expect(check.getRun(run.id)!.tasksDone).toBe(done.length);
    check.close();

    const again = createSwarm({ env, store: file, seed: 1 });
    const resumed = again.resume(run.id);
    const started: string[] = [];
    resumed.events.on('task:started', (e) => started.push(e.taskId));
    const result = await resumed.result;
    await again.close();
    expect(result.status).toBe('completed');
    expect(Object.values(result.tasks).filter((t) => t.status === 'completed')).toHaveLength(60);
    // Nothing completed before was run again.
    for (const r of done) expect(started).not.toContain(r.taskId);
    // And the outputs are those of a run that was never interrupted.
    const clean = createSwarm({ env, store: false, seed: 1 });
    const reference = await clean.run(chain(60)).result;
    await clean.close();
    for (const [id, t] of Object.entries(reference.tasks)) expect(result.tasks[id]!.output, id).toBe(t.output);
  });

  it('budgets continue from what was spent: the resumed run stops at the same budget', async () => {
    const file = join(dir, 'budget.db');
    // Each call costs about $0.00033 (64 output tokens at $5/M plus input): 40 of them ~$0.013.
    const plan = chain(40, { budget: { usd: 0.006 } });
    const swarm = createSwarm({ env, store: file, seed: 2 });
    const run = swarm.run(plan);
    let n = 0;
    run.events.on('task:completed', () => {
      if (++n === 6) run.cancel('stop halfway');
    });
    const first = await run.result;
    await swarm.close();
    expect(first.status).toBe('cancelled');
    const spentBefore = first.totals.costUsd!;

    const again = createSwarm({ env, store: file, seed: 2 });
    const result = await again.resume(run.id).result;
    await again.close();
    expect(result.status).toBe('budget_exceeded');
    const total = Object.values(result.tasks).reduce((s, t) => s + (t.costUsd ?? 0), 0);
    expect(total).toBeGreaterThan(spentBefore);
    expect(total).toBeLessThanOrEqual(0.006);
  });

  it('a review loop and a planner interrupted midway finish as an uninterrupted run would', async () => {
    const file = join(dir, 'kinds.db');
    const subtasks = JSON.stringify([
      { id: 'a', model: 'm', prompt: 'part a' },
      { id: 'b', model: 'm', deps: ['a'], prompt: 'part b' },
    ]);
    const plan = {
      providers: { p: { type: 'sim', sim: { ttftMs: 20 } } },
      models: { m: { provider: 'p', model: 'sim-m' } },
      tasks: [
        { id: 'draft', model: 'm', prompt: 'draft it' },
        { id: 'check', kind: 'review', reviews: 'draft', maxRounds: 3, model: 'm', prompt: 'review [[sim:reply REVISE: more detail]]' },
        { id: 'plan', kind: 'plan', model: 'm', prompt: `plan [[sim:reply ${subtasks} ]]` },
        { id: 'end', model: 'm', deps: ['plan', 'draft'], prompt: 'wrap up' },
      ],
    };
    const swarm = createSwarm({ store: file, seed: 3 });
    const run = swarm.run(plan);
    run.events.on('task:reviewed', (e) => {
      if (e.round === 1) run.cancel('interrupted after the first review');
    });
    await run.result;
    await swarm.close();

    const again = createSwarm({ store: file, seed: 3 });
    const resumed = again.resume(run.id);
    const events: RunEvent[] = [];
    resumed.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await resumed.result;
    await again.close();
    expect(result.status).toBe('completed');
    expect(result.tasks.check!.review).toEqual({ target: 'draft', rounds: 3, approved: false });
    expect(result.tasks.draft!.revisions).toBe(2);
    expect(result.tasks.plan!.subtasks).toEqual(['plan/a', 'plan/b']);
    expect(result.tasks['plan/b']!.status).toBe('completed');
    // The resumed life made only the reviews that were left (rounds 2 and 3).
    expect(events.filter((e) => e.type === 'task:reviewed').map((e) => (e as { round: number }).round)).toEqual([2, 3]);
  });

  it('retries spent before the interruption stay spent: a failing task gets no fresh budget from a resume', async () => {
    const file = join(dir, 'retries.db');
    const slow = await startSim({ latency: { ttftMs: 300 } });
    try {
      const plan = {
        providers: { p: { type: 'anthropic', baseURL: slow.url, keys: [{ env: 'DURABLE_KEY' }] } },
        models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 16 } },
        // Every attempt passes its 50 ms deadline: 1 + 2 retries, then the task fails.
        tasks: [{ id: 'late', model: 'm', prompt: 'too slow', timeoutMs: 50, maxRetries: 2 }],
      };
      // Attempts that ran to a failure (the one the cancel cuts short is not one of them).
      let failures = 0;
      const swarm = createSwarm({ env, store: file, backoff: { baseMs: 1, maxMs: 2 } });
      const run = swarm.run(plan);
      run.events.on('task:failed', (e) => {
        failures += 1;
        if (e.willRetry) run.cancel('interrupted after one failed attempt');
      });
      await run.result;
      await swarm.close();
      const again = createSwarm({ env, store: file, backoff: { baseMs: 1, maxMs: 2 } });
      const resumed = again.resume(run.id);
      resumed.events.on('task:failed', () => void (failures += 1));
      const result = await resumed.result;
      await again.close();
      expect(result.tasks.late!.status).toBe('failed');
      // 1 + maxRetries attempts in all, as without the interruption (a fresh budget would make 4).
      expect(failures).toBe(3);
    } finally {
      await slow.close();
    }
  });

  it('resuming a finished run gives its result; an unknown run is a clear error', async () => {
    const file = join(dir, 'finished.db');
    const swarm = createSwarm({ env, store: file });
    const run = swarm.run(chain(4));
    const first = await run.result;
    const again = swarm.resume(run.id);
    expect(await again.result).toEqual(first);
    expect(() => swarm.resume('nope')).toThrow(/^no run nope in /);
    expect(swarm.runs().map((r) => [r.id, r.status, r.tasksDone])).toEqual([[run.id, 'completed', 4]]);
    await swarm.close();
  });
});

describe('a run refused at start', () => {
  it('is journaled as failed with its reason, not left to be listed as interrupted; a resume says it never ran', async () => {
    const file = join(dir, 'refused.db');
    const plan = {
      providers: { p: { type: 'sim' } },
      models: { m: { provider: 'p', model: 'sim-fast', maxTokens: 16 } },
      tools: { servers: { gh: { command: join(dir, 'no-such-server') } } },
      tasks: [{ id: 'a', model: 'm', prompt: 'hi', tools: ['gh.search'] }],
    };
    const swarm = createSwarm({ env, store: file });
    const run = swarm.run(plan);
    const error = (await run.result.then(
      () => undefined,
      (e: unknown) => e,
    )) as Error & { code?: string };
    expect(error.message).toContain('tools.servers.gh: cannot connect');
    expect(swarm.runs()).toEqual([expect.objectContaining({ id: run.id, status: 'failed', tasksDone: 0 })]);
    await swarm.close();

    const store = new SqliteStore(file);
    expect(store.getRun(run.id)).toMatchObject({
      status: 'failed',
      result: { refusedAtStart: { code: error.code, message: expect.stringContaining('tools.servers.gh: cannot connect') } },
    });
    expect(store.isHeld(run.id)).toBe(false);
    store.close();
    const again = createSwarm({ env, store: file });
    expect(() => again.resume(run.id)).toThrow(new RegExp(`run ${run.id} was refused at start and never ran \\(${error.code}: `));
    await again.close();
  });
});

describe('the CLI', () => {
  async function cli(args: string[], extraEnv: Record<string, string> = {}) {
    try {
      const { stdout, stderr } = await exec(process.execPath, ['bin/swarmstate.js', ...args], { timeout: 170_000, env: { ...process.env, SWARMSTATE_STORE: '', ...env, ...extraEnv } });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  it('a read-only journal file is refused before anything runs (exit 4, a clear message)', async () => {
    const file = join(dir, 'readonly.db');
    new SqliteStore(file).close();
    chmodSync(file, 0o444);
    writeFileSync(join(dir, 'ro-plan.json'), JSON.stringify(chain(3)));
    const before = sim.stats().requests;
    const r = await cli(['run', join(dir, 'ro-plan.json'), '--store', file]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(file);
    expect(r.stderr).toMatch(/read-only|READONLY/i);
    expect(sim.stats().requests).toBe(before);
  });

  it('no key reaches the journal, the events, the report, the inspector or any output', async () => {
    const inline = 'sk-inline-SECRET-4242424242';
    const fromEnv = 'sk-env-SECRET-1717171717';
    const wrong = 'sk-revoked-SECRET-9999999999';
    const guarded = await startSim({ keys: { [inline]: {}, [fromEnv]: {} } });
    try {
      const plan = {
        providers: {
          a: { type: 'anthropic', baseURL: guarded.url, keys: [inline, { env: 'SECRET_KEY' }] },
          // A key the server refuses: its 401 goes through the error paths.
          b: { type: 'openai', baseURL: `${guarded.url}/v1`, keys: [wrong] },
        },
        models: { m: { provider: 'a', model: 'claude-haiku-4-5' }, bad: { provider: 'b', model: 'gpt-x' } },
        tools: { servers: { counter: { command: process.execPath, args: [resolve('test/fixtures/mcp/side-effect-server.mjs')], env: { COUNTER_FILE: join(dir, 'secret-bumps.log'), API_TOKEN: inline } } } },
        tasks: [
          ...Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `task ${i} mentions nothing secret` })),
          { id: 'tool', model: 'm', tools: ['counter.bump'], prompt: 'bump [[sim:tool counter__bump {"id":"x"}]]' },
          { id: 'refused', model: 'bad', prompt: 'this key is refused' },
        ],
      };
      const planFile = join(dir, 'secret-plan.json');
      writeFileSync(planFile, JSON.stringify(plan));
      const db = join(dir, 'secret.db');
      const events = join(dir, 'secret-events.ndjson');
      const report = join(dir, 'secret-report.html');
      const outputs: string[] = [];
      // The inspector's messages too: every actor's snapshots and events, over a WebSocket.
      const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
      await new Promise<void>((r) => wss.once('listening', () => r()));
      const inspected: string[] = [];
      wss.on('connection', (socket) => socket.on('message', (data) => inspected.push(data.toString())));
      const inspectUrl = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
      const run = await cli(['run', planFile, '--store', db, '--events', events, '--report', report, '--inspect', '--inspect-url', inspectUrl], { SECRET_KEY: fromEnv });
      await new Promise<void>((r) => wss.close(() => r()));
      expect(inspected.length).toBeGreaterThan(50);
      outputs.push(run.stdout, run.stderr, ...inspected);
      expect(run.code).toBe(1); // partial: the refused key's task failed
      const runs = await cli(['runs', '--store', db, '--json']);
      outputs.push(runs.stdout, runs.stderr);
      const runId = (JSON.parse(runs.stdout) as { id: string }[])[0]!.id;
      const resume = await cli(['resume', runId, '--store', db, '--json']);
      outputs.push(resume.stdout, resume.stderr);

      const files = readdirSync(dir).filter((f) => f.startsWith('secret.db')).map((f) => readFileSync(join(dir, f)));
      expect(files.length).toBeGreaterThanOrEqual(1);
      const haystacks = [...files.map((b) => b.toString('latin1')), readFileSync(events, 'utf8'), readFileSync(report, 'utf8'), ...outputs];
      for (const secret of [inline, fromEnv, wrong]) {
        for (const text of haystacks) expect(text.includes(secret)).toBe(false);
      }
      // The journal does know the keys by id and the run by its redacted plan.
      const store = new SqliteStore(db);
      expect(JSON.stringify(store.getRun(runId)!.plan)).toMatch(/\[redacted [0-9a-f]{8}\]/);
      store.close();
    } finally {
      await guarded.close();
    }
  });
});
