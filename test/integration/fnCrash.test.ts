/**
 * Code steps (`kind: "fn"`) across a crash, end to end with real processes: the CLI runs a plan of
 * model calls (the simulated provider, in this process, over HTTP) and functions (an ES module
 * given with --functions), with a real SQLite journal. One function waits on a file that does not
 * exist yet; the CLI is killed with SIGKILL once the journal shows every task that does not need
 * it completed and the function's log shows it started. Then the file is made and the run resumed
 * in a new process. Kills follow the journal and the log, not the clock.
 *
 * The same for a map's per-item function, and for a function that kills its own process the
 * moment it is called (in the same turn as the completion of its dep: the journal must have
 * committed that completion before the call).
 *
 * It must show: the killed function is the only thing the resume runs again (every other function
 * called once across both lives, no model call of a task completed before the kill sent again);
 * the resumed call is a new attempt, in the new process, given its deps' outputs from the journal;
 * the run then completes with the outputs the functions return.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { journaledDone } from '../helpers/journal.js';
import { start, until } from '../helpers/cli.js';

const STEPS = resolve('test/fixtures/fn/crash-steps.mjs');
const KEY = 'sk-fn-crash-test-0123456789';
/** Waits on what another process does: generous, since the machine may be five times slower than usual. */
const PATIENCE_MS = 150_000;

let sim: SimServer;
let root: string;

beforeAll(async () => {
  sim = await startSim({ seed: 7, latency: { ttftMs: [20, 60], tokensPerSecond: 4000 } });
  root = mkdtempSync(join(tmpdir(), 'swarmstate-fn-crash-'));
});
afterAll(async () => {
  await sim.close();
});

function planWith(tasks: unknown[]) {
  return {
    providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'FN_CRASH_KEY' }] } },
    models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 } },
    defaults: { maxInFlight: 4 },
    tasks,
  };
}

/** A life of the run: `swarmstate <args>` with the journal at `db` and the functions of the fixture logging to `log`. */
function life(args: string[], dir: string) {
  const proc = start([...args, '--json', '--store', join(dir, 'runs.db'), '--functions', STEPS], {
    FN_CRASH_KEY: KEY,
    FN_LOG: join(dir, 'fn.log'),
    FN_RELEASE: join(dir, 'release'),
    SWARMSTATE_STORE: '',
  });
  let ended = false;
  void proc.exit.then(() => (ended = true));
  return { ...proc, ended: () => ended };
}

/** The fixture's log lines, split in words: `call <task> <attempt> <pid>` or `start <task> <attempt> <pid>`. */
function logLines(dir: string): string[][] {
  const file = join(dir, 'fn.log');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')) : [];
}

/** How many times the log says `verb` for each task. */
function countsOf(dir: string, verb: 'call' | 'start'): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const [v, task] of logLines(dir)) if (v === verb) counts[task!] = (counts[task!] ?? 0) + 1;
  return counts;
}

/** The model requests the simulator received, by task (from swarmstate's `x-swarmstate-call` header), from log entry `from` on. */
function requestsByTask(from = 0): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const entry of sim.stats().log.slice(from)) {
    if (!entry.call) continue;
    const task = decodeURIComponent(entry.call.split(';')[0]!);
    counts[task] = (counts[task] ?? 0) + 1;
  }
  return counts;
}

/**
 * Runs `plan` to a kill: the first life is killed with SIGKILL once the journal has `kill.done`
 * tasks done and the log shows every task of `kill.blocked` started (without `kill`, a function
 * kills its own process); then the release file is made and the run resumed to its end. Returns
 * both lives' pids, the result, and the simulator's log length and the tasks journaled done at the kill.
 */
