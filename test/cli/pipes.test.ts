/**
 * A reader that goes away (`swarmstate machines --json | head -1`, `show <run> | head -2`,
 * `run ... 2>&1 | head`) ends no command with a stack trace: the writes it misses are dropped and
 * the command ends with the exit code it would have had. Real pipes to the built CLI.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, withClosedPipe } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-pipes-'));

describe('a closed pipe', () => {
  it('on stdout: machines --json, show, run and a partial run end quietly with their own exit code', async () => {
    const store = join(dir, 'runs.db');
    const ran = await cli(['run', 'examples/plans/hello.json', '--store', store, '--json', '--quiet']);
    expect(ran.code).toBe(0);
    const { runId } = JSON.parse(ran.stdout) as { runId: string };
    const partial = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    partial.tasks[1].prompt = 'Write the introduction. [[sim:error 400]]';
    const partialFile = join(dir, 'partial.json');
    writeFileSync(partialFile, JSON.stringify(partial));
    const cases: [string[], number][] = [
      [['machines', '--json'], 0],
      [['machines'], 0],
      [['show', runId, '--store', store], 0],
      [['runs', '--store', store], 0],
      [['run', 'examples/plans/hello.json', '--store', 'memory'], 0],
      [['run', partialFile, '--store', 'memory', '--stream'], 1],
      [['help'], 0],
      [['validate', 'examples/plans/hello.json'], 0],
    ];
    const results = await Promise.all(cases.map(([args]) => withClosedPipe(args, 'stdout')));
    results.forEach((r, i) => {
      const [args, code] = cases[i]!;
      expect({ args, code: r.code, signal: r.signal }).toEqual({ args, code, signal: null });
      expect(r.text, args.join(' ')).not.toMatch(/EPIPE|Error|\n +at /);
    });
  });

  it('on stderr: a run goes to its end (its summary on stdout), and a bad command line still exits 2', async () => {
    const run = await withClosedPipe(['run', 'examples/plans/hello.json', '--store', 'memory', '--verbose'], 'stderr');
    expect(run.code).toBe(0);
    expect(run.text).toMatch(/^status +completed/m);
    const bad = await withClosedPipe(['run', 'examples/plans/hello.json', '--nope'], 'stderr');
    expect(bad.code).toBe(2);
    expect(bad.text).toBe('');
  });
});
