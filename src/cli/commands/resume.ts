/** `swarmstate resume <runId>` and `swarmstate retry <runId>`: a journaled run again. */
import { resolve } from 'node:path';
import { EXIT } from '../exit.js';
import { loadPlan, runPlan } from '../runPlan.js';
import { FUNCTIONS_HELP, OUTPUT_FLAGS_HELP, seedOf, streamWithJson } from './run.js';
import { functionsFlag } from '../functions.js';
import { numberOption, usageError, type Args, type Command, type IO, type Options } from './command.js';

const CONTINUE_OPTIONS: Options = {
  json: { type: 'boolean', default: false },
  events: { type: 'string' },
  report: { type: 'string' },
  quiet: { type: 'boolean', default: false },
  verbose: { type: 'boolean', default: false },
  stream: { type: 'boolean', default: false },
  store: { type: 'string' },
  redis: { type: 'string' },
  plan: { type: 'string' },
  seed: { type: 'string' },
  functions: { type: 'string' },
};

const PLAN_HELP = `  --plan <file>      The plan file again, for a run whose plan had inline keys (never stored).
  --seed <n>         Seed of the random choices from here on (retry jitter, the simulator). Default 0.`;

export const resume: Command = {
  name: 'resume',
  summary: 'Continue an interrupted run (a crash, Ctrl-C, a full disk) from its journal.',
  usage: `Usage: swarmstate resume <runId> [--store <file>] [--plan <plan.json>] [--json] [--events <file>]
                         [--report <file>] [--quiet | --verbose] [--stream] [--seed <n>]
                         [--redis <redis://host:6379>] [--functions <steps.mjs>]

Continues a run that was interrupted (a crash, Ctrl-C, SIGTERM, a full disk) from its journal:
completed tasks are not run again, budgets continue from what was spent. A run that had finished
prints its result. A paused run (exit 5) goes on with the decisions \`swarmstate approve\` made.
\`swarmstate runs\` lists the runs of a journal.

Options:
${OUTPUT_FLAGS_HELP}
${PLAN_HELP}
${FUNCTIONS_HELP}
  -h, --help         This help.

Docs: docs/cli.md#swarmstate-resume-runid`,
  options: CONTINUE_OPTIONS,
  maxPositionals: 1,
  elsewhere: { tasks: '--tasks is for retry (swarmstate retry <runId> --tasks a,b)', 'budget-usd': '--budget-usd is for retry (swarmstate retry <runId> --budget-usd 20)' },
  run: (args, io) => again('resume', args, io),
};

export const retry: Command = {
  name: 'retry',
  summary: 'Run the failed, skipped and cancelled tasks of a finished run again, as the same run.',
  usage: `Usage: swarmstate retry <runId> [--tasks <id,id>] [--budget-usd <n>] [--store <file>] [--plan <plan.json>] [--json]
                        [--events <file>] [--report <file>] [--quiet | --verbose] [--stream] [--seed <n>]
                        [--redis <redis://host:6379>] [--functions <steps.mjs>]

Runs the failed, skipped and cancelled tasks of a finished run again (and what depends on them),
with fresh retries, as the same run: completed tasks keep their outputs and are not sent again,
the budget continues from what was spent.

Options:
  --tasks <ids>      Only these tasks (comma-separated) and what depends on them.
  --budget-usd <n>   A new cap on the run's spend (USD) in place of the plan's budget.usd, for
                     this retry and any resume after it: a run its budget stopped goes on only
                     with a higher one. It must be above what the run has spent.
${OUTPUT_FLAGS_HELP}
${PLAN_HELP}
${FUNCTIONS_HELP}
  -h, --help         This help.

Docs: docs/cli.md#swarmstate-retry-runid`,
  options: { ...CONTINUE_OPTIONS, tasks: { type: 'string' }, 'budget-usd': { type: 'string' } },
  maxPositionals: 1,
  run: (args, io) => again('retry', args, io),
};

async function again(command: 'resume' | 'retry', args: Args, io: IO): Promise<number> {
  const v = args.values;
  const runId = args.positionals[0];
  if (!runId) return usageError(command, `a run id is required (swarmstate ${command} <runId>; \`swarmstate runs\` lists them)`, io);
  if (v.stream && v.json) return streamWithJson(command, io);
  const seed = seedOf(command, v.seed, io);
  if (seed === undefined) return EXIT.invalid;
  const tasks = (v.tasks as string | undefined)?.split(',').map((t) => t.trim()).filter((t) => t !== '');
  if (tasks !== undefined && tasks.length === 0) return usageError(command, '--tasks needs task ids, comma-separated (swarmstate retry <runId> --tasks a,b)', io);
  const budgetUsd = numberOption(command, v['budget-usd'], 'budget-usd', { says: 'a number of USD greater than 0', above: 0 }, io);
  if (budgetUsd === false) return EXIT.invalid;
  // The journaled plan is checked against them when the run is opened (createSwarm).
  const functions = await functionsFlag(v.functions, io.err);
  if (functions === false) return EXIT.invalid;
  let planAgain: unknown;
  const planFile = v.plan as string | undefined;
  if (planFile !== undefined) {
    planAgain = await loadPlan(planFile, io.err);
    if (planAgain === undefined) return EXIT.invalid;
  }
  return runPlan(
    {
      resume: runId,
      ...(command === 'retry' ? { retry: tasks ?? 'all' } : {}),
      ...(budgetUsd !== undefined ? { budgetUsd } : {}),
      ...(planAgain !== undefined ? { plan: planAgain, planFile: resolve(planFile!) } : {}),
    },
    {
      seed,
      json: v.json === true,
      quiet: v.quiet === true,
      verbose: v.verbose === true,
      stream: v.stream === true,
      events: v.events as string | undefined,
      report: v.report as string | undefined,
      inspect: undefined,
      store: v.store as string | undefined,
      redis: v.redis as string | undefined,
      ...(functions !== undefined ? { functions } : {}),
    },
    io,
  );
}
