/**
 * The table printed at the end of a run: how its tasks ended, what it sent, what it cost (per
 * model and in total), how much input came from the providers' caches, what the tool bus saved,
 * and how long it took. The result alone is enough; the event stream adds what only it knows
 * (429s, tool sharing, the models' routes and prices when the result carries no cost). Every
 * count is added up as every surface adds it (machines/tasks/counts.ts), from the result's tasks.
 */
import type { TaskStatus, Usage } from '../../machines/protocol.js';
import { countTasks, type RunCounts } from '../../machines/tasks/counts.js';
import { tallyOfResult, type RunResult, type TaskResult } from '../../machines/tasks/results.js';
import { costOf } from '../cost/price.js';
import type { TimedRunEvent } from '../swarm.js';
import { columns, formatElapsed, formatInt, formatPercent, formatUsd, plural } from './format.js';
import { progressState, reduce, type ProgressState } from './progressState.js';
import { visible } from './terminal.js';

const FAILED_SHOWN = 10;

/**
 * @example
 * const events: TimedRunEvent[] = [];
 * run.events.on('*', (_type, e) => events.push(e));
 * console.log(formatSummaryTable(await run.result, events));
 * // status       partial (run BxmoUl2h02a1)
 * // tasks        4
 * //   completed  2
 * // ...
 */
export function formatSummaryTable(result: RunResult, events: readonly TimedRunEvent[] = []): string {
  const seen: ProgressState | undefined = events.length > 0 ? events.reduce(reduce, progressState()) : undefined;
  const priced = pricedTasks(result, seen);
  const t = countTasks(priced.map((task) => [task.id, tallyOfResult(task, seen?.stream.book.get(task.id)?.rateLimited ?? 0)] as const));
  const noEvents = 'n/a (no events)';

  const allInput = t.usage.inputTokens + t.usage.cacheReadTokens + t.usage.cacheWriteTokens;
  const rows: string[][] = [
    ['status', `${result.status} (run ${result.runId})`],
    ['tasks', formatInt(t.tasks)],
    ['  completed', formatInt(t.byStatus.completed)],
    ['  failed', formatInt(t.byStatus.failed)],
    ['  skipped', formatInt(t.byStatus.skipped)],
    ['  cancelled', formatInt(t.byStatus.cancelled)],
    // A paused run: its approvals wait for a person, and what depends on them has not started.
    ...(t.byStatus.waiting > 0 ? [['  waiting', `${formatInt(t.byStatus.waiting)} (approval${t.byStatus.waiting === 1 ? '' : 's'} waiting for a decision)`]] : []),
    ...(t.byStatus.pending > 0 ? [['  pending', `${formatInt(t.byStatus.pending)} (not started: behind an approval)`]] : []),
    ...(t.containers > 0 ? [['containers', containersText(t)]] : []),
    ['attempts', formatInt(t.attempts)],
    ['requests', formatInt(t.requests)],
    ['429s', seen ? formatInt(t.rateLimited) : noEvents],
    ['retries', formatInt(t.retries)],
    ['cache read', `${formatPercent(t.usage.cacheReadTokens, allInput)} of input tokens (${formatInt(t.usage.cacheReadTokens)} of ${formatInt(allInput)})`],
    ['tools', seen ? toolsText(seen) : noEvents],
    ['makespan', makespanText(result.totals.durationMs)],
  ];
  // Maps with `dedupe`: what their outputs (and any reduce over them) left out.
  const deduped = Object.values(result.tasks).filter((task) => task.dropped !== undefined);
  if (deduped.length > 0) {
    const text = deduped.map((task) => `${task.id}: ${formatInt(task.dropped!)} of ${formatInt(task.subtasks?.length ?? 0)} item outputs dropped as duplicates`).join('; ');
    rows.splice(rows.findIndex((r) => r[0] === 'requests'), 0, ['duplicates', text]);
  }
  // Escaped before the columns are measured: a name or message from outside may hold controls.
  const lines = columns(rows.map(visibleCells), ['left', 'left']);

  lines.push('', ...columns(modelTable(priced, t, seen).map(visibleCells), ['left', 'left']));

  const failed = Object.values(result.tasks).filter((task) => task.status === 'failed');
  if (failed.length > 0) lines.push('');
  for (const task of failed.slice(0, FAILED_SHOWN)) lines.push(visible(`failed ${task.id}: ${task.error?.code ?? 'error'}: ${task.error?.message ?? ''}`));
  if (failed.length > FAILED_SHOWN) lines.push(`... and ${formatInt(failed.length - FAILED_SHOWN)} more failed`);
  return lines.join('\n');
}

