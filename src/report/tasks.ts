/**
 * The report's tasks, stages and cost by model, from each task's tally (what the stream or the
 * result says it counted) added up by the run's one counting (machines/tasks/counts.ts): the
 * cards, the tables and the totals are the same numbers the summary, `--json` and `show` give.
 */
import type { ErrorInfo } from '../../machines/protocol.js';
import { countTasks, tallyCost, type CountBook, type RunCounts, type TaskTally } from '../../machines/tasks/counts.js';
import { isFinal } from '../../machines/tasks/lifecycle.js';
import type { ShownStatus, Spend, StageReport, TaskReport } from './types.js';

/** What the stream tells of a task beside its counts. */
export interface TaskFacts {
  modelName?: string;
  firstStart?: number;
  lastEnd?: number;
  error?: ErrorInfo;
  skippedReason?: string;
}

const zeroShown = (): Record<ShownStatus, number> => ({ completed: 0, failed: 0, skipped: 0, cancelled: 0, running: 0, waiting: 0, unfinished: 0 });

/** The counts' statuses as a report shows them (`live`: the run still goes). */
export function shownStatuses(byStatus: RunCounts['byStatus'], live: boolean): Record<ShownStatus, number> {
  const out = zeroShown();
  out.completed = byStatus.completed;
  out.failed = byStatus.failed;
  out.skipped = byStatus.skipped;
  out.cancelled = byStatus.cancelled;
  const waiting = byStatus.pending + byStatus.queued;
  if (live) {
    out.running = byStatus.running;
    out.waiting = waiting;
  } else out.unfinished = byStatus.running + waiting;
  return out;
}

/** A group's tokens and cost, from its counts. */
export const spendOf = (c: RunCounts): Spend => ({ requests: c.requests, usage: { ...c.usage }, costUsd: c.costUsd, unpriced: c.unpriced });

/** Ids the stream counts without naming them (see StreamCounts): never listed. */
const named = (id: string) => !id.startsWith('\u0000');

export interface TaskViews {
  tasks: TaskReport[];
  stages: StageReport[];
  byModel: [string, Spend][];
}

/** Each task as the report lists it, its stage's and its model's totals. */
export function taskViews(book: CountBook, facts: ReadonlyMap<string, TaskFacts>, live: boolean, stage: (id: string, model: string | undefined) => string): TaskViews {
  const tasks: TaskReport[] = [];
  const byStage = new Map<string, { ids: [string, TaskTally][]; firstStart?: number; lastEnd?: number }>();
  const byModel = new Map<string, [string, TaskTally][]>();
  for (const id of book.ids()) {
    if (!named(id)) continue;
    const t = book.get(id)!;
    const f = facts.get(id) ?? {};
    const status: ShownStatus = isFinal(t.status) ? (t.status as ShownStatus) : !live ? 'unfinished' : t.status === 'running' ? 'running' : 'waiting';
    const spend: Spend = { requests: t.requests, usage: t.usage, costUsd: tallyCost(t), unpriced: t.unpriced };
    const task: TaskReport = { id, stage: stage(id, f.modelName), status, container: t.container, attempts: t.attempts, retries: t.retries, requests: t.requests, spend };
    if (f.modelName !== undefined) task.modelName = f.modelName;
    if (f.firstStart !== undefined) task.firstStart = f.firstStart;
    if (f.lastEnd !== undefined) task.lastEnd = f.lastEnd;
    if (f.error !== undefined) task.error = f.error;
    if (f.skippedReason !== undefined) task.skippedReason = f.skippedReason;
    tasks.push(task);
    // A container is no task: its items and groups are in their own stages.
    if (t.container) continue;
    const s = byStage.get(task.stage) ?? byStage.set(task.stage, { ids: [] }).get(task.stage)!;
    s.ids.push([id, t]);
    if (task.firstStart !== undefined) s.firstStart = Math.min(s.firstStart ?? Infinity, task.firstStart);
    if (task.lastEnd !== undefined) s.lastEnd = Math.max(s.lastEnd ?? -Infinity, task.lastEnd);
    if (f.modelName !== undefined) (byModel.get(f.modelName) ?? byModel.set(f.modelName, []).get(f.modelName)!).push([id, t]);
  }
  const stages: StageReport[] = [...byStage].map(([name, s]) => {
    const c = countTasks(s.ids);
    const report: StageReport = { stage: name, tasks: c.tasks, byStatus: shownStatuses(c.byStatus, live), attempts: c.attempts, retries: c.retries, spend: spendOf(c) };
    if (s.firstStart !== undefined) report.firstStart = s.firstStart;
    if (s.lastEnd !== undefined) report.lastEnd = s.lastEnd;
    return report;
  });
  // Pipeline order: by first start; stages that never started last.
  stages.sort((a, b) => (a.firstStart ?? Infinity) - (b.firstStart ?? Infinity));
  const models = [...byModel].sort(([a], [b]) => a.localeCompare(b)).map(([name, ids]) => [name, spendOf(countTasks(ids))] as [string, Spend]);
  return { tasks, stages, byModel: models };
}
