/**
 * `swarmstate approve <runId> <taskId>`: a person's decision on a waiting approval task, written
 * to the run's journal (`swarm.approve`). A run still going in another process picks it up at
 * once (it reads its journal while an approval waits); a paused one applies it on `resume`.
 */
import { readFile } from 'node:fs/promises';
import { createSwarm } from '../../swarm.js';
import { ApprovalError } from '../../run/approvals.js';
import { openStoreToRead, StoreError } from '../../store/index.js';
import { EXIT } from '../exit.js';
import { missingJournal, storeFileOf, storeSpecOf } from '../paths.js';
import { runCommandLine } from '../paused.js';
import { reasonOf } from '../runPlan.js';
import { errorText, jsonForTerminal, noRunLine, visible } from '../terminal.js';
import { usageError, type Command, type IO } from './command.js';

/** Largest --output file read: an edited answer, not a data set. */
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024;

export const approve: Command = {
  name: 'approve',
  summary: 'Decide a waiting approval task of a run: approve it (optionally with an edited output) or reject it.',
  usage: `Usage: swarmstate approve <runId> <taskId> [--reject] [--note <text>] [--output <file>] [--store <file>] [--json]

Decides an approval task (\`"kind": "approval"\`) that waits for a person. The decision goes to
the run's journal: a run still going (in another process) picks it up at once; a run that ended
\`paused\` (exit code 5) goes on with \`swarmstate resume <runId>\`. \`swarmstate show <runId>\`
shows what waits and what was decided.

Options:
  --reject           Reject instead of approve. With a --note and a round left (maxRounds), the
                     approved task runs again with the note; otherwise the approval fails and
                     what depends on it is skipped.
  --note <text>      Why: kept in the journal, shown by show, and given to the task sent back.
  --output <file>    The file's text replaces the approved task's output (an edited draft). Only
                     with an approval. For a task with an output schema it must be JSON that the
                     schema accepts; its other checks (minChars, pattern) apply too.
  --store <file>     The journal. Default $SWARMSTATE_STORE, else .swarmstate/runs.db.
  --json             {"runId", "taskId", "approved", "note", "edited", "by", "at", "next"} on stdout.
  -h, --help         This help.

Exit codes: 0 decided; 1 the task is not waiting for a decision (not an approval, not reached
yet, already decided, or its run is over): nothing changed; 2 no such run or task, a bad
--output file, or a usage error; 4 the journal cannot be opened or written.
Docs: docs/cli.md#swarmstate-approve-runid-taskid`,
  options: {
    reject: { type: 'boolean', default: false },
    note: { type: 'string' },
    output: { type: 'string' },
    store: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
  maxPositionals: 2,
  check({ values: v }) {
    return v.reject === true && v.output !== undefined ? '--output is an edited output to approve: not with --reject' : undefined;
  },
  run: (args, io) => decide(args.positionals, args.values, io),
};

async function decide([runId, taskId]: string[], v: Record<string, string | boolean | undefined>, io: IO): Promise<number> {
  if (!runId || !taskId) return usageError('approve', 'a run id and a task id are required (swarmstate approve <runId> <taskId>; `swarmstate show <runId>` lists the tasks)', io);
  const spec = storeSpecOf(v.store as string | undefined);
  const file = storeFileOf(spec);
  if (file === undefined) return usageError('approve', 'a journal kept in memory ends with its process: give the journal file with --store', io);
  if (missingJournal(spec) !== undefined) {
    io.err.write(`swarmstate approve: no run journal at ${visible(file)} (check --store or $SWARMSTATE_STORE)\n`);
    return EXIT.invalid;
  }
  const outputFile = v.output as string | undefined;
  let output: string | undefined;
  if (outputFile !== undefined) {
    const read = await readOutput(outputFile);
    if ('problem' in read) {
      io.err.write(`swarmstate approve: ${visible(read.problem)}\n`);
      return EXIT.invalid;
    }
    output = read.text;
  }
  const note = v.note as string | undefined;
  const decision = { approved: v.reject !== true, ...(note !== undefined ? { note } : {}), ...(output !== undefined ? { output } : {}) };
  const swarm = createSwarm({ store: spec ?? file });
  try {
    swarm.approve(runId, taskId, decision, 'cli');
  } catch (error) {
    return refused(error, runId, taskId, file, outputFile, io);
  } finally {
    await swarm.close();
  }
  const after = afterDecision(spec ?? file, runId, taskId);
  const next = after.held ? 'running' : 'resume';
  const flags = { store: v.store as string | undefined };
  if (v.json === true) {
    const at = Date.now();
    io.out.write(jsonForTerminal({ runId, taskId, approved: decision.approved, ...(note !== undefined ? { note } : {}), edited: output !== undefined, by: 'cli', at, next }) + '\n');
    return EXIT.ok;
  }
  const said = [note !== undefined && note !== '' ? `note: ${note}` : '', outputFile !== undefined ? `edited output of "${after.approves}" from ${outputFile}` : ''].filter(Boolean);
  const what = `${decision.approved ? 'approved' : 'rejected'} "${taskId}" of run ${runId}${said.length > 0 ? ` (${said.join('; ')})` : ''}`;
  const then = next === 'running' ? 'the process running it picks it up now' : `continue it with ${runCommandLine('resume', runId, flags)}`;
  io.out.write(`${visible(what)}: ${then}\n`);
  return EXIT.ok;
}

/** The --output file's text: readable, UTF-8, not empty, not huge; else what is wrong, naming it. */
async function readOutput(file: string): Promise<{ text: string } | { problem: string }> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    return { problem: `cannot read --output ${file}: ${reasonOf(error)}` };
  }
  if (bytes.length > MAX_OUTPUT_BYTES) return { problem: `--output ${file} is ${bytes.length} bytes: an edited output is at most ${MAX_OUTPUT_BYTES} bytes` };
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { problem: `--output ${file} is not UTF-8 text` };
  }
  if (text.trim() === '') return { problem: `--output ${file} is empty: an edited output replaces the task's output (to refuse it, use --reject)` };
  return { text };
}

