/**
 * Running a plan from the command line, shared by `run`, `demo`, `resume` and `retry`: the checks
 * on the output files, the journal and Redis, progress (or every event with --verbose), the event
 * file, the report, and the summary or the --json result at the end.
 */
import { readFile, writeFile, appendFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { createSwarm, RunLockedError, type RunHandle, type Swarm } from '../swarm.js';
import type { LiveUi } from '../ui/live.js';
import { StoreError } from '../store/index.js';
import { PlanValidationError } from '../plan/index.js';
import type { RunResult } from '../../machines/tasks/results.js';
import type { RunEvent } from '../../machines/protocol.js';
import { buildReport } from '../report/index.js';
import type { TimedRunEvent } from '../swarm.js';
import { terminalMode } from './colour.js';
import { createProgress } from './progress.js';
import { formatSummaryTable } from './summary.js';
import { planJson, withPlanFolder } from './demo.js';
import { errorText, jsonForTerminal, noRunLine, visible } from './terminal.js';
import { importOptional } from '../util/optional.js';
import { journalLine, missingJournal, outputConflict, storeFileOf, storeSpecOf } from './paths.js';
import { pausedLines, runCommandLine } from './paused.js';
import { formatElapsed, formatEventLine, formatUsd } from './format.js';
import { EXIT } from './exit.js';
import { connectRedis } from './commands.js';
import { createTextLines } from './stream.js';
import { onFirstStop, untilStopSignal } from '../util/signals.js';

import type { IO } from './commands/command.js';
import type { SwarmFunctions } from '../fn/types.js';

export async function loadPlan(path: string | undefined, err: NodeJS.WritableStream): Promise<unknown> {
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
    return withPlanFolder(planJson(text, path), dirname(resolve(path)));
  } catch (error) {
    // `<path> is not valid JSON: line 3, column 27: ...`
    err.write(`swarmstate: ${errorText(error)}\n`);
    return undefined;
  }
}

export interface RunFlags {
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
  /** --verbose: a line for every event instead of the progress view. */
  verbose?: boolean;
  /** --ui: serve the live page of the run on 127.0.0.1 (src/ui/live.ts). */
  ui?: boolean;
  /** --stream: each task's text on stdout as it streams in (`task:delta`), a line at a time. */
  stream?: boolean;
  /** --functions: the module's functions, the plan's code steps (src/cli/functions.ts). */
  functions?: SwarmFunctions;
}

/** A new run of a plan (from its file), or a journaled run to resume (or to retry: its failures, or these tasks). */
export type RunTarget = { plan: unknown; source: string } | { resume: string; retry?: string[] | 'all'; budgetUsd?: number; plan?: unknown; planFile?: string };

