/**
 * The `swarmstate` command. Exit codes: 0 every task completed; 1 the run ended partial, failed
 * or cancelled; 2 an invalid plan, config or command line (every problem listed on stderr).
 */
import { readFile, writeFile, appendFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createSwarm } from '../swarm.js';
import { PlanValidationError, validatePlan } from '../plan/index.js';
import type { RunResult } from '../../machines/runTable.js';
import { simCommand } from '../sim/index.js';
import { buildReport, reportCommand } from '../report/index.js';
import type { TimedRunEvent } from '../swarm.js';
import { createProgress } from './progress.js';
import { formatSummaryTable } from './summary.js';

export const EXIT = { ok: 0, incomplete: 1, invalid: 2 } as const;

const HELP = `swarmstate: run many LLM sub-agents in parallel, reliably and within budget

Usage:
  swarmstate run <plan.json> [--json] [--events <file.ndjson>] [--report <file.html>] [--seed <n>] [--quiet]
  swarmstate validate <plan.json>
  swarmstate report <events.ndjson> [--out <file.html>] [--result <result.json>]
  swarmstate sim [--port 8787] [--seed <n>] [--keys k1,k2 --rpm <n>] [--fault-rate <x>]
  swarmstate demo [--json] [--events <file.ndjson>] [--seed <n>] [--quiet]
  swarmstate --help | --version

Commands:
  run        Validate and run a plan. Keys come from the environment variables the plan names
             (or inline in the plan: then they are redacted everywhere).
  validate   Check a plan and list every problem with its path; runs nothing.
  report     Build the HTML report of a run from its saved event stream (run --events).
  demo       Run a small built-in plan on the embedded simulated provider (no key, no network).
  sim        Start the simulated provider server (Anthropic and OpenAI wire protocols) on
             127.0.0.1 until Ctrl-C; see docs/sim.md for its flags.

Options:
  --json             Print one JSON object (the run result) to stdout at the end; progress off.
  --events <file>    Write every run event to <file> (emptied first), one JSON object per line.
  --report <file>    Write a self-contained HTML report of the run (demo: swarmstate-report.html).
  --seed <n>         Seed of every random choice (retry jitter, the simulator). Default 0.
  --quiet            No progress (on a terminal a live view, elsewhere one line per notable event).
  -h, --help         This help.
  -v, --version      The version.

Exit codes: 0 all tasks completed, 1 partial/failed/cancelled, 2 invalid plan or usage.
Docs: docs/cli.md, docs/plan-format.md`;

export async function main(argv: string[], io = { out: process.stdout, err: process.stderr }): Promise<number> {
  // `sim` and `report` have flags of their own: hand them everything after the command.
  if (argv[0] === 'sim') return simCommand(argv.slice(1), io);
  if (argv[0] === 'report') return reportCommand(argv.slice(1), io);
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        events: { type: 'string' },
        report: { type: 'string' },
        seed: { type: 'string' },
        quiet: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', short: 'v', default: false },
      },
    });
  } catch (error) {
    io.err.write(`swarmstate: ${(error as Error).message}\n\n${HELP}\n`);
    return EXIT.invalid;
  }
  const { values, positionals } = parsed;
  if (values.version) {
    io.out.write(`${await version()}\n`);
    return EXIT.ok;
  }
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    io.out.write(`${HELP}\n`);
    return values.help ? EXIT.ok : EXIT.invalid;
  }
  const seed = values.seed === undefined ? 0 : Number(values.seed);
  if (!Number.isInteger(seed)) {
    io.err.write(`swarmstate: --seed must be an integer, got "${values.seed}"\n`);
    return EXIT.invalid;
  }

  switch (command) {
    case 'validate': {
      const plan = await loadPlan(rest[0], io.err);
      if (plan === undefined) return EXIT.invalid;
      // The CLI registers no in-process tools, so `validate` judges tool names as `run` would.
      const checked = validatePlan(plan, { tools: [] });
      if (!checked.ok) {
        io.err.write(new PlanValidationError(checked.issues).message + '\n');
        return EXIT.invalid;
      }
      io.out.write(`plan is valid: ${checked.plan.tasks.length} tasks, ${Object.keys(checked.plan.models).length} models, ${Object.keys(checked.plan.providers).length} providers\n`);
      return EXIT.ok;
    }
    case 'run': {
      const plan = await loadPlan(rest[0], io.err);
      if (plan === undefined) return EXIT.invalid;
      return runPlan(plan, { seed, json: values.json, quiet: values.quiet, events: values.events, report: values.report }, io);
    }
    case 'demo': {
      const plan = await loadPlan(join(packageRoot(), 'examples', 'demo', 'plan.json'), io.err);
      if (plan === undefined) return EXIT.invalid;
      return runPlan(plan, { seed, json: values.json, quiet: values.quiet, events: values.events, report: values.report ?? 'swarmstate-report.html', demo: true }, io);
    }
    default:
      io.err.write(`swarmstate: unknown command "${command}"\n\n${HELP}\n`);
      return EXIT.invalid;
  }
}

