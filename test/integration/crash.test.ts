/**
 * Durable runs, end to end with real processes: the CLI runs a 200-task plan against the
 * simulated provider (in this process, over HTTP), is killed with SIGKILL once the journal shows a
 * seeded random number of tasks more done, and is resumed each time until the run is done. The
 * journal is a real SQLite file. Kills follow the journal, not the clock: on a slow machine a kill
 * at a fixed time could land before anything was journaled, or after the run ended.
 *
 * It must show: every task completed exactly once, with the outputs an uninterrupted run gives;
 * no completed task's model call was sent again after its completion was journaled; a tool with a
 * side effect ran once per call; a second process cannot resume a run that one is running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { nextRandom } from '../../machines/random.js';
import { journaledDone } from '../helpers/journal.js';

const BIN = resolve('bin/swarmstate.js');
const FIXTURE = resolve('test/fixtures/mcp/side-effect-server.mjs');
const KEY = 'sk-crash-test-0123456789';
const TOOL_TASKS = 12;

let sim: SimServer;
let dir: string;

beforeAll(async () => {
  sim = await startSim({ seed: 5, latency: { ttftMs: [40, 120], tokensPerSecond: 4000 } });
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-crash-'));
});
afterAll(async () => {
  await sim.close();
});

/** 200 tasks in 20 layers of 10; each after the first layer reads one or two of the layer before. Some call the side-effect tool. */
function plan(counterFile: string) {
  const tasks = [];
  for (let layer = 0; layer < 20; layer++) {
    for (let k = 0; k < 10; k++) {
      const id = `L${layer}.t${k}`;
      const deps = layer === 0 ? [] : [...new Set([`L${layer - 1}.t${k}`, `L${layer - 1}.t${(k * 3 + 1) % 10}`])];
      const n = layer * 10 + k;
      const tool = n % Math.floor(200 / TOOL_TASKS) === 3 && n / Math.floor(200 / TOOL_TASKS) < TOOL_TASKS;
      tasks.push({
        id,
        model: 'm',
        deps,
        ...(tool ? { tools: ['counter.bump'] } : {}),
        prompt: `Task ${id}.${tool ? ` [[sim:tool counter__bump {"id":"${id}"}]]` : ''}`,
      });
    }
  }
  return {
    providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'CRASH_KEY' }] } },
    models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 } },
    defaults: { maxInFlight: 6 },
    tools: { servers: { counter: { command: process.execPath, args: [FIXTURE], env: { COUNTER_FILE: counterFile } } } },
    tasks,
  };
}

function cli(args: string[]): { child: ChildProcess; done: Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, CRASH_KEY: KEY, SWARMSTATE_STORE: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolveDone) =>
    child.on('close', (code, signal) => resolveDone({ code, signal, stdout, stderr })),
  );
  return { child, done };
}

