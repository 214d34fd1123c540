/**
 * `swarm.retry` and `swarmstate retry` on real SQLite journals against the simulator over
 * loopback: a partial run's failures run again as the same run, and nothing that completed is
 * sent again (the simulator's request log says which tasks were asked); the budget continues from
 * what was spent; bad retries are refused with a clear error.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, PlanValidationError, RetryError, RunLockedError, SqliteStore, startSim, type DispatchInfo, type SimServer } from '../../src/index.js';
import { cli } from '../helpers/cli.js';

let dir: string;
let sim: SimServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-retry-'));
  sim = await startSim({ seed: 4 });
});
afterAll(() => sim.close());

const env = { RETRY_KEY: 'sk-retry-secret-value' };

/**
 * `a` and `d` complete; `b` fails on its first request only (a 400, not retried: maxRetries 0),
 * so `c` after it is skipped; `e` never ends well. Each test gives the directive its own text, as
 * the simulator counts requests per exact body.
 */
const planOf = (tag: string, extra: Record<string, unknown> = {}) => ({
  providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'RETRY_KEY' }] } },
  models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64, price: { input: 1, output: 5 } } },
  defaults: { maxInFlight: 2, maxRetries: 0 },
  tasks: [
    { id: 'a', model: 'm', prompt: `first ${tag}` },
    { id: 'b', model: 'm', deps: ['a'], prompt: `second ${tag} [[sim:error 400 1]]` },
    { id: 'c', model: 'm', deps: ['b'], prompt: `third ${tag} from {{b}}` },
    { id: 'd', model: 'm', deps: ['a'], prompt: `fourth ${tag}` },
  ],
  ...extra,
});

/** The tasks (and attempts) the simulator was asked for since `from` entries of its log. */
const askedSince = (from: number) =>
  sim
    .stats()
    .log.slice(from)
    .map((e) => decodeURIComponent(e.call ?? '?').split(';').slice(0, 2).join('#'));

