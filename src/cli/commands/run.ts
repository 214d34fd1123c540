/** `swarmstate run <plan.json>`: validate a plan and run it. */
import { resolve } from 'node:path';
import { EXIT } from '../exit.js';
import { realPlan } from '../real.js';
import { loadPlan, runPlan } from '../runPlan.js';
import { functionsFlag, functionsNeeded, functionSteps } from '../functions.js';
import { errorText, visible } from '../terminal.js';
import { numberOption, usageError, type Args, type Command, type IO, type Options } from './command.js';

/** The flags `run` and `demo` share. */
export const RUN_OPTIONS: Options = {
  json: { type: 'boolean', default: false },
  events: { type: 'string' },
  report: { type: 'string' },
  seed: { type: 'string' },
  quiet: { type: 'boolean', default: false },
  verbose: { type: 'boolean', default: false },
  stream: { type: 'boolean', default: false },
  ui: { type: 'boolean', default: false },
  inspect: { type: 'boolean', default: false },
  'inspect-url': { type: 'string' },
  real: { type: 'boolean', default: false },
  store: { type: 'string' },
  redis: { type: 'string' },
  functions: { type: 'string' },
};

/** The help of --functions (run, demo, resume, retry and validate). */
export const FUNCTIONS_HELP = `  --functions <file>
                     An ES module whose exported functions are the plan's code steps (the "fn" of
                     a task, a map or a reduce): its named exports, and the functions of a default
                     export that is an object. A plan that names functions needs it.`;

/** The help of the flags `run` and `demo` share (and `resume`/`retry` in part). */
export const OUTPUT_FLAGS_HELP = `  --json             Print one JSON object (the run result) to stdout at the end; progress off.
                     The run id and a one-line status still go to stderr (not with --quiet).
  --events <file>    Write every run event to <file> (emptied first), one JSON object per line.
  --report <file>    Write a self-contained HTML report of the run.
  --quiet            Nothing on stderr but errors (no progress, no run id).
  --verbose          A log line on stderr for every run event, instead of the progress view.
  --stream           Print each task's text on stdout as it streams in, a whole line at a time,
                     each line prefixed by its task id: [taskId] text. Not with --json.
  --store <file>     The run journal: a SQLite file, or "memory" (no journal kept). Default
                     $SWARMSTATE_STORE, else .swarmstate/runs.db in the working directory.
  --redis <url>      Coordinate a distributed run on this Redis (BullMQ): every model and tool
                     call goes to \`swarmstate worker\` processes. Keys from the environment only.
                     Waits at most 10 s for Redis ($SWARMSTATE_REDIS_CONNECT_MS), then exits 2.`;

export const RUN_ONLY_FLAGS_HELP = `  --seed <n>         Seed of every random choice (retry jitter, the simulator). Default 0.
  --ui               Serve the run's live page on 127.0.0.1 (its address, with a token, on stderr).
                     Approvals show there with Approve / Reject; at a terminal the run waits for them.
  --inspect          Send every actor's events to a Stately inspector over WebSocket (docs/cli.md).
  --inspect-url <u>  Where the inspector listens. Default ws://localhost:8080.
  --real             Run a simulator plan on real keys: ANTHROPIC_API_KEY, or OPENAI_API_KEY
                     (and OPENAI_BASE_URL); the sim settings and [[sim:...]] directives are dropped.`;

export const run: Command = {
  name: 'run',
  summary: 'Validate and run a plan.',
  usage: `Usage: swarmstate run <plan.json> [--json] [--events <file.ndjson>] [--report <file.html>]
                      [--quiet | --verbose] [--stream] [--seed <n>] [--store <file>]
                      [--redis <redis://host:6379>] [--ui] [--inspect [--inspect-url <ws://...>]] [--real]
                      [--functions <steps.mjs>]

Validates the plan (every problem listed, exit 2) and runs it. Keys come from the environment
variables the plan names (or inline in the plan: then they are redacted everywhere). Progress goes
to stderr; the summary table (or the --json result) to stdout.

Options:
${OUTPUT_FLAGS_HELP}
${RUN_ONLY_FLAGS_HELP}
${FUNCTIONS_HELP}
  -h, --help         This help.

Exit codes: 0 all tasks completed, 1 partial/failed/cancelled/budget_exceeded, 2 invalid plan or
usage, 3 the run is held by another process, 4 the journal could not be written, 5 paused:
approvals wait (swarmstate approve <runId> <taskId>, then swarmstate resume <runId>). Docs: docs/cli.md`,
  options: RUN_OPTIONS,
  maxPositionals: 1,
  run: (args, io) => runFromFile('run', args.positionals[0], args, io),
};

/** `run` and `demo`: a plan file (made real with --real) run with the shared flags. */
export async function runFromFile(command: string, path: string | undefined, args: Args, io: IO, before?: (plan: Record<string, unknown>) => void): Promise<number> {
  const v = args.values;
  if (v.stream && v.json) return streamWithJson(command, io);
  const seed = seedOf(command, v.seed, io);
  if (seed === undefined) return EXIT.invalid;
  const functions = await functionsFlag(v.functions, io.err);
  if (functions === false) return EXIT.invalid;
  let plan = await loadPlan(path, io.err);
  if (plan === undefined) return EXIT.invalid;
  const steps = functionSteps(plan);
  if (functions === undefined && steps.length > 0) {
    io.err.write(`swarmstate: ${visible(functionsNeeded(steps))}\n`);
    return EXIT.invalid;
  }
  if (v.real) {
    try {
      const converted = realPlan(plan as Record<string, unknown>, process.env);
      plan = converted.plan;
      for (const note of converted.notes) io.err.write(`real: ${visible(note)}\n`);
    } catch (error) {
      io.err.write(`swarmstate: ${errorText(error)}\n`);
      return EXIT.invalid;
    }
  }
  before?.(plan as Record<string, unknown>);
  return runPlan(
    { plan, source: resolve(path!) },
    {
      seed,
      store: v.store as string | undefined,
      redis: v.redis as string | undefined,
      json: v.json === true,
      quiet: v.quiet === true,
      verbose: v.verbose === true,
      stream: v.stream === true,
      ui: v.ui === true,
      events: v.events as string | undefined,
      report: v.report as string | undefined,
      inspect: v.inspect ? ((v['inspect-url'] as string | undefined) ?? 'ws://localhost:8080') : undefined,
      ...(functions !== undefined ? { functions } : {}),
    },
    io,
  );
}

/** --stream's lines and --json's object would share stdout: the object would no longer parse. */
export function streamWithJson(command: string, io: IO): number {
  return usageError(command, '--stream and --json both write to stdout: give one of them (with --events <file>, the file gets the task:delta events too)', io);
}

/** --seed as an integer (0 when not given); undefined after saying what is wrong. */
export function seedOf(command: string, raw: string | boolean | undefined, io: IO): number | undefined {
  const seed = numberOption(command, raw, 'seed', { says: 'an integer', integer: true }, io);
  return seed === false ? undefined : (seed ?? 0);
}