function visibleCells(row: string[]): string[] {
  return row.map(visible);
}

function toolsText(seen: ProgressState): string {
  const t = seen.tools;
  if (t.requested + t.executed + t.denied === 0) return 'none';
  const parts = [`${formatInt(t.requested)} requested`, `${formatInt(t.executed)} executed`, `${formatInt(t.shared)} shared`, `${formatInt(t.cached)} cached`];
  if (t.denied > 0) parts.push(`${formatInt(t.denied)} denied`);
  if (t.failed > 0) parts.push(plural(t.failed, 'execution') + ' failed');
  return parts.join(', ');
}

/** `0.08s`, or `754.21s (12m34s)` once a minute has passed. */
function makespanText(ms: number): string {
  const seconds = `${(Math.max(0, ms) / 1000).toFixed(2)}s`;
  return ms >= 60_000 ? `${seconds} (${formatElapsed(ms)})` : seconds;
}

/**
 * The result's tasks, each with a cost: the runtime prices every task; a result from elsewhere
 * may carry none, and then the prices in run:started still tell it (else it stays unknown).
 */
function pricedTasks(result: RunResult, seen: ProgressState | undefined): TaskResult[] {
  return Object.values(result.tasks).map((task) => {
    if (task.costUsd !== undefined || task.requests === 0) return task;
    const price = seen?.models[task.model]?.price;
    return price ? { ...task, costUsd: costOf(task.usage, price) } : task;
  });
}

/** `2 (2 completed)`: maps and reduces that expanded, by status. */
function containersText(t: RunCounts): string {
  const parts = (Object.entries(t.containersByStatus) as [TaskStatus, number][]).filter(([, n]) => n > 0).map(([s, n]) => `${formatInt(n)} ${s}`);
  return `${formatInt(t.containers)} (${parts.join(', ')}; maps and reduces that expanded: their items and groups are the tasks)`;
}

/** One row per model (the plan's names), then the total: tasks, requests, tokens, cost. */
function modelTable(tasks: readonly TaskResult[], total: RunCounts, seen: ProgressState | undefined): string[][] {
  const byModel = new Map<string, TaskResult[]>();
  for (const task of tasks) (byModel.get(task.model) ?? byModel.set(task.model, []).get(task.model)!).push(task);
  const table: string[][] = [['model', 'route', 'tasks', 'requests', 'input', 'output', 'cache read', 'cache write', 'cost']];
  for (const [name, list] of [...byModel].sort(([a], [b]) => a.localeCompare(b))) {
    const row = countTasks(list.map((task) => [task.id, tallyOfResult(task)] as const));
    // A model whose only tasks are containers has no row: they run nothing.
    if (row.tasks === 0) continue;
    const route = seen?.models[name];
    table.push([name, route ? `${route.provider}/${route.model}` : '', ...numbers(row.tasks, row.requests, row.usage), formatUsd(row.costUsd)]);
  }
  table.push(['total', '', ...numbers(total.tasks, total.requests, total.usage), formatUsd(total.costUsd)]);
  return table;
}

function numbers(tasks: number, requests: number, usage: Usage): string[] {
  return [tasks, requests, usage.inputTokens, usage.outputTokens, usage.cacheReadTokens, usage.cacheWriteTokens].map(formatInt);
}
