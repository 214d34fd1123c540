/**
 * One module per command: each parses only its own flags (another command's flag is refused in
 * one line naming the command's help), `help <cmd>` and `<cmd> --help` print that command's help,
 * `validate --json`, `machines --json`, `--verbose`, and --json's lines on stderr. The built CLI
 * as a child process (the build the global setup keeps current), plus the registry itself for what needs no process.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runCommand, type Command } from '../../src/cli/commands/command.js';
import { COMMANDS } from '../../src/cli/commands/index.js';
import { cli } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-commands-'));

function sink() {
  let text = '';
  const stream = new Writable({ write: (chunk, _enc, done) => ((text += String(chunk)), done()) });
  return { stream, text: () => text };
}

describe('each command parses only its own flags', () => {
  // Each with a flag that another command has: a flag that means nothing here is an error, not ignored.
  const cases: [string[], string, string][] = [
    [['validate', 'examples/plans/hello.json', '--real'], 'validate', '--real'],
    [['runs', '--redis', 'redis://nope'], 'runs', '--redis'],
    [['run', 'examples/plans/hello.json', '--tasks', 'a'], 'run', '--tasks'],
    [['retry', 'abc', '--inspect'], 'retry', '--inspect'],
    [['resume', 'abc', '--real'], 'resume', '--real'],
    [['worker', '--json'], 'worker', '--json'],
    [['show', 'abc', '--events', 'x'], 'show', '--events'],
    [['init', '--store', 'x'], 'init', '--store'],
    [['machines', '--plan', 'x'], 'machines', '--plan'],
    [['report', 'x.ndjson', '--json'], 'report', '--json'],
    [['sim', '--store', 'x'], 'sim', '--store'],
    [['demo', '--tasks', 'a'], 'demo', '--tasks'],
    [['help', '--json'], 'help', '--json'],
  ];
  it.each(cases)('%j is refused in one line', async (args, command, flag) => {
    const r = await cli(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`swarmstate ${command}: unknown option ${flag} (see swarmstate ${command} --help)\n`);
    expect(r.stdout).toBe('');
  });

  it('a string flag given no value says so, and an unknown command points at help', async () => {
    const r = await cli(['run', 'examples/plans/hello.json', '--report', '--quiet']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('swarmstate run: --report needs a value (see swarmstate run --help)\n');
    const unknown = await cli(['frobnicate']);
    expect(unknown.stderr).toBe('swarmstate: unknown command "frobnicate" (see swarmstate help)\n');
  });

  it('demo --report --quiet is the default report, not "ambiguous"', async () => {
    // A bad --seed stops the demo before it runs: the flags before it were read as meant.
    const r = await cli(['demo', '--report', '--quiet', '--seed', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('swarmstate demo: --seed must be an integer, got "x" (see swarmstate demo --help)\n');
    // And what the demo is handed: the default file, and --quiet still a flag.
    const seen: Record<string, unknown>[] = [];
    const demo = COMMANDS.find((c) => c.name === 'demo')!;
    const probe: Command = { ...demo, run: async (args) => (seen.push(args.values), 0) };
    const { stream } = sink();
    expect(await runCommand(probe, ['--report', '--quiet'], { out: stream, err: stream })).toBe(0);
    expect(await runCommand(probe, ['--quiet', '--report'], { out: stream, err: stream })).toBe(0);
    expect(await runCommand(probe, ['--report', 'mine.html'], { out: stream, err: stream })).toBe(0);
    expect(seen.map((v) => [v.report, v.quiet])).toEqual([
      ['swarmstate-report.html', true],
      ['swarmstate-report.html', true],
      ['mine.html', false],
    ]);
  });
});

describe('help', () => {
  it('help <cmd> and <cmd> --help print the command\'s own help; help alone the global one', async () => {
    for (const name of ['run', 'show', 'validate', 'init', 'machines', 'sim', 'report']) {
      const [a, b] = await Promise.all([cli(['help', name]), cli([name, '--help'])]);
      expect(a.code).toBe(0);
      expect(b.code).toBe(0);
      expect(a.stdout).toBe(b.stdout);
      expect(a.stdout).toContain(`swarmstate ${name}`);
      expect(a.stdout).not.toContain('Commands:');
    }
    const global = await cli(['help']);
    expect(global.code).toBe(0);
    for (const c of COMMANDS) expect(global.stdout).toMatch(new RegExp(`^  ${c.name} `, 'm'));
    expect((await cli(['--help'])).stdout).toBe(global.stdout);
    const unknown = await cli(['help', 'frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe('swarmstate help: unknown command "frobnicate" (see swarmstate help --help)\n');
  });

  it('every command\'s help names every flag it has', () => {
    for (const c of COMMANDS) {
      for (const flag of Object.keys(c.options)) expect(c.usage, `${c.name} --${flag}`).toContain(`--${flag}`);
      expect(c.usage, c.name).toContain('--help');
    }
  });
});

describe('validate --json', () => {
  it('gives the problems as JSON with their paths, exit 2; a good plan valid, exit 0', async () => {
    const plan = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    plan.tasks[1].model = 'nope';
    plan.tasks[2].deps = ['ghost'];
    const file = join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify(plan));
    const bad = await cli(['validate', file, '--json']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('');
    const out = JSON.parse(bad.stdout);
    expect(out.valid).toBe(false);
    expect(out.problems).toEqual(
      expect.arrayContaining([
        { path: 'tasks[1].model', message: expect.stringContaining('nope') },
        { path: 'tasks[2].deps[0]', message: expect.stringContaining('ghost') },
      ]),
    );
    const good = await cli(['validate', 'examples/plans/hello.json', '--json']);
    expect(good.code).toBe(0);
    expect(JSON.parse(good.stdout)).toEqual({ valid: true, problems: [], tasks: 4, models: 1, providers: 1 });
  });
});

describe('machines', () => {
  it('--json has the definition of every machine in machines/, by id', async () => {
    const r = await cli(['machines', '--json']);
    expect(r.code).toBe(0);
    const defs = JSON.parse(r.stdout) as Record<string, { id: string; states: Record<string, unknown> }>;
    // A machine's file is `<id>.machine.ts`, or `machine.ts` in a folder named by its id.
    const files = (readdirSync('machines', { recursive: true }) as string[]).map((f) => f.replace(/\\/g, '/'));
    const ids = files.flatMap((f) => (f.endsWith('/machine.ts') ? [f.split('/').at(-2)!] : f.endsWith('.machine.ts') ? [f.split('/').at(-1)!.replace('.machine.ts', '')] : []));
    expect(Object.keys(defs).sort()).toEqual(ids.sort());
    for (const [id, def] of Object.entries(defs)) {
      expect(def.id).toBe(id);
      expect(Object.keys(def.states).length).toBeGreaterThan(0);
    }
    const list = await cli(['machines']);
    expect(list.stdout).toMatch(/^breaker +closed, open, halfOpen$/m);
    // The task lifecycle, drawn from the table the run table checks (machines/tasks/).
    expect(list.stdout).toMatch(/^task +pending, queued, running, waiting, completed, failed, skipped, cancelled$/m);
  });
});

describe('--json and --verbose on stderr', () => {
  it('--json keeps the run id and a status line on stderr; --quiet silences them', async () => {
    const loud = await cli(['run', 'examples/plans/hello.json', '--json', '--store', 'memory']);
    expect(loud.code).toBe(0);
    const { runId } = JSON.parse(loud.stdout);
    expect(loud.stderr).toMatch(new RegExp(`^run ${runId}\\nrun ${runId} completed: 4/4 tasks completed, \\$[\\d.]+, [\\d.]+s\\n$`));
    const quiet = await cli(['run', 'examples/plans/hello.json', '--json', '--quiet', '--store', 'memory']);
    expect(quiet.code).toBe(0);
    expect(quiet.stderr).toBe('');
  });

  it('--verbose writes a line for every event', async () => {
    const events = join(dir, 'verbose.ndjson');
    const r = await cli(['run', 'examples/plans/hello.json', '--verbose', '--store', 'memory', '--events', events]);
    expect(r.code).toBe(0);
    const written = readFileSync(events, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    const lines = r.stderr.split('\n').filter((l) => /^\[\d+\.\ds\] /.test(l));
    expect(lines).toHaveLength(written.length);
    expect(lines.filter((l) => /task:completed taskId=\w+/.test(l))).toHaveLength(4);
    // The summary table still goes to stdout.
    expect(r.stdout).toMatch(/^status +completed/m);
  });
});

describe('the package entries', () => {
  it('exports attachInspector as swarmstate/inspect', async () => {
    const { execFile } = await import('node:child_process');
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['-e', "import('swarmstate/inspect').then((m) => console.log(typeof m.attachInspector))"], (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))),
    );
    expect(out.trim()).toBe('function');
  });
});

describe('run --ui', () => {
  it('serves the live page on 127.0.0.1 with a token while the run goes, says where, and the run completes', async () => {
    const r = await cli(['run', 'examples/plans/hello.json', '--ui', '--json', '--store', 'memory']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^live page: http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{16,}$/m);
    expect(JSON.parse(r.stdout).status).toBe('completed');
    // A flag of run and demo only.
    expect((await cli(['validate', 'examples/plans/hello.json', '--ui'])).stderr).toContain('unknown option --ui');
  });
});

describe('numeric flags', () => {
  // One parser for every numeric flag of every command: decimal only, a negative number is a value.
  const refused: [string[], string, string][] = [
    [['retry', 'abc', '--budget-usd', '0x10'], 'retry', '--budget-usd must be a number of USD greater than 0, got "0x10"'],
    [['retry', 'abc', '--budget-usd', '-1'], 'retry', '--budget-usd must be a number of USD greater than 0, got "-1"'],
    [['retry', 'abc', '--budget-usd', 'Infinity'], 'retry', '--budget-usd must be a number of USD greater than 0, got "Infinity"'],
    [['run', 'examples/plans/hello.json', '--seed', '0x10'], 'run', '--seed must be an integer, got "0x10"'],
    [['run', 'examples/plans/hello.json', '--seed', '1e400'], 'run', '--seed must be an integer, got "1e400"'],
    [['resume', 'abc', '--seed', '0b1'], 'resume', '--seed must be an integer, got "0b1"'],
    [['demo', '--seed', ' 7'], 'demo', '--seed must be an integer, got " 7"'],
    [['worker', '--redis', 'redis://127.0.0.1:1', '--concurrency', '0x8'], 'worker', '--concurrency must be a positive integer, got "0x8"'],
    [['worker', '--redis', 'redis://127.0.0.1:1', '--lock-ms', '-1'], 'worker', '--lock-ms must be an integer of at least 500, got "-1"'],
    [['sim', '--port', '0x50'], 'sim', '--port must be a port number, got "0x50"'],
    [['sim', '--ttft', '-1'], 'sim', '--ttft must be a number of ms >= 0, got "-1"'],
    [['sim', '--fault-rate', '.5e1'], 'sim', '--fault-rate must be a rate in [0, 1], got ".5e1"'],
  ];
  it.each(refused)('%j is a bad value, in one line', async (args, command, message) => {
    const r = await cli(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`swarmstate ${command}: ${message} (see swarmstate ${command} --help)\n`);
    expect(r.stdout).toBe('');
  });

  it('takes a negative number as the value of a flag, and other values as given', async () => {
    const seen: Record<string, unknown>[] = [];
    const retry = COMMANDS.find((c) => c.name === 'retry')!;
    const probe: Command = { ...retry, run: async (args) => (seen.push(args.values), 0) };
    const { stream } = sink();
    expect(await runCommand(probe, ['abc', '--seed', '-3', '--budget-usd', '-0.5', '--quiet'], { out: stream, err: stream })).toBe(0);
    expect(seen).toEqual([expect.objectContaining({ seed: '-3', 'budget-usd': '-0.5', quiet: true })]);
  });
});

describe('usage errors in one line', () => {
  it('report and sim say what is wrong in one line, as the other commands do, not their whole usage', async () => {
    const cases: [string[], string][] = [
      [['report'], 'swarmstate report: an events file is required (see swarmstate report --help)\n'],
      [['sim', '--rpm', '5'], 'swarmstate sim: --rpm/--itpm/--otpm are per key: give the keys with --keys (see swarmstate sim --help)\n'],
      [['sim', '--keys', ','], 'swarmstate sim: --keys needs at least one key (see swarmstate sim --help)\n'],
      [['worker'], 'swarmstate worker: --redis <redis://host:6379> is required (see swarmstate worker --help)\n'],
    ];
    for (const [args, line] of cases) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toBe(line);
    }
  });
});

describe('init', () => {
  it('into a folder where a file it writes is a dangling link: refused, nothing written, no folder left', async () => {
    const base = mkdtempSync(join(tmpdir(), 'swarmstate-init-'));
    const folder = join(base, 'starter');
    mkdirSync(folder);
    symlinkSync(join(base, 'gone', 'README.md'), join(folder, 'README.md'));
    const r = await cli(['init', folder]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`swarmstate init: ${join(folder, 'README.md')} already exists: nothing written (choose another folder, or move it away)\n`);
    expect(readdirSync(folder)).toEqual(['README.md']);
    // A folder that cannot be written in (its path goes through a dangling link): none made.
    symlinkSync(join(base, 'nowhere'), join(base, 'link'));
    const through = await cli(['init', join(base, 'link', 'deeper', 'starter')]);
    expect(through.code).toBe(2);
    expect(through.stderr).toMatch(/^swarmstate init: cannot write in .*: E[A-Z]+\n$/);
    expect(readdirSync(base).sort()).toEqual(['link', 'starter']);
    expect(existsSync(join(base, 'nowhere'))).toBe(false);
  });
});
