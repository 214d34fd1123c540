/**
 * Distributed runs with a real Redis (a private redis-server per test file, no persistence) and
 * real processes: a coordinator (`swarmstate run --redis`) and workers (`swarmstate worker`),
 * against the simulated provider in this process, which enforces per-key limits and logs every
 * request with the task it came from (`x-swarmstate-call`). Skipped, saying so, when redis-server is
 * not installed; `.ci/run` installs it and fails the file if it is missing there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { journaledDone } from '../helpers/journal.js';
import { skipWithout } from '../helpers/programs.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const BIN = resolve('bin/swarmstate.js');
const KEYS = { K1: 'sk-dist-one-111', K2: 'sk-dist-two-222', K3: 'sk-dist-three-333' };
const RPM = 200;
const skip = skipWithout('redis-server', 'the distributed tests', 'apt-get install -y redis-server');

let redis: TestRedis;
let dir: string;
const processes: ChildProcess[] = [];

beforeAll(async () => {
  if (skip) return;
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-dist-'));
});
afterEach(() => {
  for (const p of processes.splice(0)) if (p.exitCode === null) p.kill('SIGKILL');
});
afterAll(async () => {
  await redis?.close();
});

interface Proc {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>;
  stderr: () => string;
}

function spawnCli(args: string[]): Proc {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...KEYS, SWARMSTATE_STORE: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  processes.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((r) => child.on('close', (code, signal) => r({ code, signal, stdout, stderr })));
  return { child, done, stderr: () => stderr };
}

async function until(ok: () => boolean, what: string, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function workers(n: number, lockMs = 1000): Promise<Proc[]> {
  const started = Array.from({ length: n }, () => spawnCli(['worker', '--redis', redis.url, '--concurrency', '8', '--lock-ms', String(lockMs)]));
  await until(() => started.every((w) => w.stderr().includes('worker ready')), 'the workers');
  return started;
}

/** Stops workers politely and returns how many calls each made. */
async function stopWorkers(list: Proc[]): Promise<number[]> {
  for (const w of list) if (w.child.exitCode === null) w.child.kill('SIGTERM');
  const ends = await Promise.all(list.map((w) => w.done));
  return ends.map((e) => Number(/worker stopped: (\d+) calls/.exec(e.stderr)?.[1] ?? -1));
}

/** `layers` x `width` tasks, each after one or two of the layer before. */
function plan(sim: SimServer, name: string, layers: number, width: number) {
  const tasks = [];
  for (let l = 0; l < layers; l++) {
    for (let k = 0; k < width; k++) {
      const deps = l === 0 ? [] : [...new Set([`L${l - 1}.${k}`, `L${l - 1}.${(k * 7 + 3) % width}`])];
      tasks.push({ id: `L${l}.${k}`, model: 'm', deps, prompt: `${name} task ${l}.${k}` });
    }
  }
  const file = join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'K1' }, { env: 'K2' }, { env: 'K3' }], limits: { rpm: RPM } } },
      models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 32 } },
      defaults: { maxInFlight: 24 },
      tasks,
    }),
  );
  return { file, ids: tasks.map((t) => t.id) };
}

/** The simulator's answered requests per task (from the x-swarmstate-call header). */
function answeredPerTask(sim: SimServer): Map<string, number> {
  const per = new Map<string, number>();
  for (const entry of sim.stats().log) {
    if (!entry.call || entry.status !== 200 || entry.aborted) continue;
    const id = decodeURIComponent(entry.call.split(';')[0]!);
    per.set(id, (per.get(id) ?? 0) + 1);
  }
  return per;
}

// The server allows a minute's burst: a call queued for a worker reaches it later than its grant,
// by a varying delay, so against a one-second bucket a few would be refused (a 429 is a wait, and
// test/integration/pacing.test.ts covers that). Here the claim is the coordinator's count.
const simKeys = () => Object.fromEntries(Object.values(KEYS).map((k) => [k, { rpm: RPM, burst: { rpm: RPM } }]));

