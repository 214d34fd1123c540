/**
 * `swarmstate show <runId> [taskId...]`: a run's tasks as its journal has them, finished or still
 * running: status, attempts, requests, cost and output (one line each in the table, whole for
 * named tasks). The counts are added up as every surface adds them (machines/tasks/counts.ts).
 */
import { countTasks, tallyCost, type RunCounts, type TaskTally } from '../../../machines/tasks/counts.js';
import { journalTallies } from '../../run/journaled.js';
import { openStoreToRead, skipCauseOf, type ReviewExtra, type Store, type TaskRow } from '../../store/index.js';
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
  /** An approval task: what it approves and asks, its last decision, and one made but not yet applied. */
  approval?: ShownApproval;
}

/** A decision as the journal keeps it (`approval:decided`, or `swarmstate approve` on a run not running). */
export interface ShownDecision {
  approved: boolean;
  note?: string;
  /** `cli`, `ui`, `code` or `timeout`. */
  by: string;
  /** When it was made, ms since the epoch. */
  at: number;
  edited?: boolean;
  /** What it did: `approved`, `revise` (the draft went back with the note), `rejected`. */
  outcome?: string;
}

export interface ShownApproval {
  approves: string;
  prompt: string;
  decision?: ShownDecision;
  /** Made while no process applied it: the run applies it when it continues (`resume`). */
  pending?: ShownDecision;
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
      const tasks = tasksOf(rows, tallies, record.plan);
      const unknown = taskIds.filter((id) => !tasks.some((t) => t.id === id));
      if (unknown.length > 0) {
        io.err.write(`swarmstate show: run ${visible(runId)} has no task ${unknown.map((id) => `"${visible(id)}"`).join(', ')} (\`swarmstate show ${visible(runId)}\` lists its tasks)\n`);
        return EXIT.invalid;
      }
      const shown = taskIds.length > 0 ? taskIds.map((id) => tasks.find((t) => t.id === id)!) : tasks;
      const head = { runId, status, costUsd: counts.costUsd, tasksTotal: counts.tasks, tasksDone: counts.byStatus.completed, source: record.source };
      if (args.values.json) io.out.write(jsonForTerminal({ ...head, totals: totalsOf(counts), tasks: shown }) + '\n');
      else if (taskIds.length > 0) io.out.write(shown.map((t) => taskBlock(t, runId)).join('\n') + '\n');
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
function tasksOf(rows: TaskRow[], tallies: ReadonlyMap<string, TaskTally>, plan: unknown): ShownTask[] {
  const byId = new Map(rows.map((r) => [r.taskId, r]));
  const approvals = approvalsOf(plan, rows);
  // An approval that approved an edited output keeps it in its own row (the approved task's row
  // has the text it answered): what the run went on with is the edit.
  const edits = new Map<string, string>();
  for (const [id, a] of approvals) {
    const extra = byId.get(id)?.extra as ReviewExtra | null | undefined;
    if (typeof extra?.edited === 'string' && extra.decision?.approved === true) edits.set(a.approves, extra.edited);
  }
  return [...tallies].map(([id, t]) => {
    const r = byId.get(id);
    // Nothing sent, nothing to price; a call without a price, an unknown cost.
    const cost = t.requests === 0 ? null : tallyCost(t);
    const task: ShownTask = { id, status: t.status, attempts: t.attempts, requests: t.requests, retries: t.retries, costUsd: cost, output: edits.get(id) ?? r?.output ?? null, error: r?.error ?? null, reason: r?.reason ?? null, parent: r?.parent ?? null };
    if (t.container) task.container = true;
    if (t.status === 'skipped') task.cause = skipCauseOf(r?.extra ?? null);
    const approval = approvals.get(id);
    if (approval) task.approval = approvalOf(approval, r);
    return task;
  });
}

/** The approval tasks of the run (the plan's, and those made at run time): what each approves and asks. */
function approvalsOf(plan: unknown, rows: readonly TaskRow[]): Map<string, { approves: string; prompt: string }> {
  const out = new Map<string, { approves: string; prompt: string }>();
  const add = (id: unknown, t: unknown) => {
    const spec = t as { kind?: unknown; approves?: unknown; prompt?: unknown } | null;
    if (typeof id === 'string' && spec?.kind === 'approval') out.set(id, { approves: String(spec.approves ?? ''), prompt: String(spec.prompt ?? '') });
  };
  for (const t of (plan as { tasks?: unknown[] } | null)?.tasks ?? []) add((t as { id?: unknown } | null)?.id, t);
  for (const r of rows) if (r.spec !== null && !out.has(r.taskId)) add(r.taskId, r.spec);
  return out;
}

/** An approval with what its journal row holds: its last decision, and one made but not yet applied. */
function approvalOf(base: { approves: string; prompt: string }, row: TaskRow | undefined): ShownApproval {
  const out: ShownApproval = { ...base };
  const extra = row?.extra as ReviewExtra | null | undefined;
  const decision = decisionOf(extra?.decision);
  if (decision) out.decision = decision;
  // A decision applied since (a later `approval:decided` rewrote the row) is no longer pending.
  const pending = row?.status === 'waiting' ? decisionOf(extra?.pending) : undefined;
  if (pending) out.pending = { ...pending, ...(extra?.pending?.output !== undefined ? { edited: true } : {}) };
  return out;
}

/** A journaled decision's fields, checked: a row changed by hand shows no decision rather than a wrong one. */
function decisionOf(raw: unknown): ShownDecision | undefined {
  const d = raw as Partial<ShownDecision> | null | undefined;
  if (!d || typeof d.approved !== 'boolean' || typeof d.by !== 'string' || typeof d.at !== 'number') return undefined;
  const out: ShownDecision = { approved: d.approved, by: d.by, at: d.at };
  if (typeof d.note === 'string') out.note = d.note;
  if (d.edited === true) out.edited = true;
  if (typeof d.outcome === 'string') out.outcome = d.outcome;
  return out;
}

/** `approved by cli at 2026-01-05 10:20:30 UTC: ship it (edited output)`. */
function decisionText(d: ShownDecision): string {
  const when = new Date(d.at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  const what = d.outcome === 'revise' ? 'rejected (sent back)' : d.approved ? 'approved' : 'rejected';
  return `${what} by ${d.by} at ${when}${d.note !== undefined ? `: ${d.note}` : ''}${d.edited ? ' (edited output)' : ''}`;
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
  const a = t.approval;
  if (a && t.status === 'waiting') return `waiting for approval: ${a.prompt}${a.pending ? ` (${decisionText(a.pending)}; applied when the run continues)` : ''}`;
  if (a?.decision) return decisionText(a.decision);
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
function taskBlock(t: ShownTask, runId: string): string {
  const cost = t.costUsd === null ? '' : `  ${formatUsd(t.costUsd)}`;
  const tries = t.container ? 'container' : `${t.attempts} attempt${t.attempts === 1 ? '' : 's'}, ${t.requests} request${t.requests === 1 ? '' : 's'}`;
  const lines = [`== ${visible(t.id)}  ${t.status}  ${tries}${cost}`];
  const a = t.approval;
  if (a) {
    lines.push(`approves: ${visible(a.approves)}`, `question: ${visible(a.prompt)}`);
    if (a.decision) lines.push(`decision: ${visible(decisionText(a.decision))}`);
    if (a.pending) lines.push(`pending:  ${visible(decisionText(a.pending))} (applied when the run continues: swarmstate resume ${visible(runId)})`);
    else if (t.status === 'waiting') lines.push(`waiting for a decision: swarmstate approve ${visible(runId)} ${visible(t.id)} [--reject] [--note <text>] [--output <file>]`);
    return lines.join('\n');
  }
  if (rejectedAnswer(t)) lines.push(`error: ${visible(errorSummary(t)!)}`, 'rejected answer:', visibleLines(t.output!));
  else if (t.output !== null) lines.push(visibleLines(t.output));
  else if (t.error) lines.push(`error: ${visible(summaryOf(t))}`);
  else if (t.reason) lines.push(`reason: ${visible(t.reason)}`);
  return lines.join('\n');
}