export async function runPlan(target: RunTarget, flags: RunFlags, io: IO): Promise<number> {
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
  // Loaded only when asked for: the inspector is a dependency most runs never touch.
  let inspector;
  if (flags.inspect) {
    try {
      const { attachInspector } = await importOptional(() => import('./inspect.js'), ['@statelyai/inspect'], '--inspect');
      inspector = attachInspector({
        url: flags.inspect,
        onError: (e: Error) => void io.err.write(`inspect: ${errorText(e)}\n`),
        onConnect: (url: string) => void io.err.write(`inspect: connected to ${visible(url)}\n`),
      });
    } catch (error) {
      io.err.write(`swarmstate: ${errorText(error)}\n`);
      return EXIT.invalid;
    }
  }
  // Redis errors of the coordinator's connections, as the worker says its own: on stderr, above
  // the live view once there is one.
  let sayRedis = (line: string): void => void io.err.write(line);
  let swarm;
  try {
    swarm = createSwarm({
      seed: flags.seed,
      ...(flags.functions ? { functions: flags.functions } : {}),
      onRedisError: (source, message) => sayRedis(`swarmstate: Redis ${source} error (retrying): ${visible(message)}\n`),
      ...(inspector ? { inspect: inspector.inspect } : {}),
      ...(flags.store !== undefined ? { store: flags.store } : {}),
      ...(flags.redis !== undefined ? { redis: flags.redis } : {}),
    });
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.invalid;
  }
  // Someone at a terminal with the page open decides there: the run waits for them instead of
  // pausing. A script (stdin not a terminal) or --json gets a paused run it can resume.
  const hold = flags.ui === true && !flags.json && io.interactive === true;
  let run;
  try {
    const options = { ...(flags.stream === true ? { deltas: true } : {}), ...(hold ? { holdApprovals: true } : {}) };
    run = 'resume' in target ? continued(swarm, target, options) : swarm.run(target.plan, { source: target.source, ...options });
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
    if ('resume' in target && (error as { code?: unknown }).code === 'RUN_NOT_FOUND') {
      io.err.write(noRunLine(target.retry ? 'retry' : 'resume', target.resume, journal ?? 'memory'));
      return EXIT.invalid;
    }
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return error instanceof StoreError ? EXIT.journal : EXIT.invalid;
  }
  // A journal kept in memory ends with the process: there is nothing to resume from.
  const resumeHint = journal === undefined ? '' : ` (if interrupted: ${resumeCommand(run.id, flags)})`;
  // Said once the run has started (with --json too: stdout holds only the result, and the run id
  // is what a resume needs); a run refused at start (a tool server that does not connect) has
  // nothing to resume.
  let announced = false;
  const announce = () => {
    if (announced) return;
    announced = true;
    if (!flags.quiet) io.err.write(`${'resume' in target ? (target.retry ? 'retrying' : 'resuming') : 'run'} ${run.id}${resumeHint}\n`);
  };
  // Every listener is attached here, before anything is awaited: an event missed is a count, a
  // line of --events or a streamed text lost.
  // Every event is kept for the summary and the report, and written to --events as it comes.
  const seen: TimedRunEvent[] = [];
  run.events.on('*', (type, event) => {
    if (type === 'run:started') announce();
    // Streamed text is left out: the summary and the report read whole outputs (--events has it).
    if (type !== 'task:delta') seen.push(event as TimedRunEvent);
  });
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
  const progress = flags.json || flags.quiet || flags.verbose ? undefined : createProgress({ out: io.err, tty: mode.live, colour: mode.colour });
  if (progress) run.events.on('*', (_type, event) => progress.onEvent(event as TimedRunEvent));
  if (progress && mode.live) sayRedis = (line) => progress.print(line);
  if (flags.verbose && !flags.quiet) {
    let startedAt: number | undefined;
    run.events.on('*', (type, event) => {
      // --stream prints the text itself; a log line per piece would repeat it in fragments.
      if (type === 'task:delta') return;
      const e = event as TimedRunEvent;
      startedAt ??= e.at;
      io.err.write(`[${formatElapsed(e.at - startedAt)}] ${verboseLine(e)}\n`);
    });
  }
  // On a terminal whose live view is redrawn, the text is kept above the view (a line written
  // between redraws would be drawn over); elsewhere it goes to stdout as it comes, whole lines.
  const stdoutTty = (io.out as NodeJS.WritableStream & { isTTY?: boolean }).isTTY === true;
  let outBroken = false;
  if (flags.stream) {
    // A reader that went away (`| head`) must not take the run down: its journal still completes.
    io.out.on?.('error', () => void (outBroken = true));
  }
  const toStdout = (lines: string) => void (outBroken || io.out.write(lines));
  const text = flags.stream ? createTextLines(progress && mode.live && stdoutTty ? (lines) => progress.print(lines) : toStdout) : undefined;
  if (text) run.events.on('*', (_type, event) => text.onEvent(event as RunEvent));
  // Said once, where progress says things, when the first approval asks and the page is up:
  // the run now waits for a person.
  const waitsFor = hold && !flags.quiet ? tellOnce((line) => (progress && mode.live ? progress.print(line) : void io.err.write(line))) : undefined;
  if (waitsFor) run.events.on('approval:requested', (e) => waitsFor.asked(e.taskId));
  // The page, last: loaded only when asked for, it gets the events so far and follows the rest itself.
  const live = flags.ui ? await startPage(run, seen, io, hold) : undefined;
  waitsFor?.ready((taskId) => `the run waits until you decide ${live ? `on the live page (${live.url}) or ` : ''}with ${runCommandLine('approve', run.id, flags, `${taskId} [--reject] [--note <text>]`)}\n`);
  // SIGTERM (a service manager, `kill`, a CI timeout) stops the run as Ctrl-C does: cancelled,
  // the result printed, the event stream and the journal complete.
  const stopListening = onFirstStop((signal) => run.cancel(`interrupted (${signal})`));
  let result: RunResult;
  try {
    result = await run.result;
  } catch (error) {
    await live?.close();
    if (error instanceof StoreError) {
      // The journal failed mid-run: the run stopped, what was committed is intact.
      io.err.write(`swarmstate: ${errorText(error)}\nthe run stopped; ${error.advice}, then: ${resumeCommand(run.id, flags)}\n`);
      return EXIT.journal;
    }
    // The run could not start: a tool its server lacks, a server that does not connect.
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.invalid;
  } finally {
    stopListening();
    text?.finish();
    // A run that never started has no progress to show (not a `0/0 done` line).
    if (announced) progress?.finish();
    await writes;
    await swarm.close();
    await inspector?.stop();
  }
  // A finished run resumed sends no events: its result is all there is.
  announce();
  if (flags.report) {
    try {
      await writeFile(flags.report, buildReport({ events: seen, result }));
      if (!flags.json) io.err.write(`report: ${flags.report}\n`);
    } catch (error) {
      // The run's result still goes out: a report that cannot be written loses nothing else.
      io.err.write(`swarmstate: cannot write --report ${flags.report}: ${reasonOf(error)}\n`);
    }
  }
  const journalNote = flags.quiet ? undefined : journalLine(storeSpec, io.err as { isTTY?: boolean });
  if (journalNote) io.err.write(journalNote);
  if (flags.json && !flags.quiet) io.err.write(`${endLine(result)}\n`);
  if (flags.json) io.out.write(jsonForTerminal(result) + '\n');
  else io.out.write(formatSummaryTable(result, seen) + '\n');
  if (result.status === 'paused' && !flags.quiet) io.err.write(pausedLines(result, seen, flags, journal === undefined));
  if (live) {
    // A short run's page would be gone before it could be opened: someone at a terminal gets it
    // until Ctrl-C. A script (stdin not a terminal) or --json (a result for a program) is not kept.
    if (io.interactive === true && !flags.json) {
      io.err.write(`live page: ${live.url} (serving the finished run; Ctrl-C to stop)\n`);
      await (io.untilStopped ?? untilStopSignal)();
    }
    await live.close();
  }
  return result.status === 'completed' ? EXIT.ok : result.status === 'paused' ? EXIT.paused : EXIT.incomplete;
}