describe('swarm.retry', () => {
  it('runs the failed task and what depends on it as the same run; nothing completed is sent again; the budget counts what was spent', async () => {
    const file = join(dir, 'api.db');
    const plan = planOf('api', { budget: { usd: 1 } });
    const swarm = createSwarm({ env, store: file });
    const first = await swarm.run(plan).result;
    await swarm.close();
    expect(first.status).toBe('partial');
    expect(first.tasks.b!.status).toBe('failed');
    expect(first.tasks.c!.status).toBe('skipped');
    const spentBefore = new SqliteStore(file);
    const spent = spentBefore.spent(first.runId).total;
    spentBefore.close();
    expect(spent).toBeGreaterThan(0);

    const mark = sim.stats().log.length;
    const budgetLeft: number[] = [];
    const again = createSwarm({ env, store: file, hooks: { beforeDispatch: (call: DispatchInfo) => void budgetLeft.push(call.budgetLeftUsd!) } });
    const run = again.retry(first.runId);
    let started: { resumed?: boolean; retried?: number; before?: Record<string, string>; deps?: Record<string, string[]> } | undefined;
    run.events.on('run:started', (e) => (started = e));
    const result = await run.result;
    await again.close();

    expect(run.id).toBe(first.runId);
    expect(result.runId).toBe(first.runId);
    expect(result.status).toBe('completed');
    expect(started).toMatchObject({ resumed: true, retried: 2 });
    // For views drawing the DAG: every task, and how those that stay as they were had ended.
    expect(started!.before).toEqual({ a: 'completed', d: 'completed' });
    expect(Object.keys(started!.deps!).sort()).toEqual(['a', 'b', 'c', 'd']);
    // Only the failed task (its second attempt: the numbering goes on) and its dependent were asked for.
    expect(askedSince(mark).sort()).toEqual(['b#2', 'c#1']);
    // What had completed is the same, output and cost.
    for (const id of ['a', 'd']) {
      expect(result.tasks[id]!.output).toBe(first.tasks[id]!.output);
      expect(result.tasks[id]!.costUsd).toBe(first.tasks[id]!.costUsd);
    }
    expect(result.tasks.c!.output).toBeTruthy();
    // The budget went on from what the first run spent.
    expect(budgetLeft[0]).toBeCloseTo(1 - spent, 9);

    // The journal: one run, finished again, with the retry recorded.
    const store = new SqliteStore(file);
    const record = store.getRun(first.runId)!;
    expect(store.listRuns().map((r) => r.id)).toEqual([first.runId]);
    expect(record.status).toBe('completed');
    expect(record.tasksDone).toBe(4);
    expect((record.options as { retries: unknown[] }).retries).toEqual([{ at: expect.any(Number), tasks: ['b', 'c'], from: { b: 1, c: 0 } }]);
    expect(store.spent(first.runId).total).toBeCloseTo(result.totals.costUsd!, 9);
    store.close();
  });

  it('--tasks runs only the named tasks and their dependents; others stay as they were', async () => {
    const file = join(dir, 'only.db');
    const plan = {
      ...planOf('only'),
      tasks: [...planOf('only').tasks, { id: 'x', model: 'm', prompt: 'apart [[sim:error 400 1]] only' }],
    };
    const swarm = createSwarm({ env, store: file });
    const first = await swarm.run(plan).result;
    expect(first.tasks.x!.status).toBe('failed');
    const mark = sim.stats().log.length;
    const result = await swarm.retry(first.runId, { tasks: ['b'] }).result;
    await swarm.close();
    expect(askedSince(mark).sort()).toEqual(['b#2', 'c#1']);
    expect(result.status).toBe('partial');
    expect(result.tasks.c!.status).toBe('completed');
    expect(result.tasks.x!.status).toBe('failed');
    expect(result.tasks.x!.error?.message).toContain('[[sim:error 400]]');
  });

  it('a retry cut short is finished by a resume, the retried task still with its full retries', async () => {
    const file = join(dir, 'cut.db');
    const swarm = createSwarm({ env, store: file });
    const first = await swarm.run(planOf('cut')).result;
    expect(first.tasks.b!.status).toBe('failed');
    const retry = swarm.retry(first.runId);
    retry.events.on('task:started', (e) => {
      if (e.taskId === 'b') retry.cancel('cut short');
    });
    expect((await retry.result).status).toBe('cancelled');
    // maxRetries is 0 and b failed once before the retry: only attempts since the retry count.
    const resumed = await swarm.resume(first.runId).result;
    await swarm.close();
    expect(resumed.status).toBe('completed');
    expect(resumed.tasks.b!.attempts).toBe(3);
    expect(resumed.tasks.a!.output).toBe(first.tasks.a!.output);
  });

  it('refuses what cannot be retried, with an error that says why', async () => {
    const file = join(dir, 'refused.db');
    const swarm = createSwarm({ env, store: file });
    const first = await swarm.run(planOf('refused')).result;
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (error) {
        return error as RetryError;
      }
      throw new Error('not refused');
    };
    expect(refused(() => swarm.retry('nosuchrun'))).toMatchObject({ code: 'RUN_NOT_FOUND', message: `no run nosuchrun in ${file}` });
    expect(() => swarm.retry(first.runId, { tasks: 'b' as never })).toThrow('retry(runId, { tasks }): tasks must be an array of task ids (strings), got "b"');
    const completed = refused(() => swarm.retry(first.runId, { tasks: ['a'] }));
    expect(completed).toBeInstanceOf(RetryError);
    expect(completed).toMatchObject({ code: 'TASK_COMPLETED', taskId: 'a' });
    expect(completed.message).toContain('task "a" of run');
    expect(refused(() => swarm.retry(first.runId, { tasks: ['b', 'nope'] }))).toMatchObject({ code: 'UNKNOWN_TASK', message: expect.stringContaining('has no task "nope"') });
    // `c` alone would wait for `b`, which failed and stays failed.
    expect(refused(() => swarm.retry(first.runId, { tasks: ['c'] }))).toMatchObject({ code: 'DEPENDENCY_NOT_RETRIED', message: expect.stringContaining('waits for "b"') });
    // Refused retries change nothing: the run can still be retried, and then there is nothing left.
    expect((await swarm.retry(first.runId).result).status).toBe('completed');
    expect(refused(() => swarm.retry(first.runId))).toMatchObject({ code: 'NOTHING_TO_RETRY' });
    await swarm.close();

    const none = createSwarm({ env, store: false });
    expect(refused(() => none.retry(first.runId))).toMatchObject({ code: 'NO_STORE' });
    await none.close();
  });

  it('a run its budget stopped goes on with a higher cap: refused at or under what was spent, or invalid, with nothing changed; a resume after the retry keeps the new cap', async () => {
    const file = join(dir, 'budget.db');
    // $1,000 per million output tokens and 64 at most: each call reserves about $0.064.
    const plan = {
      providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'RETRY_KEY' }] } },
      models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64, price: { input: 1, output: 1_000 } } },
      defaults: { maxInFlight: 1, maxRetries: 0 },
      budget: { usd: 0.15 },
      tasks: Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `budgeted ${i}` })),
    };
    const swarm = createSwarm({ env, store: file });
    const first = await swarm.run(plan).result;
    expect(first.status).toBe('budget_exceeded');
    const done = Object.values(first.tasks).filter((t) => t.status === 'completed').map((t) => t.id);
    expect(done.length).toBeGreaterThan(0);
    expect(done.length).toBeLessThan(6);

    const refusal = (budget: Record<string, unknown>) => {
      try {
        swarm.retry(first.runId, { budget });
      } catch (error) {
        return error;
      }
      throw new Error('the retry was not refused');
    };
    const low = refusal({ usd: 0.0001 });
    expect(low).toBeInstanceOf(RetryError);
    expect(low).toMatchObject({ code: 'BUDGET_TOO_LOW' });
    expect((low as Error).message).toContain('budget.usd: $0.0001 is not above what the run has spent');
    const invalid = refusal({ usd: -1, perModel: { nope: 1 } });
    expect(invalid).toBeInstanceOf(PlanValidationError);
    expect((invalid as PlanValidationError).issues.map((i) => i.path)).toEqual(expect.arrayContaining(['budget.usd', 'budget.perModel.nope']));
    const shapeless = refusal({ perModel: 'lots' });
    expect(shapeless).toBeInstanceOf(PlanValidationError);
    expect((shapeless as PlanValidationError).issues.map((i) => i.path)).toEqual(['budget.perModel']);

    // A higher cap, cut short after one more task: the resume that finishes it keeps the cap.
    const retry = swarm.retry(first.runId, { budget: { usd: 10 } });
    retry.events.on('task:completed', () => retry.cancel('cut short'));
    expect((await retry.result).status).toBe('cancelled');
    const last = await swarm.resume(first.runId).result;
    await swarm.close();
    expect(last.status).toBe('completed');
    expect(Object.values(last.tasks).every((t) => t.status === 'completed')).toBe(true);
    for (const id of done) expect(last.tasks[id]!.output).toBe(first.tasks[id]!.output);
    expect(last.totals.costUsd).toBeGreaterThan(0.15);
  });

  it('refuses a run that is running (its lock)', async () => {
    const file = join(dir, 'running.db');
    const swarm = createSwarm({ env, store: file });
    // `slow` waits out a 429 (retry-after 1 s) while the retry is tried.
    const run = swarm.run({ ...planOf('running'), tasks: [{ id: 'slow', model: 'm', prompt: 'slow [[sim:error 429 1]]' }] });
    await new Promise<void>((resolve) => run.events.on('task:started', () => resolve()));
    const other = createSwarm({ env, store: file });
    expect(() => other.retry(run.id)).toThrow(RunLockedError);
    await other.close();
    run.cancel('test over');
    await run.result;
    await swarm.close();
  });
});

