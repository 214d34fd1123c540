/** The `swarmstate` command: help, validation (exit 2 with every problem), runs, --json, --events. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, slowPlanFile, start, until } from './helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-cli-'));

describe('swarmstate CLI', () => {
  it('prints help with every command, exit 0; a command\'s help has its flags', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    for (const word of ['run', 'validate', 'demo', 'show', 'init', 'machines', 'Exit codes']) expect(r.stdout).toContain(word);
    const run = await cli(['run', '--help']);
    expect(run.code).toBe(0);
    for (const word of ['--json', '--events', '--store', '--redis', 'Exit codes']) expect(run.stdout).toContain(word);
  });

  it('rejects an unknown command and a missing plan with exit 2', async () => {
    expect((await cli(['frobnicate'])).code).toBe(2);
    const missing = await cli(['run', join(dir, 'nope.json')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read/);
  });

  it('validate lists every problem with its path and exits 2; nothing runs', async () => {
    const plan = {
      providers: { main: { type: 'anthropic', keys: [{ env: 'SWARMSTATE_TEST_MISSING_KEY' }] } },
      models: { fast: { provider: 'main', model: 'claude-haiku-4-5' } },
      tasks: [
        { id: 'a', model: 'fast', prompt: 'x', deps: ['b'] },
        { id: 'b', model: 'fast', prompt: 'y', deps: ['a'] },
        { id: 'c', model: 'nope', prompt: 'z', deps: ['ghost'] },
      ],
    };
    const file = join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify(plan));
    for (const command of ['validate', 'run']) {
      const r = await cli([command, file]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/providers\.main\.keys\[0\]\.env: environment variable SWARMSTATE_TEST_MISSING_KEY is not set/);
      expect(r.stderr).toMatch(/cycle: a -> b -> a|cycle: b -> a -> b/);
      expect(r.stderr).toMatch(/tasks\[2\]\.model: .*nope/);
      expect(r.stderr).toMatch(/tasks\[2\]\.deps\[0\]: .*ghost/);
      expect(r.stdout).toBe('');
    }
  });

  it('validate accepts a good plan, exit 0', async () => {
    const r = await cli(['validate', 'examples/plans/hello.json']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/plan is valid: 4 tasks/);
  });

  it('run --json prints one JSON result to stdout and --events writes NDJSON', async () => {
    const events = join(dir, 'events.ndjson');
    const r = await cli(['run', 'examples/plans/hello.json', '--json', '--events', events]);
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({ status: 'completed', totals: { tasks: 4, completed: 4, failed: 0, skipped: 0 } });
    expect(Object.keys(result.tasks).sort()).toEqual(['body', 'final', 'intro', 'outline']);
    expect(result.tasks.final.output).toEqual(expect.any(String));
    // hello.json prices its model: every task and the total carry a cost.
    expect(result.tasks.final.costUsd).toBeGreaterThan(0);
    expect(result.totals.costUsd).toBeCloseTo(Object.values(result.tasks).reduce((s: number, t) => s + (t as { costUsd: number }).costUsd, 0), 8);
    const lines = readFileSync(events, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0].type).toBe('run:started');
    expect(lines.at(-1).type).toBe('run:completed');
    expect(lines.filter((l) => l.type === 'task:completed')).toHaveLength(4);
  });

  it('exits 1 when the run ends partial, with the failure and the skipped dependents in the result', async () => {
    const plan = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    // The simulator answers this prompt with a 400: a fatal error, not retried.
    plan.tasks[1].prompt = 'Write the introduction. [[sim:error 400]]';
    const file = join(dir, 'partial.json');
    writeFileSync(file, JSON.stringify(plan));
    const r = await cli(['run', file, '--json']);
    expect(r.code).toBe(1);
    const result = JSON.parse(r.stdout);
    expect(result.status).toBe('partial');
    expect(result.tasks.intro).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'bad_request', retryable: false } });
    expect(result.tasks.final.status).toBe('skipped');
    expect(result.tasks.body.status).toBe('completed');
  });

  it('runs a plan whose task ids, models and providers are named __proto__ and constructor', async () => {
    // Written as text: JSON.parse makes `__proto__` an own key, as any plan file does.
    const file = join(dir, 'proto.json');
    writeFileSync(
      file,
      `{
        "providers": { "__proto__": { "type": "sim" }, "constructor": { "type": "sim" } },
        "models": {
          "__proto__": { "provider": "__proto__", "model": "sim-fast", "maxInFlight": 1, "fallback": ["constructor"], "price": { "input": 1, "output": 5 } },
          "constructor": { "provider": "constructor", "model": "sim-fast", "price": { "input": 1, "output": 5 } }
        },
        "budget": { "usd": 1, "perModel": { "__proto__": 0.5, "constructor": 0.5 } },
        "tasks": [
          { "id": "__proto__", "model": "__proto__", "prompt": "first", "budgetUsd": 0.1 },
          { "id": "constructor", "model": "constructor", "prompt": "then {{__proto__}}", "deps": ["__proto__"] },
          { "id": "toString", "model": "__proto__", "prompt": "apart" }
        ]
      }`,
    );
    expect((await cli(['validate', file])).stdout).toMatch(/plan is valid: 3 tasks, 2 models, 2 providers/);
    const r = await cli(['run', file, '--json', '--store', 'memory']);
    // --json keeps stdout to the result; the run id and how it ended still go to stderr.
    expect(r.stderr).toMatch(/^run \w+\nrun \w+ completed: 3\/3 tasks completed, [^\n]+\n$/);
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.status).toBe('completed');
    expect(Object.keys(result.tasks).sort()).toEqual(['__proto__', 'constructor', 'toString']);
    expect(result.tasks['__proto__']).toMatchObject({ id: '__proto__', status: 'completed', model: '__proto__' });
    expect(result.tasks.constructor).toMatchObject({ id: 'constructor', status: 'completed', model: 'constructor' });
    expect(Object.keys(result.routes).sort()).toEqual(['__proto__/sim-fast', 'constructor/sim-fast']);
  });

  it('shows the control characters of a server error escaped on the terminal, and keeps them in --json', async () => {
    // Clear screen, window title, OSC 52 clipboard write, CR, a C1 CSI: what a hostile server may send.
    const hostile = 'denied\x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x07\roverwritten\u009b31m';
    const server = createServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: hostile } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const plan = {
        providers: { evil: { type: 'anthropic', baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, keys: [{ env: 'SWARMSTATE_TEST_EVIL_KEY' }] } },
        models: { m: { provider: 'evil', model: 'claude-haiku-4-5' } },
        tasks: [{ id: 'a', model: 'm', prompt: 'hi' }],
      };
      const file = join(dir, 'hostile.json');
      writeFileSync(file, JSON.stringify(plan));
      const env = { SWARMSTATE_TEST_EVIL_KEY: 'sk-test-evil' };
      const r = await cli(['run', file, '--store', 'memory'], env);
      expect(r.code).toBe(1);
      const controls = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
      expect(r.stderr).not.toMatch(controls);
      expect(r.stdout).not.toMatch(controls);
      expect(r.stderr).toContain('denied\\e[2J\\e]0;pwned\\x07');
      expect(r.stdout).toMatch(/^failed a: bad_request: .*denied\\e\[2J/m);
      const json = await cli(['run', file, '--store', 'memory', '--json'], env);
      expect(json.stdout).not.toMatch(controls);
      expect(JSON.parse(json.stdout).tasks.a.error.message).toContain(hostile);
    } finally {
      server.close();
    }
  });

  it('prints an invalid plan without the control characters of its names', async () => {
    const plan = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    plan.tasks[0].model = 'fast\x1b]0;pwned\x07\r';
    const file = join(dir, 'control-names.json');
    writeFileSync(file, JSON.stringify(plan));
    const r = await cli(['validate', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('tasks[0].model: unknown model "fast\\e]0;pwned\\x07\\r"');
    expect(r.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  });

  it('SIGTERM cancels the run as Ctrl-C does: result printed, events complete, journal cancelled', async () => {
    const file = slowPlanFile(join(dir, 'slow.json')); // its first call is in flight for a minute
    const events = join(dir, 'sigterm.ndjson');
    const store = join(dir, 'sigterm.db');
    const run = start(['run', file, '--json', '--events', events, '--store', store]);
    await until(() => existsSync(events) && readFileSync(events, 'utf8').includes('"model:request"'), 'the first model call');
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exit;
    expect(signal).toBeNull();
    expect(code).toBe(1);
    const result = JSON.parse(run.out.stdout);
    expect(result.status).toBe('cancelled');
    expect(result.tasks.a.status).toBe('cancelled');
    const lines = readFileSync(events, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.find((l) => l.type === 'run:cancelled')).toMatchObject({ reason: 'interrupted (SIGTERM)' });
    expect(lines.at(-1)).toMatchObject({ type: 'run:completed', status: 'cancelled' });
    const runs = JSON.parse((await cli(['runs', '--store', store, '--json'])).stdout);
    expect(runs.find((r: { id: string }) => r.id === result.runId)).toMatchObject({ status: 'cancelled' });
  });

  it('a run refused at start prints why and nothing else: no resume hint, no progress line', async () => {
    const store = join(dir, 'refused.db');
    const plan = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    plan.tools = { servers: { gone: { command: join(dir, 'no-such-server') } } };
    plan.tasks[0].tools = ['gone.look'];
    const file = join(dir, 'refused.json');
    writeFileSync(file, JSON.stringify(plan));
    const refused = await cli(['run', file, '--store', store]);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `swarmstate: the plan's tools are not available:\n  tools.servers.gone: cannot connect: could not connect to MCP server "gone" (command "${join(dir, 'no-such-server')}"): spawn ${join(dir, 'no-such-server')} ENOENT\n`,
    );
    plan.tools = undefined;
    plan.tasks[0].tools = undefined;
    plan.tasks[0].model = 'nope';
    writeFileSync(file, JSON.stringify(plan));
    const invalid = await cli(['run', file, '--store', store]);
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toBe('invalid plan: 1 problem, fix it and run again\ntasks[0].model: unknown model "nope"\n');
    // A run another process holds: the one line that says so.
    const slow = start(['run', slowPlanFile(join(dir, 'held.json')), '--store', store]);
    await until(() => /^run (\w+) /m.test(slow.out.stderr), 'the held run to start');
    const runId = /^run (\w+) /m.exec(slow.out.stderr)![1]!;
    const locked = await cli(['resume', runId, '--store', store]);
    slow.child.kill('SIGTERM');
    await slow.exit;
    expect(locked.code).toBe(3);
    expect(locked.stderr).toMatch(new RegExp(`^swarmstate: run ${runId} is already being run by process \\d+ on [^\\n]+; not starting it twice\\n$`));
  });

  it('a JSON syntax error says its line and column: run, validate, resume --plan, report --result', async () => {
    const file = join(dir, 'syntax.json');
    // The stray comma on line 3: the next character, column 27, is where the parser stops.
    writeFileSync(file, '\uFEFF{\n  "providers": {\n    "sim": {"type": "sim",}\n  }\n}\n');
    const at = `${file} is not valid JSON: line 3, column 27: `;
    for (const args of [['run', file], ['validate', file], ['validate', file, '--json'], ['resume', 'someRun', '--plan', file, '--store', 'memory']]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.startsWith(`swarmstate: ${at}`), r.stderr).toBe(true);
      expect(r.stderr).not.toContain('position');
    }
    const cut = join(dir, 'cut.json');
    writeFileSync(cut, '{"runId": "x",\n "status": "compl');
    writeFileSync(join(dir, 'one.ndjson'), '{"type":"run:started","at":0,"runId":"x","tasks":0}\n');
    const report = await cli(['report', join(dir, 'one.ndjson'), '--result', cut, '--out', join(dir, 'cut.html')]);
    expect(report.code).toBe(2);
    expect(report.stderr).toBe(`swarmstate report: ${cut} is not valid JSON: line 2, column 18: Unterminated string\n`);
  });

  it('retry --budget-usd below what the run spent shows both amounts with the digits that tell them apart', async () => {
    const plan = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    plan.tasks[1].prompt = 'Write the introduction. [[sim:error 400]]';
    const file = join(dir, 'to-retry.json');
    writeFileSync(file, JSON.stringify(plan));
    const store = join(dir, 'to-retry.db');
    const first = await cli(['run', file, '--store', store, '--json', '--quiet']);
    expect(first.code).toBe(1);
    const { runId } = JSON.parse(first.stdout) as { runId: string };
    const r = await cli(['retry', runId, '--store', store, '--budget-usd', '0.00001']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("the retry's budget is too low: budget.usd: $0.00001 is not above what the run has spent ($0.000312)");
  });

  it('reads a plan saved with a UTF-8 byte order mark', async () => {
    const file = join(dir, 'bom.json');
    writeFileSync(file, '\uFEFF' + readFileSync('examples/plans/hello.json', 'utf8'));
    const r = await cli(['validate', file]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/plan is valid: 4 tasks/);
  });

  it('refuses an --events or --report file that is the plan, the journal or the other output', async () => {
    const file = join(dir, 'keep-me.json');
    const text = readFileSync('examples/plans/hello.json', 'utf8');
    writeFileSync(file, text);
    const store = join(dir, 'keep-me.db');
    const same = await cli(['run', file, '--events', join(dir, '.', 'keep-me.json'), '--store', store]);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain(`--events ${join(dir, 'keep-me.json')} is the plan file`);
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(existsSync(store)).toBe(false);
    const journal = await cli(['run', file, '--report', store, '--store', store]);
    expect(journal.code).toBe(2);
    expect(journal.stderr).toContain('is the run journal');
    const both = await cli(['run', file, '--events', join(dir, 'out'), '--report', join(dir, 'out'), '--store', 'memory']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--events and --report name the same file');
  });

  it('runs and resume create no journal where there is none; a memory journal gets no resume hint', async () => {
    const typo = join(dir, 'typo', 'dir', 'x.db');
    const runs = await cli(['runs', '--store', typo]);
    expect(runs.code).toBe(2);
    expect(runs.stderr).toContain(`no run journal at ${typo}`);
    const resume = await cli(['resume', 'abc', '--store', typo]);
    expect(resume.code).toBe(2);
    expect(resume.stderr).toContain(`no run journal at ${typo}`);
    expect(existsSync(join(dir, 'typo'))).toBe(false);
    const memory = await cli(['run', 'examples/plans/hello.json', '--store', 'memory']);
    expect(memory.code).toBe(0);
    expect(memory.stderr).toMatch(/^run [\w-]+$/m);
    expect(memory.stderr).not.toContain('resume');
  });

  it('never prints an inline key', async () => {
    const plan = JSON.parse(readFileSync('examples/plans/hello.json', 'utf8'));
    plan.providers.sim.keys = ['sk-very-secret-inline-key-123'];
    const file = join(dir, 'inline.json');
    writeFileSync(file, JSON.stringify(plan));
    const events = join(dir, 'inline.ndjson');
    const r = await cli(['run', file, '--events', events]);
    expect(r.code).toBe(0);
    const all = r.stdout + r.stderr + readFileSync(events, 'utf8');
    expect(all).not.toContain('sk-very-secret-inline-key-123');
    expect(all).toMatch(/sim:[0-9a-f]{8}/);
  });

  it('demo runs a real swarm on the embedded simulator and writes its report, exit 0', async () => {
    const report = join(dir, 'demo-report.html');
    const r = await cli(['demo', '--json', '--report', report]);
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.status).toBe('completed');
    expect(result.totals.completed).toBe(result.totals.tasks);
    expect(readFileSync(report, 'utf8')).toMatch(/^<!doctype html>/i);
  });

  it('report builds the HTML report from a saved event stream', async () => {
    const events = join(dir, 'report-events.ndjson');
    await cli(['run', 'examples/plans/hello.json', '--quiet', '--events', events]);
    const out = join(dir, 'from-events.html');
    const r = await cli(['report', events, '--out', out]);
    expect(r.code).toBe(0);
    const html = readFileSync(out, 'utf8');
    const requests = readFileSync(events, 'utf8').split('\n').filter((l) => l.includes('"model:request"')).length;
    expect(html.match(/data-call=/g)?.length).toBe(requests);
  });

  it('progress off a terminal is one line per notable event, and the summary table goes to stdout', async () => {
    const r = await cli(['run', 'examples/plans/hello.json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^\[0\.\ds\] run [\w-]+: 4 tasks/m); // run ids use nanoid's alphabet (with - and _)
    expect(r.stderr).toMatch(/run completed: 4\/4 done/);
    expect(r.stdout).toMatch(/^status +completed/m);
    expect(r.stdout).toMatch(/^total +4 +4 /m);
  });
});