/** A line said once, about the first of some events, once what it needs is ready (events may come first). */
function tellOnce(say: (line: string) => void) {
  let first: string | undefined;
  let line: ((id: string) => string) | undefined;
  let told = false;
  const tell = () => {
    if (told || first === undefined || line === undefined) return;
    told = true;
    say(line(first));
  };
  return {
    asked: (id: string) => {
      first ??= id;
      tell();
    },
    ready: (make: (id: string) => string) => {
      line = make;
      tell();
    },
  };
}

/** The live page of the run (src/ui/live.ts); a page that cannot start is said, the run goes on without it. */
async function startPage(run: RunHandle, seen: TimedRunEvent[], io: IO, holdsApprovals: boolean): Promise<LiveUi | undefined> {
  try {
    const { startLiveUi } = await import('../ui/live.js');
    // `seen` is copied when the page starts, which then follows the run's events itself.
    const live = await startLiveUi({ run, events: [...seen], holdsApprovals });
    io.err.write(`live page: ${live.url}\n`);
    return live;
  } catch (error) {
    io.err.write(`swarmstate: the live page cannot start: ${errorText(error)}; the run goes on without it\n`);
    return undefined;
  }
}

/** A journaled run resumed, or its failures retried. */
function continued(swarm: Swarm, target: Extract<RunTarget, { resume: string }>, options: { deltas?: boolean; holdApprovals?: boolean }) {
  const again = { ...options, ...(target.plan !== undefined ? { plan: target.plan } : {}) };
  if (!target.retry) return swarm.resume(target.resume, again);
  return swarm.retry(target.resume, {
    ...again,
    ...(target.retry !== 'all' ? { tasks: target.retry } : {}),
    ...(target.budgetUsd !== undefined ? { budget: { usd: target.budgetUsd } } : {}),
  });
}

/** The command that resumes a run, with the flags that find its journal and queue again. */
function resumeCommand(runId: string, flags: RunFlags): string {
  return runCommandLine('resume', runId, flags);
}

/** A file error's code (`ENOENT`), else its message, fit for a terminal. */
export function reasonOf(error: unknown): string {
  return visible(String((error as NodeJS.ErrnoException).code ?? (error as Error).message));
}

/** The one line --json still gives on stderr at the end: `run Bx1 completed: 4/4 tasks completed, $0.0012, 1.2s`. */
export function endLine(result: RunResult): string {
  const t = result.totals;
  const parts = [`${t.completed}/${t.tasks} tasks completed`];
  if (t.failed > 0) parts.push(`${t.failed} failed`);
  if (t.skipped > 0) parts.push(`${t.skipped} skipped`);
  if (t.cancelled > 0) parts.push(`${t.cancelled} cancelled`);
  const waiting = Object.values(result.tasks).filter((task) => task.status === 'waiting').length;
  if (waiting > 0) parts.push(`${waiting} waiting`);
  if (t.costUsd !== undefined && t.costUsd !== null) parts.push(formatUsd(t.costUsd));
  parts.push(formatElapsed(t.durationMs));
  return visible(`run ${result.runId} ${result.status}: ${parts.join(', ')}`);
}

/**
 * An event as one log line for --verbose: the progress line when it has one, else its type and
 * its short fields (`task:completed taskId=a attempt=1 costUsd=0.0012`); long texts (outputs,
 * prompts) and nested objects are left out, the event file has them.
 */
export function verboseLine(event: RunEvent): string {
  const notable = formatEventLine(event);
  if (notable !== undefined) return visible(notable);
  const fields = Object.entries(event)
    .filter(([k, v]) => k !== 'type' && k !== 'at' && (typeof v === 'number' || typeof v === 'boolean' || (typeof v === 'string' && v.length <= 80)))
    .map(([k, v]) => `${k}=${String(v)}`);
  return visible([event.type, ...fields].join(' '));
}
