/**
 * The `swarmstate` command. Exit codes: 0 every task completed; 1 the run ended partial, failed,
 * cancelled or over budget; 2 an invalid plan, config or command line (every problem listed on
 * stderr); 3 the run is held by another process; 4 the run's journal could not be written.
 */
import { readFile, writeFile, appendFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { createSwarm, RunLockedError, type Swarm } from '../swarm.js';
import { StoreError } from '../store/index.js';
import { PlanValidationError, validatePlan } from '../plan/index.js';
import type { RunResult } from '../../machines/runTable.js';
import { simCommand } from '../sim/index.js';
import { buildReport, reportCommand } from '../report/index.js';
import type { TimedRunEvent } from '../swarm.js';
import { terminalMode } from './colour.js';
import { createProgress } from './progress.js';
import { formatSummaryTable } from './summary.js';
import { demoIntro, demoPlanPath, packageRoot, planJson, withPlanFolder } from './demo.js';
import { realPlan } from './real.js';
import { errorText, jsonForTerminal, visible } from './terminal.js';
import { missingJournal, outputConflict, storeFileOf, storeSpecOf } from './paths.js';
import { importOptional } from '../util/optional.js';
import { redisForDisplay } from '../distributed/redis.js';

import { EXIT } from './exit.js';
import { connectRedis, listRuns, workerCommand } from './commands.js';

export { EXIT };

/** The help; `docs` is where the installed package's docs are (they ship with it). */
const helpText = (docs: string, schema: string) => `swarmstate: run many LLM sub-agents in parallel, reliably and within budget

Usage:
  swarmstate run <plan.json> [--json] [--events <file.ndjson>] [--report <file.html>] [--seed <n>]
                 [--quiet] [--inspect [--inspect-url <ws://...>]] [--real]
  swarmstate resume <runId> [--store <file>] [--plan <plan.json>] [--json] [--events <file>] [--report <file>] [--quiet]
  swarmstate retry <runId> [--tasks <id,id>] [--store <file>] [--plan <plan.json>] [--json] [--events <file>] [--report <file>] [--quiet]
  swarmstate runs [--store <file>] [--json]
  swarmstate worker --redis <redis://host:6379> [--concurrency 8] [--lock-ms 30000]
  swarmstate validate <plan.json>
  swarmstate report <events.ndjson> [--out <file.html>] [--result <result.json>]
  swarmstate sim [--port 8787] [--seed <n>] [--keys k1,k2 --rpm <n>] [--fault-rate <x>]
  swarmstate demo [--json] [--events <file.ndjson>] [--report <file.html>] [--seed <n>] [--quiet]
                  [--inspect [--inspect-url <ws://...>]] [--real]
  swarmstate --help | --version

Commands:
  run        Validate and run a plan. Keys come from the environment variables the plan names
             (or inline in the plan: then they are redacted everywhere).
  resume     Continue a run that was interrupted (a crash, Ctrl-C, a full disk) from its journal:
             completed tasks are not run again, budgets continue from what was spent. A run that
             had finished prints its result.
  retry      Run the failed, skipped and cancelled tasks of a finished run again (and what depends
             on them), with fresh retries, as the same run: completed tasks keep their outputs and
             are not sent again, the budget continues from what was spent.
  runs       List the journaled runs: id, status, progress, cost.
  worker     Make the model and tool calls of distributed runs (run --redis): start as many as
             you like, on any machine with the keys' environment variables; stop them any time.
  validate   Check a plan and list every problem with its path; runs nothing.
  report     Build the HTML report of a run from its saved event stream (run --events).
  demo       Run the catalog swarm (examples/catalog-swarm: maps and a reduce, 874 tasks, 3 keys
             with limits, faults, an MCP tool, a cached brief) on the embedded simulated provider:
             no key, no network, under a minute.
  sim        Start the simulated provider server (Anthropic and OpenAI wire protocols) on
             127.0.0.1 until Ctrl-C; see ${join(docs, 'sim.md')} for its flags.

Options:
  --json             Print one JSON object (the run result) to stdout at the end; progress off.
  --events <file>    Write every run event to <file> (emptied first), one JSON object per line.
  --report <file>    Write a self-contained HTML report of the run (demo: swarmstate-report.html).
  --inspect          Send every actor's events to a Stately inspector over WebSocket (needs the
                     optional package @statelyai/inspect; see cli.md).
  --inspect-url <u>  Where the inspector listens. Default ws://localhost:8080.
  --real             Run a simulator plan on real keys: ANTHROPIC_API_KEY, or OPENAI_API_KEY
                     (and OPENAI_BASE_URL); the sim settings and [[sim:...]] directives are dropped.
  --seed <n>         Seed of every random choice (retry jitter, the simulator). Default 0.
  --store <file>     The run journal: a SQLite file, or "memory" (no journal kept). Default
                     $SWARMSTATE_STORE, else .swarmstate/runs.db in the working directory.
  --tasks <ids>      retry: only these tasks (comma-separated) and what depends on them.
  --plan <file>      resume, retry: the plan file again, for a run whose plan had inline keys (never stored).
  --redis <url>      run/resume/retry: coordinate a distributed run on this Redis (BullMQ): every model
                     and tool call goes to \`swarmstate worker\` processes. Keys from the environment only.
                     run, resume and worker wait at most 10 s for Redis to answer
                     ($SWARMSTATE_REDIS_CONNECT_MS, in ms), then exit 2. Needs the optional
                     packages bullmq and ioredis (npm install bullmq ioredis).
  --concurrency <n>  worker: calls at once. Default 8.
  --lock-ms <n>      worker: how soon another worker takes over the jobs of a worker that died. Default 30000.
  --quiet            No progress (on a terminal a live view, elsewhere one line per notable event).
  -h, --help         This help.
  -v, --version      The version.

Exit codes: 0 all tasks completed, 1 partial/failed/cancelled/budget_exceeded, 2 invalid plan or usage,
3 the run is held by another process, 4 the journal could not be written (resume once fixed).
Docs (in this package): ${join(docs, 'cli.md')}, ${join(docs, 'plan-format.md')}
  also at ${DOCS_URL}
Plan JSON Schema (for editors, as "$schema"): ${schema}`;

const DOCS_URL = 'https://github.com/swarmstate/swarmstate/tree/main/docs';

let help: string | undefined;
/** The help text, with the docs' paths in the package this command runs from. */
function HELP(): string {
  const root = packageRoot();
  return (help ??= helpText(join(root, 'docs'), join(root, 'schema', 'plan.schema.json')));
}

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
        inspect: { type: 'boolean', default: false },
        'inspect-url': { type: 'string' },
        real: { type: 'boolean', default: false },
        quiet: { type: 'boolean', default: false },
        store: { type: 'string' },
        plan: { type: 'string' },
        tasks: { type: 'string' },
        redis: { type: 'string' },
        concurrency: { type: 'string' },
        'lock-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', short: 'v', default: false },
      },
    });
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n\n${HELP()}\n`);
    return EXIT.invalid;
  }
  const { values, positionals } = parsed;
  if (values.version) {
    io.out.write(`${await version()}\n`);
    return EXIT.ok;
  }
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    io.out.write(`${HELP()}\n`);
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
        io.err.write(errorText(new PlanValidationError(checked.issues)) + '\n');
        return EXIT.invalid;
      }
      io.out.write(`plan is valid: ${checked.plan.tasks.length} tasks, ${Object.keys(checked.plan.models).length} models, ${Object.keys(checked.plan.providers).length} providers\n`);
      return EXIT.ok;
    }
    case 'runs':
      return listRuns(values.store, values.json, io);
    case 'worker':
      return workerCommand(values.redis, values.concurrency, values['lock-ms'], io);
    case 'resume':
    case 'retry': {
      const runId = rest[0];
      if (!runId) {
        io.err.write(`swarmstate: a run id is required (swarmstate ${command} <runId>; \`swarmstate runs\` lists them)\n`);
        return EXIT.invalid;
      }
      if (values.tasks !== undefined && command !== 'retry') {
        io.err.write('swarmstate: --tasks is for retry (swarmstate retry <runId> --tasks a,b)\n');
        return EXIT.invalid;
      }
      const tasks = values.tasks?.split(',').map((t) => t.trim()).filter((t) => t !== '');
      if (tasks !== undefined && tasks.length === 0) {
        io.err.write('swarmstate: --tasks needs task ids, comma-separated (swarmstate retry <runId> --tasks a,b)\n');
        return EXIT.invalid;
      }
      let planAgain: unknown;
      if (values.plan !== undefined) {
        planAgain = await loadPlan(values.plan, io.err);
        if (planAgain === undefined) return EXIT.invalid;
      }
      return runPlan(
        { resume: runId, ...(command === 'retry' ? { retry: tasks ?? 'all' } : {}), ...(planAgain !== undefined ? { plan: planAgain, planFile: resolve(values.plan!) } : {}) },
        { seed, json: values.json, quiet: values.quiet, events: values.events, report: values.report, inspect: undefined, store: values.store, redis: values.redis },
        io,
      );
    }
    case 'run':
    case 'demo': {
      const path = command === 'demo' ? demoPlanPath() : rest[0];
      let plan = await loadPlan(path, io.err);
      if (plan === undefined) return EXIT.invalid;
      if (values.real) {
        try {
          const converted = realPlan(plan as Record<string, unknown>, process.env);
          plan = converted.plan;
          for (const note of converted.notes) io.err.write(`real: ${visible(note)}\n`);
        } catch (error) {
          io.err.write(`swarmstate: ${errorText(error)}\n`);
          return EXIT.invalid;
        }
      }
      if (command === 'demo' && !values.json && !values.quiet) io.err.write(demoIntro(plan as Record<string, unknown>) + '\n');
      return runPlan(
        { plan, source: resolve(path!) },
        {
          seed,
          store: values.store,
          redis: values.redis,
          json: values.json,
          quiet: values.quiet,
          events: values.events,
          report: values.report ?? (command === 'demo' ? 'swarmstate-report.html' : undefined),
          inspect: values.inspect ? (values['inspect-url'] ?? 'ws://localhost:8080') : undefined,
        },
        io,
      );
    }
    default:
      io.err.write(`swarmstate: unknown command "${command}"\n\n${HELP()}\n`);
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
    err.write(`swarmstate: cannot read ${path}: ${reasonOf(error)}\n`);
    return undefined;
  }
  try {
    // A plan's stdio tool servers run in the plan's folder unless they name one.
    return withPlanFolder(planJson(text), dirname(resolve(path)));
  } catch (error) {
    err.write(`swarmstate: ${path} is not valid JSON: ${errorText(error)}\n`);
    return undefined;
  }
}

