/** Every example in examples/ runs, as a user would run it, and succeeds. */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cli } from './helpers/cli.js';

const run = promisify(execFile);
const scripts = readdirSync('examples').filter((f) => f.endsWith('.ts'));
const plans = readdirSync('examples/plans').filter((f) => f.endsWith('.json'));

describe('examples', () => {
  it.each(scripts)('examples/%s runs and exits 0', async (file) => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', `examples/${file}`], { timeout: 170_000 });
    expect(stdout).toMatch(/completed/);
  });

  it.each(plans)('examples/plans/%s runs to completion through the CLI', async (file) => {
    const { stdout } = await run(process.execPath, ['bin/swarmstate.js', 'run', `examples/plans/${file}`, '--json'], { timeout: 170_000 });
    const result = JSON.parse(stdout) as { status: string; totals: { tasks: number; completed: number } };
    expect(result.status).toBe('completed');
    expect(result.totals.completed).toBe(result.totals.tasks);
  });
});

/**
 * examples/triage: code steps, a branch and an approval. The embedded program decides in code;
 * the CLI ends the run paused (exit 5), a person approves with `swarmstate approve`, and `resume`
 * sends the replies. Its files go to a temp dir (TRIAGE_OUT), never into the repository.
 */
describe('examples/triage', () => {
  const steps = 'examples/triage/steps.mjs';
  const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);

  it('run.ts approves in code and writes the urgent replies and the archive', async () => {
    const out = mkdtempSync(join(tmpdir(), 'swarmstate-triage-'));
    try {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/triage/run.ts'], { timeout: 170_000, env: { ...process.env, TRIAGE_OUT: out } });
      expect(stdout).toMatch(/run completed: outbox \{"sent":2\}, archive \{"archived":2\}/);
      expect(lines(join(out, 'outbox.jsonl')).map((l) => l.ticket)).toEqual(['T-101', 'T-103']);
      expect(lines(join(out, 'archive.jsonl')).map((l) => l.id)).toEqual(['T-102', 'T-104']);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('on the CLI: the run pauses (exit 5) with nothing sent; approve, then resume, sends once', async () => {
    const out = mkdtempSync(join(tmpdir(), 'swarmstate-triage-'));
    const store = join(out, 'runs.db');
    const env = { TRIAGE_OUT: out };
    try {
      const first = await cli(['run', 'examples/triage/plan.json', '--functions', steps, '--store', store], env);
      expect(first.code).toBe(5);
      const runId = /swarmstate approve (\S+) review/.exec(first.stderr + first.stdout)?.[1];
      expect(runId).toBeDefined();
      expect(existsSync(join(out, 'outbox.jsonl'))).toBe(false);
      expect(lines(join(out, 'archive.jsonl'))).toHaveLength(2);
      const approved = await cli(['approve', runId!, 'review', '--note', 'ok', '--store', store], env);
      expect(approved.code).toBe(0);
      const resumed = await cli(['resume', runId!, '--functions', steps, '--store', store, '--json'], env);
      expect(resumed.code).toBe(0);
      const result = JSON.parse(resumed.stdout) as { status: string; tasks: Record<string, { output: unknown }> };
      expect(result.status).toBe('completed');
      expect(result.tasks.review!.output).toEqual({ approved: true, note: 'ok' });
      expect(lines(join(out, 'outbox.jsonl')).map((l) => l.key)).toEqual([`${runId}/outbox/T-101`, `${runId}/outbox/T-103`]);
      // The archive was written before the pause and not again.
      expect(lines(join(out, 'archive.jsonl'))).toHaveLength(2);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