async function crashAndResume(name: string, plan: unknown, kill?: { done: number; blocked: string[] }) {
  const dir = mkdtempSync(join(root, `${name}-`));
  const db = join(dir, 'runs.db');
  writeFileSync(join(dir, 'plan.json'), JSON.stringify(plan));
  writeFileSync(join(dir, 'fn.log'), '');

  const first = life(['run', join(dir, 'plan.json')], dir);
  if (kill) {
    const ready = () => journaledDone(db) >= kill.done && kill.blocked.every((t) => countsOf(dir, 'start')[t] === 1);
    await until(() => first.ended() || ready(), `${kill.done} tasks journaled done and ${kill.blocked.join(', ')} started`, PATIENCE_MS);
    // Had it ended by itself, the blocked function would not have been waiting: nothing was proved.
    expect(first.ended(), first.out.stderr).toBe(false);
    first.child.kill('SIGKILL');
  }
  expect(await first.exit, first.out.stderr).toEqual({ code: null, signal: 'SIGKILL' });
  const requestsAtKill = sim.stats().log.length;

  const store = new SqliteStore(db);
  const runs = store.listRuns();
  const tasksDoneAtKill = store.getRun(runs[0]!.id)!.tasksDone;
  store.close();
  expect(runs).toHaveLength(1);
  const runId = runs[0]!.id;

  writeFileSync(join(dir, 'release'), '');
  const second = life(['resume', runId], dir);
  const exit = await second.exit;
  expect(exit, second.out.stderr).toEqual({ code: 0, signal: null });
  const result = JSON.parse(second.out.stdout) as { status: string; tasks: Record<string, { status: string; output: unknown }> };
  return { dir, runId, result, requestsAtKill, tasksDoneAtKill, pids: [first.child.pid, second.child.pid].map(String) };
}