async function loadPlan(path: string | undefined, err: NodeJS.WritableStream): Promise<unknown> {
  if (!path) {
    err.write('swarmstate: a plan file is required (swarmstate run <plan.json>)\n');
    return undefined;
  }
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    err.write(`swarmstate: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}\n`);
    return undefined;
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    err.write(`swarmstate: ${path} is not valid JSON: ${(error as Error).message}\n`);
    return undefined;
  }
}

interface RunFlags {
  seed: number;
  json: boolean;
  quiet: boolean;
  events: string | undefined;
  report: string | undefined;
  demo?: boolean;
}

async function runPlan(plan: unknown, flags: RunFlags, io: { out: NodeJS.WritableStream; err: NodeJS.WritableStream }): Promise<number> {
  if (flags.events) await writeFile(flags.events, '');
  const swarm = createSwarm({ seed: flags.seed });
  let run;
  try {
    run = swarm.run(plan);
  } catch (error) {
    if (error instanceof PlanValidationError) {
      io.err.write(error.message + '\n');
      return EXIT.invalid;
    }
    io.err.write(`swarmstate: ${(error as Error).message}\n`);
    return EXIT.invalid;
  }
  // Every event is kept for the summary and the report, and written to --events as it comes.
  const seen: TimedRunEvent[] = [];
  run.events.on('*', (_type, event) => void seen.push(event as TimedRunEvent));
  let writes: Promise<void> = Promise.resolve();
  if (flags.events) {
    const file = flags.events;
    run.events.on('*', (_type, event) => {
      const line = JSON.stringify(event) + '\n';
      writes = writes.then(() => appendFile(file, line));
    });
  }
  const err = io.err as NodeJS.WritableStream & { isTTY?: boolean };
  const budgetUsd = (plan as { budget?: { usd?: number } }).budget?.usd;
  const progress =
    flags.json || flags.quiet ? undefined : createProgress({ out: io.err, tty: err.isTTY === true, ...(budgetUsd ? { budgetUsd } : {}) });
  if (progress) run.events.on('*', (_type, event) => progress.onEvent(event as TimedRunEvent));
  const stopOnSignal = () => run.cancel('interrupted (SIGINT)');
  process.once('SIGINT', stopOnSignal);
  let result: RunResult;
  try {
    result = await run.result;
  } catch (error) {
    // The run could not start: a tool its server lacks, a server that does not connect.
    io.err.write(`swarmstate: ${(error as Error).message}\n`);
    return EXIT.invalid;
  } finally {
    process.off('SIGINT', stopOnSignal);
    progress?.finish();
    await writes;
    await swarm.close();
  }
  if (flags.report) {
    await writeFile(flags.report, buildReport({ events: seen, result }));
    if (!flags.json) io.err.write(`report: ${flags.report}\n`);
  }
  if (flags.json) io.out.write(JSON.stringify(result) + '\n');
  else io.out.write(formatSummaryTable(result, seen) + '\n');
  return result.status === 'completed' ? EXIT.ok : EXIT.incomplete;
}

/** The package's root folder, from src/cli (tsx) or dist/src/cli (the build). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('swarmstate: cannot find package.json');
    dir = up;
  }
  return dir;
}

async function version(): Promise<string> {
  const pkg = JSON.parse(await readFile(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}
