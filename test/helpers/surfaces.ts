/**
 * The counts a run shows on every surface, read the way a person or a program reads each: the
 * result (`--json`), the end-of-run summary's text, `swarmstate show --json`, the report's cards,
 * the live page's cards (rendered while the run goes), and the progress line's state. And the
 * oracle: the journal's rows, read with SQL on the file, not through the store.
 */
import { Writable } from 'node:stream';
import type { RunResult } from '../../machines/tasks/results.js';
import { runCommand } from '../../src/cli/commands/command.js';
import { show } from '../../src/cli/commands/show.js';
import { runs } from '../../src/cli/commands/runs.js';
import { openStoreToRead } from '../../src/store/index.js';
import { journalReport } from '../../src/ui/journalReport.js';
import { progressState, reduce } from '../../src/cli/progressState.js';
import { formatSummaryTable } from '../../src/cli/summary.js';
import { buildReport, renderReport } from '../../src/report/html.js';
import type { TimedRunEvent } from '../../src/swarm.js';
import { rawDb } from './sqlite.js';

/** The counts every surface shows, by the names of RunResult's totals. */
export interface Shown {
  tasks: number;
  completed: number;
  failed: number;
  skipped: number;
  cancelled: number;
  containers: number;
  attempts: number;
  requests: number;
  retries: number;
  /** USD, to 1e-6 (the surfaces print fewer digits: compared as the text says). */
  costUsd: number | null;
}

/** One task's counters, by the names of TaskResult's fields. */
export interface ShownTask {
  status: string;
  container: boolean;
  attempts: number;
  requests: number;
  retries: number;
}

export interface Oracle extends Shown {
  perTask: Record<string, ShownTask>;
}

const KINDS_WITH_CONTAINERS = new Set(['map', 'reduce']);

/**
 * What the journal holds for a run, from its rows: tasks are the rows but containers (a map or a
 * reduce with rows made under it); attempts are the attempt rows an agent started (a route set);
 * cost is the spend the journal charged, per call.
 */
export function journalOracle(file: string, runId: string): Oracle {
  const db = rawDb(file, { readOnly: true });
  try {
    const rows = db.prepare('SELECT task_id, status, requests, retries, spec_json, parent FROM tasks WHERE run_id = ? ORDER BY rowid').all(runId) as {
      task_id: string;
      status: string;
      requests: number;
      retries: number;
      spec_json: string | null;
      parent: string | null;
    }[];
    const plan = JSON.parse((db.prepare('SELECT plan_json FROM run_plans WHERE run_id = ?').get(runId) as { plan_json: string }).plan_json) as { tasks: { id: string; kind?: string }[] };
    const started = new Map(
      (db.prepare("SELECT task_id, count(*) AS n FROM attempts WHERE run_id = ? AND route <> '' GROUP BY task_id").all(runId) as { task_id: string; n: number }[]).map((r) => [r.task_id, r.n]),
    );
    const spend = db.prepare('SELECT sum(usd) AS usd FROM spend WHERE run_id = ?').get(runId) as { usd: number | null };
    const kind = new Map<string, string | undefined>(plan.tasks.map((t) => [t.id, t.kind]));
    for (const r of rows) if (r.spec_json !== null) kind.set(r.task_id, (JSON.parse(r.spec_json) as { kind?: string }).kind);
    const parents = new Set(rows.map((r) => r.parent).filter((p): p is string => p !== null));
    const out: Oracle = { tasks: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0, containers: 0, attempts: 0, requests: 0, retries: 0, costUsd: spend.usd, perTask: {} };
    for (const r of rows) {
      const container = parents.has(r.task_id) && KINDS_WITH_CONTAINERS.has(kind.get(r.task_id) ?? '');
      const attempts = started.get(r.task_id) ?? 0;
      out.perTask[r.task_id] = { status: r.status, container, attempts: container ? 0 : attempts, requests: r.requests, retries: r.retries };
      if (container) {
        out.containers += 1;
        continue;
      }
      out.tasks += 1;
      if (r.status === 'completed' || r.status === 'failed' || r.status === 'skipped' || r.status === 'cancelled') out[r.status] += 1;
      out.attempts += attempts;
      out.requests += r.requests;
      out.retries += r.retries;
    }
    return out;
  } finally {
    db.close();
  }
}

/** `--json`: the result's totals and tasks. */
export function jsonSurface(result: RunResult): { totals: Shown; perTask: Record<string, ShownTask> } {
  const t = result.totals as RunResult['totals'] & { attempts?: number; containers?: number };
  const perTask: Record<string, ShownTask> = {};
  for (const task of Object.values(result.tasks)) {
    perTask[task.id] = { status: task.status, container: (task as { container?: boolean }).container === true, attempts: task.attempts, requests: task.requests, retries: task.retries };
  }
  const totals: Shown = {
    tasks: t.tasks,
    completed: t.completed,
    failed: t.failed,
    skipped: t.skipped,
    cancelled: t.cancelled,
    containers: t.containers ?? NaN,
    attempts: t.attempts ?? NaN,
    requests: t.requests,
    retries: t.retries,
    costUsd: t.costUsd ?? null,
  };
  return { totals, perTask };
}