/** An ApprovalError (or the journal's) as one line and its exit code. */
function refused(error: unknown, runId: string, taskId: string, file: string, outputFile: string | undefined, io: IO): number {
  if (!(error instanceof ApprovalError)) {
    io.err.write(`swarmstate approve: ${errorText(error)}\n`);
    return error instanceof StoreError ? EXIT.journal : EXIT.invalid;
  }
  switch (error.code) {
    case 'RUN_NOT_FOUND':
      io.err.write(noRunLine('approve', runId, file));
      return EXIT.invalid;
    case 'TASK_NOT_FOUND':
      io.err.write(`swarmstate approve: run ${visible(runId)} has no task "${visible(taskId)}" (\`swarmstate show ${visible(runId)}\` lists its tasks)\n`);
      return EXIT.invalid;
    case 'NOT_WAITING':
      io.err.write(`swarmstate approve: ${errorText(error)}\n`);
      return EXIT.incomplete;
    default:
      // The edited output failed the approved task's checks, or the note is too long.
      io.err.write(`swarmstate approve: ${outputFile !== undefined && /edited output/.test(error.message) ? `--output ${visible(outputFile)}: ` : ''}${errorText(error)}\n`);
      return EXIT.invalid;
  }
}

/**
 * What the line after a decision says, from the journal: whether a live process holds the run
 * (it reads the decision while its approvals wait), and the task the approval approves.
 */
function afterDecision(spec: string, runId: string, taskId: string): { held: boolean; approves: string } {
  const store = openStoreToRead(spec);
  try {
    const tasks = (store?.getRun(runId)?.plan as { tasks?: { id?: unknown; approves?: unknown }[] } | undefined)?.tasks ?? [];
    const approves = tasks.find((t) => t.id === taskId)?.approves;
    return { held: store?.isHeld(runId) === true, approves: typeof approves === 'string' ? approves : '?' };
  } catch {
    return { held: false, approves: '?' };
  } finally {
    store?.close();
  }
}