describe('a function killed mid-run', () => {
  it('is the only thing a resume runs again: functions and model calls completed before the kill are not repeated', { timeout: 300_000 }, async () => {
    // m1..m4: model calls; f1, f2: functions after them; m5: a model call after a function.
    // slow: a function that waits; after it, a function and a model call run only once it returns.
    const plan = planWith([
      { id: 'm1', model: 'm', prompt: 'First. [[sim:reply alpha]]' },
      { id: 'm2', model: 'm', prompt: 'Second. [[sim:reply beta]]' },
      { id: 'm3', model: 'm', prompt: 'Third. [[sim:reply gamma]]' },
      { id: 'm4', model: 'm', prompt: 'Fourth. [[sim:reply delta]]' },
      { id: 'f1', kind: 'fn', fn: 'join', deps: ['m1', 'm2'] },
      { id: 'f2', kind: 'fn', fn: 'join', deps: ['m3'] },
      { id: 'm5', model: 'm', deps: ['f1'], prompt: 'Read {{f1}}. [[sim:reply epsilon]]' },
      { id: 'slow', kind: 'fn', fn: 'slow', deps: ['m4', 'f2'] },
      { id: 'after', kind: 'fn', fn: 'join', deps: ['slow', 'm5'] },
      { id: 'tail', model: 'm', deps: ['slow'], prompt: 'Read {{slow}}. [[sim:reply omega]]' },
    ]);
    sim.resetStats();
    const { dir, result, requestsAtKill, tasksDoneAtKill, pids } = await crashAndResume('tasks', plan, { done: 7, blocked: ['slow'] });

    // The kill landed with the 7 tasks that do not need `slow` done, and `slow` and what follows it not.
    expect(tasksDoneAtKill).toBe(7);
    // Every function but `slow` was called once, across both lives; `slow` started once in each,
    // the second time as a new attempt of the resumed process.
    expect(countsOf(dir, 'call')).toEqual({ f1: 1, f2: 1, after: 1 });
    const starts = logLines(dir).filter(([verb]) => verb === 'start');
    expect(starts).toEqual([
      ['start', 'slow', '1', pids[0]],
      ['start', 'slow', '2', pids[1]],
    ]);
    expect(logLines(dir).find(([, task]) => task === 'f1')![3]).toBe(pids[0]);
    expect(logLines(dir).find(([, task]) => task === 'after')![3]).toBe(pids[1]);
    // One model request per model task, over both lives; after the kill, only `tail`'s.
    expect(requestsByTask()).toEqual({ m1: 1, m2: 1, m3: 1, m4: 1, m5: 1, tail: 1 });
    expect(requestsByTask(requestsAtKill)).toEqual({ tail: 1 });

    expect(result.status).toBe('completed');
    const outputs = Object.fromEntries(Object.entries(result.tasks).map(([id, t]) => [id, [t.status, t.output]]));
    expect(outputs).toEqual({
      m1: ['completed', 'alpha'],
      m2: ['completed', 'beta'],
      m3: ['completed', 'gamma'],
      m4: ['completed', 'delta'],
      f1: ['completed', { task: 'f1', deps: { m1: 'alpha', m2: 'beta' } }],
      f2: ['completed', { task: 'f2', deps: { m3: 'gamma' } }],
      m5: ['completed', 'epsilon'],
      // The resumed call read its deps' outputs from the journal: a model's text, a function's value.
      slow: ['completed', { task: 'slow', attempt: 2, deps: { m4: 'delta', f2: { task: 'f2', deps: { m3: 'gamma' } } } }],
      after: ['completed', { task: 'after', deps: { slow: { task: 'slow', attempt: 2, deps: { m4: 'delta', f2: { task: 'f2', deps: { m3: 'gamma' } } } }, m5: 'epsilon' } }],
      tail: ['completed', 'omega'],
    });
  });

  it("in a map: only the killed item's function runs again, then the reduce merges every item", { timeout: 300_000 }, async () => {
    const plan = planWith([
      { id: 'items', kind: 'fn', fn: 'items', output: { schema: { type: 'array' } } },
      { id: 'each', kind: 'map', items: { from: 'items' }, fn: 'tenfold' },
      { id: 'merged', kind: 'reduce', over: 'each', fn: 'collect' },
    ]);
    sim.resetStats();
    // Done at the kill: `items` and the five items that do not wait.
    const { dir, result, tasksDoneAtKill } = await crashAndResume('map', plan, { done: 6, blocked: ['each/3'] });
    expect(tasksDoneAtKill).toBe(6);
    expect(countsOf(dir, 'call')).toEqual({ items: 1, 'each/0': 1, 'each/1': 1, 'each/2': 1, 'each/4': 1, 'each/5': 1, merged: 1 });
    expect(countsOf(dir, 'start')).toEqual({ 'each/3': 2 });
    expect(requestsByTask()).toEqual({});
    expect(result.status).toBe('completed');
    expect(result.tasks.each!.output).toEqual([10, 20, 30, 40, 50, 60]);
    expect(result.tasks.merged!.output).toEqual([10, 20, 30, 40, 50, 60]);
  });

  it('killed as it starts, in the same turn as the completion it follows: that completion was journaled first', { timeout: 300_000 }, async () => {
    // `dies` kills its process the moment it is called, when the answer of m2 has just come in:
    // what the journal had not committed by then is lost, unless it is committed before the call.
    const plan = planWith([
      { id: 'm1', model: 'm', prompt: 'First. [[sim:reply alpha]]' },
      { id: 'f1', kind: 'fn', fn: 'join', deps: ['m1'] },
      { id: 'm2', model: 'm', deps: ['f1'], prompt: 'Second. [[sim:reply beta]]' },
      { id: 'boom', kind: 'fn', fn: 'dies', deps: ['m2'] },
      { id: 'after', kind: 'fn', fn: 'join', deps: ['boom'] },
    ]);
    sim.resetStats();
    const { dir, result, tasksDoneAtKill, pids } = await crashAndResume('self', plan);
    // m2's answer was not asked again, and the run's journal counted it done before the kill.
    expect(requestsByTask()).toEqual({ m1: 1, m2: 1 });
    expect(tasksDoneAtKill).toBe(3);
    expect(countsOf(dir, 'call')).toEqual({ f1: 1, after: 1 });
    expect(logLines(dir).filter(([verb]) => verb === 'start')).toEqual([
      ['start', 'boom', '1', pids[0]],
      ['start', 'boom', '2', pids[1]],
    ]);
    expect(result.status).toBe('completed');
    expect(result.tasks.boom!.output).toEqual({ task: 'boom', attempt: 2, deps: { m2: 'beta' } });
    expect(result.tasks.after!.output).toEqual({ task: 'after', deps: { boom: { task: 'boom', attempt: 2, deps: { m2: 'beta' } } } });
  });
});
