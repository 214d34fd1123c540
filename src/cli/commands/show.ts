/**
 * `swarmstate show <runId> [taskId...]`: a run's tasks as its journal has them, finished or still
 * running: status, attempts, requests, cost and output (one line each in the table, whole for
 * named tasks). The counts are added up as every surface adds them (machines/tasks/counts.ts).
 */
import { countTasks, tallyCost, type RunCounts, type TaskTally } from '../../../machines/tasks/counts.js';
import { journalTallies } from '../../run/journaled.js';
import { openStoreToRead, skipCauseOf, type Store, type TaskRow } from '../../store/index.js';
import { EXIT } from '../exit.js';
import { columns, fit, formatInt, formatUsd } from '../format.js';
import { missingJournal, storeFileOf, storeSpecOf } from '../paths.js';
import { errorText, jsonForTerminal, noRunLine, visible, visibleLines } from '../terminal.js';
import { usageError, type Command, type IO } from './command.js';

/** A task as `show --json` gives it. */
export interface ShownTask {
  id: string;
  status: string;
  /** Agents started for it (0 for a container). */
  attempts: number;
  requests: number;
  retries: number;
  /** A map or reduce that expanded: its items or groups are the tasks (counted apart). */
  container?: true;
  costUsd: number | null;
  output: string | null;
  error: unknown;
  reason: string | null;
  /** A skipped task: its condition (`when`) was false, or a task it needs did not complete. */
  cause?: 'condition' | 'dependency';
  /** The planner or map that made it, for a task made at run time. */
  parent: string | null;
}

export const show: Command = {
  name: 'show',
  summary: "Show a run's tasks from its journal: status, attempts, cost and output.",
  usage: `Usage: swarmstate show <runId> [taskId...] [--store <file>] [--json]

Shows a run's tasks as its journal has them, while it runs or after: status, attempts, requests,
cost and output. Without task ids, a table with each output cut to one line; with task ids, those
tasks with their whole output (or error). A run no live process holds shows \`interrupted\`.

Options:
  --store <file>     The journal. Default $SWARMSTATE_STORE, else .swarmstate/runs.db.
  --json             {"runId", "status", "costUsd", "tasksTotal", "tasksDone", "totals", "tasks": [...]} on stdout.
  -h, --help         This help.`,
  options: { store: { type: 'string' }, json: { type: 'boolean', default: false } },
  maxPositionals: Infinity,
  async run(args, io) {
    const [runId, ...taskIds] = args.positionals;
    if (!runId) return usageError('show', 'a run id is required (swarmstate show <runId>; `swarmstate runs` lists them)', io);
    const spec = storeSpecOf(args.values.store as string | undefined);
    const file = storeFileOf(spec);
    if (file === undefined) return usageError('show', 'a journal kept in memory ends with its process: give the journal file with --store', io);
    if (missingJournal(spec) !== undefined) {
      io.err.write(`swarmstate show: no run journal at ${visible(file)} (check --store or $SWARMSTATE_STORE)\n`);
      return EXIT.invalid;
    }
    let store: Store | undefined;
    try {
      store = openStoreToRead(spec);
      const record = store?.getRun(runId);
      if (!store || !record) {
        io.err.write(noRunLine('show', runId, file));
        return EXIT.invalid;
      }
      // A run journaled as running that no live process holds died: as `swarmstate runs` says it.
      const status = record.status === 'running' && !store.isHeld(runId) ? 'interrupted' : record.status;
      const rows = store.loadTasks(runId);
      const tallies = journalTallies(record.plan, rows, store.loadAttempts(runId), store.spent(runId).byTask);
      const counts = countTasks(tallies);
      const tasks = tasksOf(rows, tallies);
      const unknown = taskIds.filter((id) => !tasks.some((t) => t.id === id));
      if (unknown.length > 0) {
        io.err.write(`swarmstate show: run ${visible(runId)} has no task ${unknown.map((id) => `"${visible(id)}"`).join(', ')} (\`swarmstate show ${visible(runId)}\` lists its tasks)\n`);
        return EXIT.invalid;
      }
      const shown = taskIds.length > 0 ? taskIds.map((id) => tasks.find((t) => t.id === id)!) : tasks;
      const head = { runId, status, costUsd: counts.costUsd, tasksTotal: counts.tasks, tasksDone: counts.byStatus.completed, source: record.source };
      if (args.values.json) io.out.write(jsonForTerminal({ ...head, totals: totalsOf(counts), tasks: shown }) + '\n');
      else if (taskIds.length > 0) io.out.write(shown.map(taskBlock).join('\n') + '\n');
      else io.out.write(table(head, shown, widthOf(io)) + '\n');
      return EXIT.ok;
    } catch (error) {
      io.err.write(`swarmstate show: ${errorText(error)}\n`);
      return EXIT.journal;
    } finally {
      store?.close();
    }
  },
};

