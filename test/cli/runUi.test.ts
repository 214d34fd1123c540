/**
 * `run --ui`: the live page changes nothing else the run prints. Every listener (progress,
 * --events, --stream, --verbose, the summary's events) is attached before the page starts, so a
 * run with --ui writes what the same run writes without it. On a terminal the page stays up
 * after the run until Ctrl-C. The built CLI as a child process, and runPlan with a fake terminal.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runPlan } from '../../src/cli/runPlan.js';
import { cli, until } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-run-ui-'));

function eventsOf(file: string): { type: string }[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string });
}

function countsOf(events: { type: string }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of events) counts[e.type] = (counts[e.type] ?? 0) + 1;
  return counts;
}

describe('run --ui loses no event', () => {
  it('writes the same --events and the same final progress line as the run without --ui', async () => {
    const plain = join(dir, 'plain.ndjson');
    const live = join(dir, 'live.ndjson');
    const [a, b] = await Promise.all([
      cli(['run', 'examples/plans/hello.json', '--store', 'memory', '--events', plain]),
      cli(['run', 'examples/plans/hello.json', '--store', 'memory', '--events', live, '--ui']),
    ]);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    expect(b.stderr).toMatch(/^live page: http:\/\/127\.0\.0\.1:\d+\/\?token=/m);
    const expected = {
      'run:started': 1,
      'key:rate': 1,
      'key:state': 1,
      'task:queued': 4,
      'task:started': 4,
      'model:request': 4,
      'model:response': 4,
      'task:completed': 4,
      'run:completed': 1,
    };
    for (const events of [eventsOf(plain), eventsOf(live)]) {
      expect(events[0]!.type).toBe('run:started');
      expect(countsOf(events)).toEqual(expected);
    }
    // Off a terminal, progress ends with the status line: the same counts with the page as without.
    const last = (stderr: string) => stderr.trim().split('\n').at(-1)!.replace(/^\[[\d.]+s\] /, '');
    expect(last(a.stderr)).toBe('run completed: 4/4 done, 0 in flight, 0 queued, 0 retries, $0.000617 of $1.00');
    expect(last(b.stderr)).toBe('run completed: 4/4 done, 0 in flight, 0 queued, 0 retries, $0.000617 of $1.00');
  });

  it('--ui --stream prints the text of every task, and --ui --verbose a line for every event', async () => {
    const ids = ['t1', 't2', 't3', 't4', 't5', 't6', 't7', 't8'];
    const plan = {
      providers: { sim: { type: 'sim' } },
      models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 64 } },
      tasks: ids.map((id) => ({ id, model: 'fast', prompt: `[[sim:reply text of ${id}]]` })),
    };
    const file = join(dir, 'eight.json');
    writeFileSync(file, JSON.stringify(plan));
    const streamed = await cli(['run', file, '--store', 'memory', '--ui', '--stream']);
    expect(streamed.code).toBe(0);
    const lines = streamed.stdout.split('\n').filter((l) => l.startsWith('['));
    expect(lines.sort()).toEqual(ids.map((id) => `[${id}] text of ${id}`).sort());

    const events = join(dir, 'verbose.ndjson');
    const verbose = await cli(['run', file, '--store', 'memory', '--ui', '--verbose', '--events', events]);
    expect(verbose.code).toBe(0);
    const logged = verbose.stderr.split('\n').filter((l) => /^\[\d+\.\ds\] /.test(l));
    const written = eventsOf(events);
    expect(written[0]!.type).toBe('run:started');
    expect(countsOf(written)['task:completed']).toBe(8);
    expect(logged).toHaveLength(written.length);
    expect(logged[0]).toMatch(/^\[0\.0s\] run:started runId=\w+ tasks=8 /);
  });
});

describe('run --ui after the run', () => {
  const plan = () => JSON.parse(readFileSync('examples/plans/hello.json', 'utf8')) as unknown;
  const flags = { seed: 0, json: false, quiet: false, events: undefined, report: undefined, inspect: undefined, store: 'memory', redis: undefined, ui: true };

  it('on a terminal, keeps serving the finished run until Ctrl-C, and says so', async () => {
    const out = sink();
    const err = sink();
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    let ended = false;
    const code = runPlan({ plan: plan(), source: 'hello.json' }, flags, { out: out.stream, err: err.stream, interactive: true, untilStopped: () => stopped });
    void code.finally(() => (ended = true));
    await until(() => err.text().includes('Ctrl-C') || ended, 'the page to be kept');
    expect(ended).toBe(false);
    const url = /^live page: (\S+) \(serving the finished run; Ctrl-C to stop\)$/m.exec(err.text())?.[1];
    expect(url).toBeDefined();
    // The summary is out, the command has not ended, and the page answers.
    expect(out.text()).toMatch(/^status +completed/m);
    const page = await fetch(url!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<html');
    stop();
    expect(await code).toBe(0);
    await expect(fetch(url!)).rejects.toThrow();
  });

  it('not when stdin is not a terminal, nor with --json: the command ends with the run', async () => {
    const never = () => new Promise<void>(() => {});
    for (const [interactive, json] of [[false, false], [true, true]] as const) {
      const err = sink();
      const code = await runPlan({ plan: plan(), source: 'hello.json' }, { ...flags, json }, { out: sink().stream, err: err.stream, interactive, untilStopped: never });
      expect(code).toBe(0);
      expect(err.text()).toMatch(/^live page: \S+$/m);
      expect(err.text()).not.toContain('Ctrl-C');
    }
    // The CLI's stdin here is a pipe: not a terminal.
    const r = await cli(['run', 'examples/plans/hello.json', '--store', 'memory', '--ui']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^live page: \S+$/m);
    expect(r.stderr).not.toContain('Ctrl-C');
  });
});

function sink() {
  let text = '';
  const stream = new Writable({ write: (chunk, _enc, done) => ((text += String(chunk)), done()) });
  return { stream, text: () => text };
}