// Each test takes 10-25 s on an idle machine; a loaded one may need several times that.
describe.skipIf(skip)('distributed runs (BullMQ on Redis)', { timeout: 240_000 }, () => {
  it('500 tasks over 3 worker processes: each completes once, no key over its rpm', async () => {
    const sim = await startSim({ seed: 1, keys: simKeys(), latency: { ttftMs: [10, 40] } });
    try {
      const { file, ids } = plan(sim, 'five-hundred', 10, 50);
      const pool = await workers(3);
      const run = await spawnCli(['run', file, '--redis', redis.url, '--store', join(dir, 'five.db'), '--json']).done;
      expect(run.code, run.stderr).toBe(0);
      const result = JSON.parse(run.stdout) as { status: string; tasks: Record<string, { status: string }> };
      expect(result.status).toBe('completed');
      expect(Object.values(result.tasks).filter((t) => t.status === 'completed')).toHaveLength(500);
      // Each task's call was answered exactly once, whichever worker made it.
      const per = answeredPerTask(sim);
      expect(ids.every((id) => per.get(id) === 1)).toBe(true);
      // The keys: the coordinator's key actors hold every worker's calls to the limit, so the
      // server (which enforces it) refused none, and no key was used more than its rpm.
      const stats = sim.stats();
      expect(stats.byStatus[429] ?? 0).toBe(0);
      for (const key of Object.values(stats.byKey)) expect(key.requests).toBeLessThanOrEqual(RPM);
      const calls = await stopWorkers(pool);
      expect(calls.every((n) => n > 0)).toBe(true);
      expect(calls.reduce((a, b) => a + b, 0)).toBe(500);
    } finally {
      await sim.close();
    }
  });

  it('a worker killed with SIGKILL mid-run: its jobs go to the others, nothing lost or recorded twice', async () => {
    const sim = await startSim({ seed: 2, keys: simKeys(), latency: { ttftMs: [150, 250] } });
    try {
      const { file, ids } = plan(sim, 'worker-kill', 6, 30);
      const pool = await workers(3);
      const db = join(dir, 'worker-kill.db');
      const coordinator = spawnCli(['run', file, '--redis', redis.url, '--store', db, '--json']);
      await until(() => sim.stats().requests >= 40, 'calls under way');
      pool[0]!.child.kill('SIGKILL');
      const run = await coordinator.done;
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).status).toBe('completed');
      // Every task completed, once, on its first attempt: a dead worker's call is the same job,
      // run again by another worker (at most its 8 calls in flight answered twice).
      const store = new SqliteStore(db);
      const rows = store.loadTasks(store.listRuns()[0]!.id);
      store.close();
      expect(rows.filter((r) => r.status === 'completed')).toHaveLength(ids.length);
      expect(rows.every((r) => r.attempts === 1)).toBe(true);
      const per = answeredPerTask(sim);
      expect(ids.every((id) => (per.get(id) ?? 0) >= 1)).toBe(true);
      expect([...per.values()].filter((n) => n > 1).length).toBeLessThanOrEqual(8);
      const calls = await stopWorkers(pool.slice(1));
      expect(calls.every((n) => n > 0)).toBe(true);
    } finally {
      await sim.close();
    }
  });

  it('the coordinator killed and resumed: the run finishes from the journal, jobs already done are not run again', async () => {
    const sim = await startSim({ seed: 3, keys: simKeys(), latency: { ttftMs: [100, 200] } });
    try {
      const { file, ids } = plan(sim, 'coordinator-kill', 6, 30);
      const pool = await workers(2);
      const db = join(dir, 'coordinator-kill.db');
      const first = spawnCli(['run', file, '--redis', redis.url, '--store', db, '--json']);
      // Killed once its journal holds finished work: the answers the server counts may not
      // have reached the coordinator yet on a loaded machine.
      await until(() => journaledDone(db) >= 10, 'tasks journaled as done', 120_000);
      first.child.kill('SIGKILL');
      await first.done;
      const store = new SqliteStore(db);
      const runId = store.listRuns()[0]!.id;
      const doneBefore = store.getRun(runId)!.tasksDone;
      store.close();
      expect(doneBefore).toBeGreaterThan(0);
      expect(doneBefore).toBeLessThan(ids.length);
      const resumed = await spawnCli(['resume', runId, '--redis', redis.url, '--store', db, '--json']).done;
      expect(resumed.code, resumed.stderr).toBe(0);
      const result = JSON.parse(resumed.stdout) as { status: string; tasks: Record<string, { status: string }> };
      expect(result.status).toBe('completed');
      expect(Object.values(result.tasks).every((t) => t.status === 'completed')).toBe(true);
      // Not one call twice: the calls in flight when the coordinator died finished on the
      // workers, and the resumed coordinator found their jobs done (same content, same job id).
      const per = answeredPerTask(sim);
      expect(ids.every((id) => per.get(id) === 1)).toBe(true);
      expect(sim.stats().byStatus[200]).toBe(ids.length);
      await stopWorkers(pool);
    } finally {
      await sim.close();
    }
  });

  it('a worker started mid-run takes the calls that waited for one', async () => {
    const sim = await startSim({ seed: 5, keys: simKeys() });
    try {
      const { file, ids } = plan(sim, 'mid-run', 2, 4);
      // No worker yet: the coordinator's calls wait in the queue (however long the worker takes to start).
      const events = join(dir, 'mid-run.ndjson');
      const coordinator = spawnCli(['run', file, '--redis', redis.url, '--store', 'memory', '--json', '--events', events]);
      await until(() => existsSync(events) && readFileSync(events, 'utf8').includes('"task:started"'), 'the first attempt to start');
      expect(sim.stats().requests).toBe(0);
      const [late] = await workers(1);
      const run = await coordinator.done;
      expect(run.code, run.stderr).toBe(0);
      const result = JSON.parse(run.stdout) as { tasks: Record<string, { status: string }> };
      for (const id of ids) expect(result.tasks[id]?.status).toBe('completed');
      expect(await stopWorkers([late!])).toEqual([ids.length]);
    } finally {
      await sim.close();
    }
  });

  it('an attempt past its deadline cancels the worker\'s call', async () => {
    // The answer would take a minute: only the coordinator's deadline can end the call.
    const slow = await startSim({ seed: 5, keys: simKeys(), latency: { ttftMs: 60_000 } });
    try {
      const file = join(dir, 'deadline.json');
      writeFileSync(
        file,
        JSON.stringify({
          providers: { p: { type: 'anthropic', baseURL: slow.url, keys: [{ env: 'K1' }] } },
          models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 16 } },
          tasks: [{ id: 'late', model: 'm', prompt: 'too slow', timeoutMs: 3000, maxRetries: 0 }],
        }),
      );
      // The worker is ready first, so the deadline is not spent waiting for a process to start.
      const [worker] = await workers(1);
      const run = await spawnCli(['run', file, '--redis', redis.url, '--store', 'memory', '--json']).done;
      const result = JSON.parse(run.stdout) as { tasks: Record<string, { status: string; error?: { code: string } }> };
      expect(result.tasks.late).toMatchObject({ status: 'failed', error: { code: 'task_timeout' } });
      // The worker dropped the call when the coordinator gave up: the server saw it cut off
      // before its answer (the worker is still running, so nothing else cut it).
      await until(() => slow.stats().log.some((e) => e.aborted), 'the call to be cut off');
      expect(await stopWorkers([worker!])).toEqual([1]);
    } finally {
      await slow.close();
    }
  });

  it('a coordinator stopped with Ctrl-C mid-run resumes to completion (its cut-off calls are made again)', async () => {
    const sim = await startSim({ seed: 6, keys: simKeys(), latency: { ttftMs: [200, 300] } });
    try {
      const { file, ids } = plan(sim, 'ctrl-c', 4, 20);
      const pool = await workers(2);
      const db = join(dir, 'ctrl-c.db');
      const first = spawnCli(['run', file, '--redis', redis.url, '--store', db, '--json']);
      await until(() => sim.stats().requests >= 20, 'calls under way');
      first.child.kill('SIGINT');
      const stopped = await first.done;
      expect(stopped.code).toBe(1);
      expect(JSON.parse(stopped.stdout).status).toBe('cancelled');
      const store = new SqliteStore(db);
      const runId = store.listRuns()[0]!.id;
      store.close();
      const resumed = await spawnCli(['resume', runId, '--redis', redis.url, '--store', db, '--json']).done;
      expect(resumed.code, resumed.stderr).toBe(0);
      const result = JSON.parse(resumed.stdout) as { status: string; tasks: Record<string, { status: string }> };
      expect(result.status).toBe('completed');
      expect(Object.values(result.tasks).filter((t) => t.status === 'completed')).toHaveLength(ids.length);
      await stopWorkers(pool);
    } finally {
      await sim.close();
    }
  });

  it('refuses what cannot go to the workers: inline keys, inline tool server values, providers that are objects in code', async () => {
    const { createSwarm } = await import('../../src/index.js');
    const swarm = createSwarm({ redis: redis.url, store: false });
    try {
      expect(() =>
        swarm.run({
          providers: { p: { type: 'anthropic', keys: ['sk-inline-secret'] }, mine: { type: 'custom' }, gemini: { type: 'ai-sdk' } },
          models: { m: { provider: 'p', model: 'claude-haiku-4-5' }, c: { provider: 'mine', model: 'x' }, g: { provider: 'gemini', model: 'y' } },
          tools: { servers: { s: { command: 'node', args: ['x.js'], env: { TOKEN: 'inline-token' } } } },
          tasks: [{ id: 't', model: 'm', prompt: 'p' }],
        }),
      ).toThrowError(
        expect.objectContaining({
          issues: [
            { path: 'providers.p.keys[0]', message: expect.stringContaining('{"env": "NAME"}') },
            { path: 'tools.servers.s.env.TOKEN', message: expect.stringContaining('{"env": "NAME"}') },
            { path: 'providers.mine.type', message: expect.stringContaining('"custom" provider is an object in this process') },
            { path: 'providers.gemini.type', message: expect.stringContaining('"ai-sdk" provider is an object in this process') },
          ],
        }),
      );
    } finally {
      await swarm.close();
    }
  });

  it('Redis stopped for a few seconds mid-run: workers and coordinator reconnect and finish', async () => {
    const sim = await startSim({ seed: 4, keys: simKeys(), latency: { ttftMs: [50, 100] } });
    try {
      const { file, ids } = plan(sim, 'redis-outage', 6, 30);
      const pool = await workers(2);
      const coordinator = spawnCli(['run', file, '--redis', redis.url, '--store', join(dir, 'outage.db'), '--json']);
      await until(() => sim.stats().requests >= 30, 'calls under way');
      await redis.stop();
      const during = sim.stats().requests;
      await new Promise((r) => setTimeout(r, 3000));
      await redis.start();
      const run = await coordinator.done;
      expect(run.code, run.stderr).toBe(0);
      const result = JSON.parse(run.stdout) as { status: string; tasks: Record<string, { status: string }> };
      expect(result.status).toBe('completed');
      expect(Object.keys(result.tasks)).toHaveLength(ids.length);
      expect(sim.stats().requests).toBeGreaterThan(during);
      const calls = await stopWorkers(pool);
      expect(calls.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(ids.length - during);
    } finally {
      await sim.close();
    }
  });

  it('a structured output goes to the worker: sent natively there, checked and retried by the coordinator', async () => {
    const sim = await startSim({ seed: 1, keys: simKeys() });
    try {
      const schema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false };
      const file = join(dir, 'structured.json');
      writeFileSync(
        file,
        JSON.stringify({
          providers: { p: { type: 'openai', baseURL: `${sim.url}/v1`, keys: [{ env: 'K1' }] } },
          models: { m: { provider: 'p', model: 'gpt-sim', maxTokens: 64 } },
          tasks: [{ id: 'extract', model: 'm', prompt: 'Extract. [[sim:invalid 1 dist]]', output: { schema } }],
        }),
      );
      const pool = await workers(1);
      const run = await spawnCli(['run', file, '--redis', redis.url, '--store', join(dir, 'structured.db'), '--json']).done;
      expect(run.code, run.stderr).toBe(0);
      const result = JSON.parse(run.stdout) as { tasks: Record<string, { status: string; attempts: number; output: unknown }> };
      expect(result.tasks.extract).toMatchObject({ status: 'completed', attempts: 2, output: { name: 'sim name' } });
      const log = sim.stats().log.filter((e) => e.call?.startsWith('extract;'));
      expect(log.map((e) => e.outputSchema)).toEqual([schema, schema]);
      await stopWorkers(pool);
    } finally {
      await sim.close();
    }
  });
});