/** Kills `proc` with SIGKILL once `ready()` holds; 'ended' if it exited first. Polls what it observes, no fixed wait. */
async function killWhen(proc: { child: ChildProcess; done: Promise<unknown> }, ready: () => boolean): Promise<'killed' | 'ended'> {
  let ended = false;
  void proc.done.then(() => (ended = true));
  while (!ended) {
    if (ready()) {
      proc.child.kill('SIGKILL');
      return 'killed';
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return 'ended';
}

describe('crash and resume', () => {
  // Generous limits: five CLI lives and a clean run take well under a minute on an idle machine,
  // several on a loaded one; nothing here asserts on time.
  it('a run killed with SIGKILL at seeded points of its progress and resumed each time finishes with every task done once', { timeout: 300_000 }, async () => {
    // The same plan, uninterrupted, for the outputs to compare with.
    const cleanDir = mkdtempSync(join(dir, 'clean-'));
    writeFileSync(join(cleanDir, 'plan.json'), JSON.stringify(plan(join(cleanDir, 'bumps.log'))));
    const clean = await cli(['run', join(cleanDir, 'plan.json'), '--json', '--store', 'memory']).done;
    expect(clean.code, clean.stderr).toBe(0);
    const expected = JSON.parse(clean.stdout) as { tasks: Record<string, { output: string }> };

    sim.resetStats();
    const db = join(dir, 'runs.db');
    const counter = join(dir, 'bumps.log');
    writeFileSync(counter, '');
    writeFileSync(join(dir, 'plan.json'), JSON.stringify(plan(counter)));

    let seed = 20261130;
    /** How many tasks more each killed life had journaled when it was killed (its target). */
    const kills: number[] = [];
    let runId: string | undefined;
    let final: { code: number | null; stdout: string; stderr: string } | undefined;
    /** Tasks done when each kill landed: the kills must fall mid-run to prove anything. */
    const doneAtKill: number[] = [];
    for (let life = 0; life < 12 && !final; life++) {
      const args = runId === undefined ? ['run', join(dir, 'plan.json'), '--json', '--store', db] : ['resume', runId, '--json', '--store', db];
      const proc = cli(args);
      // Kill the first four lives once each has journaled 10 to 40 tasks more (seeded); let the
      // fifth finish. Four lives take at most 160 of the 200 tasks: every kill lands mid-run.
      if (life < 4) {
        const [r, next] = nextRandom(seed);
        seed = next;
        const more = 10 + Math.floor(r * 31);
        const target = journaledDone(db) + more;
        kills.push(more);
        await killWhen(proc, () => journaledDone(db) >= target);
      }
      const ended = await proc.done;
      const store = new SqliteStore(db);
      runId ??= store.listRuns()[0]?.id;
      expect(runId, ended.stderr).toBeDefined();
      if (ended.signal === 'SIGKILL') doneAtKill.push(store.getRun(runId!)!.tasksDone);
      store.close();
      if (ended.signal === null) {
        expect(ended.code, ended.stderr).toBe(0);
        final = ended;
      }
    }
    if (process.env.CRASH_VERBOSE) console.log(`kills after ${kills.join(', ')} tasks more; tasks done at each kill: ${doneAtKill.join(', ')}`);
    expect(final, `kills after ${kills.join(', ')} tasks more`).toBeDefined();
    // Every kill landed mid-run, each later than the one before.
    expect(doneAtKill).toHaveLength(4);
    expect(doneAtKill.every((n, i) => n > (doneAtKill[i - 1] ?? 0) && n < 200), `tasks done at each kill: ${doneAtKill.join(', ')}`).toBe(true);
    const result = JSON.parse(final!.stdout) as { status: string; tasks: Record<string, { status: string; output: string }> };
    expect(result.status).toBe('completed');
    expect(Object.keys(result.tasks)).toHaveLength(200);
    for (const [id, task] of Object.entries(result.tasks)) {
      expect(task.status).toBe('completed');
      expect(task.output, id).toBe(expected.tasks[id]!.output);
    }

    // The journal: every task completed once; when each completion was written.
    const store = new SqliteStore(db);
    const rows = store.loadTasks(runId!);
    const attempts = store.loadAttempts(runId!);
    expect(store.getRun(runId!)!.status).toBe('completed');
    expect(store.getRun(runId!)!.tasksDone).toBe(200);
    store.close();
    expect(rows.filter((r) => r.status === 'completed')).toHaveLength(200);
    const completedAt = new Map<string, number>();
    for (const a of attempts) if (a.status === 'completed') completedAt.set(a.taskId, Math.min(completedAt.get(a.taskId) ?? Infinity, a.endedAt!));
    expect(completedAt.size).toBe(200);

    // The simulator's log: no model call of a completed task was sent after its completion.
    const log = sim.stats().log;
    const late: string[] = [];
    for (const entry of log) {
      if (!entry.call) continue;
      const taskId = decodeURIComponent(entry.call.split(';')[0]!);
      const done = completedAt.get(taskId);
      if (done !== undefined && entry.at > done) late.push(`${taskId} at +${entry.at - done} ms`);
    }
    expect(late).toEqual([]);

    // The side effect ran once per call.
    const bumps = readFileSync(counter, 'utf8').split('\n').filter(Boolean);
    expect(bumps.length).toBe(TOOL_TASKS);
    expect(new Set(bumps).size).toBe(TOOL_TASKS);
    // Every request carried an idempotency key, one key per call. A resumed agent replays the
    // journaled result without asking the server again; only a kill that lands after the tool ran
    // but before its result was recorded (a window of milliseconds) repeats the request, with the
    // same key, which the server recognizes.
    const requests = readFileSync(`${counter}.requests`, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' '));
    expect(requests.every(([, key]) => /^[0-9a-f]{32}$/.test(key ?? ''))).toBe(true);
    const keysById = new Map<string, Set<string>>();
    for (const [id, key] of requests) (keysById.get(id!) ?? keysById.set(id!, new Set()).get(id!)!).add(key!);
    expect([...keysById.values()].every((keys) => keys.size === 1)).toBe(true);
    expect(requests.length).toBeLessThanOrEqual(TOOL_TASKS + kills.length);
  });

  it('two processes resuming the same run: one runs it, the other exits with a clear message', { timeout: 180_000 }, async () => {
    const db = join(dir, 'lock.db');
    const counter = join(dir, 'lock-bumps.log');
    writeFileSync(counter, '');
    writeFileSync(join(dir, 'lock-plan.json'), JSON.stringify(plan(counter)));
    // Start a run and kill it once it has journaled a task: a run to resume.
    const first = cli(['run', join(dir, 'lock-plan.json'), '--json', '--store', db]);
    expect(await killWhen(first, () => journaledDone(db) >= 1)).toBe('killed');
    await first.done;
    const store = new SqliteStore(db);
    const runId = store.listRuns()[0]!.id;
    store.close();
    // Journaled as running, but no live process holds it: `runs` says interrupted.
    const listed = await cli(['runs', '--json', '--store', db]).done;
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: runId, status: 'interrupted' })]);

    const a = cli(['resume', runId, '--json', '--store', db]);
    const b = cli(['resume', runId, '--json', '--store', db]);
    const [ra, rb] = await Promise.all([a.done, b.done]);
    const codes = [ra.code, rb.code].sort();
    expect(codes).toEqual([0, 3]);
    const loser = ra.code === 3 ? ra : rb;
    expect(loser.stderr).toMatch(new RegExp(`run ${runId} is already being run by process \\d+`));
    const winner = ra.code === 0 ? ra : rb;
    expect(JSON.parse(winner.stdout).status).toBe('completed');
    const bumps = readFileSync(counter, 'utf8').split('\n').filter(Boolean);
    expect(new Set(bumps).size).toBe(bumps.length);
    expect(bumps.length).toBe(TOOL_TASKS);
  });
});