describe('swarmstate retry', () => {
  it('retries a partial run from the command line as the same run; refuses a completed task with exit 2', async () => {
    const file = join(dir, 'cli.db');
    const planFile = join(dir, 'cli-plan.json');
    writeFileSync(planFile, JSON.stringify(planOf('cli')));
    const first = await cli(['run', planFile, '--store', file, '--json'], env);
    expect(first.code).toBe(1);
    const before = JSON.parse(first.stdout) as { runId: string; status: string; tasks: Record<string, { status: string; output?: string }> };
    expect(before.status).toBe('partial');

    const wrong = await cli(['retry', before.runId, '--store', file, '--tasks', 'a'], env);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('task "a" of run');
    expect(wrong.stderr).toContain('completed');

    const mark = sim.stats().log.length;
    const retried = await cli(['retry', before.runId, '--store', file, '--tasks', 'b'], env);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stderr).toContain(`retrying ${before.runId}`);
    expect(askedSince(mark).sort()).toEqual(['b#2', 'c#1']);

    const runs = await cli(['runs', '--store', file, '--json'], env);
    const listed = JSON.parse(runs.stdout) as { id: string; status: string; tasksDone: number }[];
    expect(listed).toEqual([expect.objectContaining({ id: before.runId, status: 'completed', tasksDone: 4 })]);
    const resumed = await cli(['resume', before.runId, '--store', file, '--json'], env);
    const after = JSON.parse(resumed.stdout) as typeof before;
    expect(after.runId).toBe(before.runId);
    for (const id of ['a', 'd']) expect(after.tasks[id]!.output).toBe(before.tasks[id]!.output);

    const usage = await cli(['resume', before.runId, '--store', file, '--tasks', 'b'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--tasks is for retry');
  });

  it('--budget-usd raises the cap of a run its budget stopped; a bad or too low one is exit 2', async () => {
    const file = join(dir, 'cli-budget.db');
    const planFile = join(dir, 'cli-budget.json');
    writeFileSync(
      planFile,
      JSON.stringify({
        providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'RETRY_KEY' }] } },
        models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64, price: { input: 1, output: 1_000 } } },
        defaults: { maxInFlight: 1 },
        budget: { usd: 0.1 },
        tasks: Array.from({ length: 4 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `cli budgeted ${i}` })),
      }),
    );
    const first = await cli(['run', planFile, '--store', file, '--json'], env);
    const before = JSON.parse(first.stdout) as { runId: string; status: string };
    expect(before.status).toBe('budget_exceeded');
    const bad = await cli(['retry', before.runId, '--store', file, '--budget-usd', 'lots'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--budget-usd must be a number of USD greater than 0, got "lots"');
    const low = await cli(['retry', before.runId, '--store', file, '--budget-usd', '0.00001'], env);
    expect(low.code).toBe(2);
    expect(low.stderr).toContain('is not above what the run has spent');
    const onResume = await cli(['resume', before.runId, '--store', file, '--budget-usd', '5'], env);
    expect(onResume.code).toBe(2);
    expect(onResume.stderr).toContain('--budget-usd is for retry');
    const retried = await cli(['retry', before.runId, '--store', file, '--budget-usd', '5', '--json'], env);
    expect(retried.code, retried.stderr).toBe(0);
    expect(JSON.parse(retried.stdout)).toMatchObject({ runId: before.runId, status: 'completed' });
  });
});
