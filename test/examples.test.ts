/** Every example in examples/ runs, as a user would run it, and succeeds. */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

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