/** The run's counts as `show --json` gives them (the names of a result's totals). */
function totalsOf(c: RunCounts) {
  const { completed, failed, skipped, cancelled } = c.byStatus;
  return { tasks: c.tasks, completed, failed, skipped, cancelled, containers: c.containers, attempts: c.attempts, requests: c.requests, retries: c.retries, usage: c.usage, costUsd: c.costUsd };
}

/** The journal's rows, and the plan's tasks that have none yet (not started) as `pending`, in plan order. */
function tasksOf(rows: TaskRow[], tallies: ReadonlyMap<string, TaskTally>): ShownTask[] {
  const byId = new Map(rows.map((r) => [r.taskId, r]));
  return [...tallies].map(([id, t]) => {
    const r = byId.get(id);
    // Nothing sent, nothing to price; a call without a price, an unknown cost.
    const cost = t.requests === 0 ? null : tallyCost(t);
    const task: ShownTask = { id, status: t.status, attempts: t.attempts, requests: t.requests, retries: t.retries, costUsd: cost, output: r?.output ?? null, error: r?.error ?? null, reason: r?.reason ?? null, parent: r?.parent ?? null };
    if (t.container) task.container = true;
    if (t.status === 'skipped') task.cause = skipCauseOf(r?.extra ?? null);
    return task;
  });
}

function widthOf(io: IO): number {
  const cols = (io.out as { columns?: number }).columns;
  return typeof cols === 'number' && cols >= 40 ? cols : 120;
}

/**
 * A task not completed whose last answer was rejected: its output is that answer, kept for
 * inspection, not a result; the error says what happened to the task.
 */
function rejectedAnswer(t: ShownTask): boolean {
  const code = (t.error as { code?: unknown } | null)?.code;
  return t.status !== 'completed' && t.output !== null && (code === 'invalid_output' || code === 'rejected_output');
}

function errorSummary(t: ShownTask): string | undefined {
  const e = t.error as { code?: unknown; message?: unknown } | null;
  return e && typeof e === 'object' ? `${String(e.code ?? 'error')}: ${String(e.message ?? '')}` : undefined;
}

/** What a task's one-line cell says: its output's first line, else why it failed or was skipped. */
function summaryOf(t: ShownTask): string {
  if (t.output !== null && !rejectedAnswer(t)) return t.output.trim().split('\n')[0] ?? '';
  return errorSummary(t) ?? t.reason ?? '';
}

function table(head: { runId: string; status: string; costUsd: number | null; tasksTotal: number; tasksDone: number; source: string | null }, tasks: ShownTask[], width: number): string {
  // A container runs no attempt and sends nothing: its items or groups are the tasks.
  const own = (t: ShownTask, n: number) => (t.container ? '-' : formatInt(n));
  const rows = tasks.map((t) => [visible(t.id), t.status, own(t, t.attempts), own(t, t.requests), t.costUsd === null ? '-' : formatUsd(t.costUsd)]);
  const lined = columns([['task', 'status', 'attempts', 'requests', 'cost'], ...rows], ['left', 'left', 'right', 'right', 'right']);
  const used = Math.max(...lined.map((l) => l.length));
  const room = Math.max(20, width - used - 2);
  const out = lined.map((line, i) => (i === 0 ? `${line.padEnd(used)}  output` : `${line.padEnd(used)}  ${fit(visible(summaryOf(tasks[i - 1]!)), room)}`.trimEnd()));
  const title = `run ${visible(head.runId)}  ${head.status}  ${formatInt(head.tasksDone)}/${formatInt(head.tasksTotal)} done  ${formatUsd(head.costUsd)}${head.source ? `  ${visible(head.source)}` : ''}`;
  return [title, '', ...out].join('\n');
}

/** A named task in full: a heading line, then its output (or error) as it is, line breaks kept. */
function taskBlock(t: ShownTask): string {
  const cost = t.costUsd === null ? '' : `  ${formatUsd(t.costUsd)}`;
  const tries = t.container ? 'container' : `${t.attempts} attempt${t.attempts === 1 ? '' : 's'}, ${t.requests} request${t.requests === 1 ? '' : 's'}`;
  const lines = [`== ${visible(t.id)}  ${t.status}  ${tries}${cost}`];
  if (rejectedAnswer(t)) lines.push(`error: ${visible(errorSummary(t)!)}`, 'rejected answer:', visibleLines(t.output!));
  else if (t.output !== null) lines.push(visibleLines(t.output));
  else if (t.error) lines.push(`error: ${visible(summaryOf(t))}`);
  else if (t.reason) lines.push(`reason: ${visible(t.reason)}`);
  return lines.join('\n');
}