interface RunFlags {
  seed: number;
  json: boolean;
  quiet: boolean;
  events: string | undefined;
  report: string | undefined;
  /** The inspector's WebSocket URL, when --inspect. */
  inspect: string | undefined;
  /** --store: the journal's file, or "memory". */
  store: string | undefined;
  /** --redis: coordinate a distributed run on this Redis. */
  redis: string | undefined;
}

/** A new run of a plan (from its file), or a journaled run to resume (or to retry: its failures, or these tasks). */
type RunTarget = { plan: unknown; source: string } | { resume: string; retry?: string[] | 'all'; plan?: unknown; planFile?: string };

async function runPlan(target: RunTarget, flags: RunFlags, io: { out: NodeJS.WritableStream; err: NodeJS.WritableStream }): Promise<number> {
  const plan = 'resume' in target ? undefined : target.plan;
  const storeSpec = storeSpecOf(flags.store);
  const journal = storeFileOf(storeSpec);
  if ('resume' in target && missingJournal(storeSpec) !== undefined) {
    // Opening it would create an empty journal (and its folders) that cannot hold the run.
    io.err.write(`swarmstate: no run journal at ${visible(journal!)}: run ${visible(target.resume)} is not there (check --store or $SWARMSTATE_STORE; \`swarmstate runs\` lists a journal's runs)\n`);
    return EXIT.invalid;
  }
  const conflict = outputConflict(
    [{ flag: '--events', path: flags.events }, { flag: '--report', path: flags.report }],
    [
      { what: 'the plan file', path: 'resume' in target ? target.planFile : target.source },
      ...(journal !== undefined ? ['', '-wal', '-shm'].map((end) => ({ what: 'the run journal', path: journal + end })) : []),
    ],
  );
  if (conflict) {
    io.err.write(`swarmstate: ${visible(conflict)}\n`);
    return EXIT.invalid;
  }
  if (flags.events) {
    try {
      await writeFile(flags.events, '');
    } catch (error) {
      io.err.write(`swarmstate: cannot write --events ${flags.events}: ${reasonOf(error)}\n`);
      return EXIT.invalid;
    }
  }
  if (flags.redis !== undefined) {
    const reached = await connectRedis(flags.redis, io);
    if (reached !== 'ready') return reached === 'interrupted' ? EXIT.incomplete : EXIT.invalid;
  }
  // Loaded only when asked for: the inspector is an optional package most runs never touch.
  let inspector;
  if (flags.inspect) {
    try {
      const { attachInspector } = await importOptional(() => import('./inspect.js'), ['@statelyai/inspect'], '--inspect');
      inspector = attachInspector({ url: flags.inspect, onError: (e: Error) => void io.err.write(`inspect: ${errorText(e)}\n`) });
    } catch (error) {
      io.err.write(`swarmstate: ${errorText(error)}\n`);
      return EXIT.invalid;
    }
  }
  let swarm;
  try {
    swarm = createSwarm({
      seed: flags.seed,
      ...(inspector ? { inspect: inspector.inspect } : {}),
      ...(flags.store !== undefined ? { store: flags.store } : {}),
      ...(flags.redis !== undefined ? { redis: flags.redis } : {}),
    });
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.invalid;
  }
  let run;
  try {
    run = 'resume' in target ? continued(swarm, target) : swarm.run(target.plan, { source: target.source });
  } catch (error) {
    await swarm.close();
    if (error instanceof PlanValidationError) {
      io.err.write(errorText(error) + '\n');
      return EXIT.invalid;
    }
    if (error instanceof RunLockedError) {
      io.err.write(`swarmstate: ${errorText(error)}\n`);
      return EXIT.locked;
    }
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return error instanceof StoreError ? EXIT.journal : EXIT.invalid;
  }
  // A journal kept in memory ends with the process: there is nothing to resume from.
  const resumeHint = journal === undefined ? '' : ` (if interrupted: ${resumeCommand(run.id, flags)})`;
  if (!flags.quiet && !flags.json) io.err.write(`${'resume' in target ? (target.retry ? 'retrying' : 'resuming') : 'run'} ${run.id}${resumeHint}\n`);
  // Every event is kept for the summary and the report, and written to --events as it comes.
  const seen: TimedRunEvent[] = [];
  run.events.on('*', (_type, event) => void seen.push(event as TimedRunEvent));
  let writes: Promise<void> = Promise.resolve();
  let eventsFailed = false;
  if (flags.events) {
    const file = flags.events;
    run.events.on('*', (_type, event) => {
      const line = JSON.stringify(event) + '\n';
      if (eventsFailed) return;
      writes = writes
        .then(() => (eventsFailed ? undefined : appendFile(file, line)))
        .catch((error: unknown) => {
          // A disk that fills up must not take the run down: say so once, stop writing.
          if (!eventsFailed) io.err.write(`swarmstate: writing ${file} failed: ${reasonOf(error)}; events are no longer written\n`);
          eventsFailed = true;
        });
    });
  }
  // The budget comes with run:started, so a resume (no plan file read here) shows it too.
  const mode = terminalMode(io.err as NodeJS.WritableStream & { isTTY?: boolean; columns?: number }, process.env);
  const progress = flags.json || flags.quiet ? undefined : createProgress({ out: io.err, tty: mode.live, colour: mode.colour });
  if (progress) run.events.on('*', (_type, event) => progress.onEvent(event as TimedRunEvent));
  // SIGTERM (a service manager, `kill`, a CI timeout) stops the run as Ctrl-C does: cancelled,
  // the result printed, the event stream and the journal complete.
  const stopOnSignal = (signal: NodeJS.Signals) => run.cancel(`interrupted (${signal})`);
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  let result: RunResult;
  try {
    result = await run.result;
  } catch (error) {
    if (error instanceof StoreError) {
      // The journal failed mid-run: the run stopped, what was committed is intact.
      io.err.write(`swarmstate: ${errorText(error)}\nthe run stopped; ${error.advice}, then: ${resumeCommand(run.id, flags)}\n`);
      return EXIT.journal;
    }
    // The run could not start: a tool its server lacks, a server that does not connect.
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.invalid;
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    progress?.finish();
    await writes;
    await swarm.close();
    await inspector?.stop();
  }
  if (flags.report) {
    try {
      await writeFile(flags.report, buildReport({ events: seen, result }));
      if (!flags.json) io.err.write(`report: ${flags.report}\n`);
    } catch (error) {
      // The run's result still goes out: a report that cannot be written loses nothing else.
      io.err.write(`swarmstate: cannot write --report ${flags.report}: ${reasonOf(error)}\n`);
    }
  }
  if (flags.json) io.out.write(jsonForTerminal(result) + '\n');
  else io.out.write(formatSummaryTable(result, seen) + '\n');
  return result.status === 'completed' ? EXIT.ok : EXIT.incomplete;
}

/** A journaled run resumed, or its failures retried. */
function continued(swarm: Swarm, target: Extract<RunTarget, { resume: string }>) {
  const again = target.plan !== undefined ? { plan: target.plan } : {};
  if (!target.retry) return swarm.resume(target.resume, again);
  return swarm.retry(target.resume, { ...again, ...(target.retry !== 'all' ? { tasks: target.retry } : {}) });
}

/** The command that resumes a run, with the flags that find its journal and queue again. */
function resumeCommand(runId: string, flags: RunFlags): string {
  const store = flags.store !== undefined ? ` --store ${flags.store}` : '';
  const redis = flags.redis !== undefined ? ` --redis ${redisForDisplay(flags.redis)}` : '';
  return visible(`swarmstate resume ${runId}${store}${redis}`);
}

/** A file error's code (`ENOENT`), else its message, fit for a terminal. */
function reasonOf(error: unknown): string {
  return visible(String((error as NodeJS.ErrnoException).code ?? (error as Error).message));
}

async function version(): Promise<string> {
  const pkg = JSON.parse(await readFile(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}