/** The summary's table, read back from its text (`tasks   12`, `  completed  9`, the total row's cost). */
export function summarySurface(result: RunResult, events: readonly TimedRunEvent[]): Shown {
  const lines = formatSummaryTable(result, events).split('\n');
  const num = (label: string) => {
    const line = lines.find((l) => new RegExp(`^${label} {2,}\\S`).test(l));
    return line === undefined ? NaN : Number(line.slice(label.length).trim().split(/\s/)[0]!.replace(/,/g, ''));
  };
  const total = lines.find((l) => l.startsWith('total '))?.trim().split(/\s+/).at(-1);
  return {
    tasks: num('tasks'),
    completed: num('  completed'),
    failed: num('  failed'),
    skipped: num('  skipped'),
    cancelled: num('  cancelled'),
    containers: lines.some((l) => l.startsWith('containers ')) ? num('containers') : 0,
    attempts: num('attempts'),
    requests: num('requests'),
    retries: num('retries'),
    costUsd: total === undefined || total === 'unknown' ? null : Number(total.replace('$', '')),
  };
}

/** `swarmstate runs --json`, run in this process on the journal file: the run's done and total. */
export async function runsSurface(file: string, runId: string): Promise<{ tasksDone: number; tasksTotal: number; costUsd: number }> {
  let out = '';
  let err = '';
  const sink = (add: (s: string) => void) => new Writable({ write: (chunk, _enc, done) => (add(String(chunk)), done()) });
  const code = await runCommand(runs, ['--store', file, '--json'], { out: sink((s) => (out += s)), err: sink((s) => (err += s)) });
  if (code !== 0) throw new Error(`runs exited ${code}: ${err}`);
  const row = (JSON.parse(out) as { id: string; tasksDone: number; tasksTotal: number; costUsd: number }[]).find((r) => r.id === runId);
  if (row === undefined) throw new Error(`runs does not list ${runId}`);
  return row;
}

/** The journal's page of a run (`swarmstate ui`), rebuilt from its rows, as it shows a run no process holds. */
export function journalPageCards(file: string, runId: string): Cards {
  const store = openStoreToRead(file)!;
  try {
    const record = store.getRun(runId)!;
    return cardsOf(renderReport({ ...journalReport(record, store.loadTasks(runId), store.loadAttempts(runId), record.status), ended: true }).main);
  } finally {
    store.close();
  }
}

/** `swarmstate show <run> --json`, run in this process on the journal file. */
export async function showSurface(file: string, runId: string): Promise<{ totals: Shown; perTask: Record<string, ShownTask>; text: string }> {
  let out = '';
  let err = '';
  const sink = (add: (s: string) => void) => new Writable({ write: (chunk, _enc, done) => (add(String(chunk)), done()) });
  const io = { out: sink((s) => (out += s)), err: sink((s) => (err += s)) };
  const code = await runCommand(show, [runId, '--store', file, '--json'], io);
  if (code !== 0) throw new Error(`show exited ${code}: ${err}`);
  const json = JSON.parse(out) as { totals?: Shown; tasks: (ShownTask & { id: string })[] };
  let text = '';
  const textIo = { out: sink((s) => (text += s)), err: sink((s) => (err += s)) };
  await runCommand(show, [runId, '--store', file], textIo);
  const perTask: Record<string, ShownTask> = {};
  for (const t of json.tasks) perTask[t.id] = { status: t.status, container: t.container === true, attempts: t.attempts, requests: t.requests, retries: t.retries };
  return { totals: json.totals ?? ({} as Shown), perTask, text };
}

/** The cards at the top of a report page: the number each shows, and the tasks card's breakdown. */
export interface Cards {
  tasks: number;
  /** The tasks card's breakdown (`3 completed, 1 running`), by status. */
  breakdown: Record<string, number>;
  requests: number;
  retries: number;
  attempts: number;
  /** The run's badge. */
  status: string;
  /** The cost card as printed (`$0.0012`), read as a number; null for "—". */
  costUsd: number | null;
}

export function cardsOf(html: string): Cards {
  const card = (k: string) => {
    const m = new RegExp(`<div class="card"><div class="k">${k}</div><div class="v">([^<]*)</div>(?:<div class="d">([^<]*)</div>)?`).exec(html);
    if (!m) return { v: '', d: '' };
    return { v: m[1]!, d: m[2] ?? '' };
  };
  const n = (s: string) => Number(s.replace(/,/g, ''));
  const tasks = card('tasks');
  const breakdown: Record<string, number> = {};
  // Containers are said after the breakdown, apart: ` · and 2 containers (...)`.
  for (const part of tasks.d.split(' · ')[0]!.split(', ')) {
    const m = /^([\d,]+) (.+)$/.exec(part.trim());
    if (m) breakdown[m[2]!] = n(m[1]!);
  }
  const cost = card('cost').v;
  return {
    tasks: n(tasks.v),
    breakdown,
    requests: n(card('model requests').v),
    retries: n(card('retries').v),
    attempts: n(card('attempts').v),
    status: /<span class="badge [a-z]*">([^<]*)<\/span>/.exec(html)?.[1] ?? '',
    costUsd: cost === '—' ? null : cost === '$0' ? 0 : Number(cost.replace('$', '')),
  };
}

/** The static report of a run (its events and result), as `--report` writes it. */
export const reportCards = (events: readonly TimedRunEvent[], result?: RunResult): Cards => cardsOf(buildReport(result ? { events, result } : { events }));

/** The live page's views from the events so far, as the page shows them while the run goes. */
export const pageCards = (events: readonly TimedRunEvent[]): Cards => cardsOf(renderReport({ events }).main);

/** The progress view's state after the events: what its status line and frame print. */
export function progressSurface(events: readonly TimedRunEvent[]) {
  const state = events.reduce(reduce, progressState());
  return { total: state.total, counts: { ...state.counts }, requests: state.requests, retries: state.retries, costUsd: state.costUsd, attempts: (state as { attempts?: number }).attempts };
}
