/**
 * `swarmstate show` and `swarmstate init` end to end: the built CLI as child processes on real
 * SQLite journals (npm run build first).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, slowPlanFile, start, until } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-show-'));

describe('swarmstate show', () => {
  it("shows a finished run's tasks with status, attempts, cost and output; whole outputs for named tasks; --json", async () => {
    const store = join(dir, 'done.db');
    const run = await cli(['run', 'examples/plans/hello.json', '--json', '--store', store]);
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as { runId: string; tasks: Record<string, { output: string; costUsd: number; attempts: number }> };

    const table = await cli(['show', result.runId, '--store', store]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^run ${result.runId}  completed  4/4 done  \\$`));
    for (const id of ['outline', 'intro', 'body', 'final']) {
      const firstLine = result.tasks[id]!.output.trim().split('\n')[0]!;
      const row = table.stdout.split('\n').find((l) => l.startsWith(`${id} `));
      // attempts, requests, cost
      expect(row, id).toMatch(new RegExp(`^${id} +completed +1 +1 +\\$[\\d.]+  `));
      // One line each, cut to the width: the start of the output's first line.
      expect(firstLine.startsWith(row!.split(/\$[\d.]+  /)[1]!.replace(/…$/, ''))).toBe(true);
    }

    const one = await cli(['show', result.runId, 'final', 'intro', '--store', store]);
    expect(one.code).toBe(0);
    expect(one.stdout).toContain(`== final  completed  1 attempt`);
    expect(one.stdout).toContain(result.tasks.final!.output);
    expect(one.stdout).toContain(result.tasks.intro!.output);
    expect(one.stdout).not.toContain('== body');

    const json = JSON.parse((await cli(['show', result.runId, '--store', store, '--json'])).stdout) as { status: string; tasks: { id: string; output: string; costUsd: number; attempts: number; status: string }[] };
    expect(json.status).toBe('completed');
    expect(json.tasks.map((t) => t.id)).toEqual(['outline', 'intro', 'body', 'final']);
    for (const t of json.tasks) {
      expect(t).toMatchObject({ status: 'completed', attempts: 1, requests: 1, retries: 0, output: result.tasks[t.id]!.output });
      expect(t.costUsd).toBeCloseTo(result.tasks[t.id]!.costUsd, 10);
    }

    const ghost = await cli(['show', result.runId, 'ghost', '--store', store]);
    expect(ghost.code).toBe(2);
    expect(ghost.stderr).toContain(`run ${result.runId} has no task "ghost"`);
    // show, resume and retry say a run the journal lacks in the same words.
    for (const command of ['show', 'resume', 'retry']) {
      const nope = await cli([command, 'nope', '--store', store]);
      expect({ code: nope.code, stderr: nope.stderr }, command).toEqual({ code: 2, stderr: `swarmstate ${command}: no run nope in ${store} (\`swarmstate runs\` lists its runs)\n` });
    }
  });

  it('shows a run while it runs, and `interrupted` once its process died', async () => {
    const file = slowPlanFile(join(dir, 'slow.json')); // its first call is in flight for a minute
    const events = join(dir, 'slow.ndjson');
    const store = join(dir, 'slow.db');
    const run = start(['run', file, '--quiet', '--events', events, '--store', store]);
    await until(() => existsSync(events) && readFileSync(events, 'utf8').includes('"model:request"'), 'the first model call');
    const runId = (JSON.parse(readFileSync(events, 'utf8').split('\n')[0]!) as { runId: string }).runId;
    const live = JSON.parse((await cli(['show', runId, '--store', store, '--json'])).stdout) as { status: string; tasks: { id: string; status: string }[] };
    expect(live.status).toBe('running');
    expect(live.tasks.map((t) => [t.id, t.status])).toEqual([
      ['a', 'running'],
      ['b', 'pending'],
    ]);
    run.child.kill('SIGKILL');
    await run.exit;
    const dead = await cli(['show', runId, '--store', store]);
    expect(dead.code).toBe(0);
    expect(dead.stdout).toMatch(new RegExp(`^run ${runId}  interrupted  0/2 done`));
    expect(dead.stdout).toMatch(/^b +pending +0 +0 +-$/m);
  });
});

describe('swarmstate init', () => {
  it('writes a starter plan and README that run as they are, and never overwrites them', async () => {
    // The tests' environment keeps journals in memory; a new user's run journals to .swarmstate/ (empty = unset).
    const user = { SWARMSTATE_STORE: '' };
    const home = join(dir, 'project');
    const made = await cli(['init', 'starter'], {}, (mkdirSync(home, { recursive: true }), home));
    expect(made.code).toBe(0);
    const folder = join(home, 'starter');
    const planText = readFileSync(join(folder, 'plan.json'), 'utf8');
    const plan = JSON.parse(planText) as { tasks: { kind?: string }[]; models: object; budget: { usd: number } };
    expect(plan.tasks.map((t) => t.kind ?? 'task')).toEqual(['task', 'map', 'reduce']);
    expect(Object.keys(plan.models)).toHaveLength(2);
    expect(plan.budget.usd).toBeGreaterThan(0);
    const readme = readFileSync(join(folder, 'README.md'), 'utf8');
    for (const part of ['providers', 'models', 'budget', 'tasks', 'map', 'reduce']) expect(readme).toContain(part);

    expect((await cli(['validate', 'plan.json'], {}, folder)).code).toBe(0);
    // As a new user would: from that folder, with the default journal there.
    const run = await cli(['run', 'plan.json', '--json'], user, folder);
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as { status: string; totals: { tasks: number; completed: number; costUsd: number } };
    expect(result.status).toBe('completed');
    expect(result.totals.completed).toBe(result.totals.tasks);
    expect(result.totals.costUsd).toBeGreaterThan(0);
    expect(existsSync(join(folder, '.swarmstate', 'runs.db'))).toBe(true);

    writeFileSync(join(folder, 'README.md'), 'mine');
    const again = await cli(['init'], {}, folder);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already exist');
    expect(readFileSync(join(folder, 'plan.json'), 'utf8')).toBe(planText);
    expect(readFileSync(join(folder, 'README.md'), 'utf8')).toBe('mine');
  });
});
