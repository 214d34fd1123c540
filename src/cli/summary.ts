/**
 * The table printed at the end of a run: how its tasks ended, what it sent, what it cost (per
 * model and in total), how much input came from the providers' caches, what the tool bus saved,
 * and how long it took. The result alone is enough; the event stream adds what only it knows
 * (429s, tool sharing, the models' routes and prices when the result carries no cost).
 */
import type { Usage } from '../../machines/protocol.js';
import { addUsage, ZERO_USAGE } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/tasks/results.js';
import { costOf } from '../cost/price.js';
import type { TimedRunEvent } from '../swarm.js';
import { columns, formatElapsed, formatInt, formatPercent, formatUsd, plural } from './format.js';
import { progressState, reduce, type ProgressState } from './progressState.js';
import { visible } from './terminal.js';

const FAILED_SHOWN = 10;

interface ModelRow {
  tasks: number;
  requests: number;
  usage: Usage;
  /** Null while no task of the model had a known cost. */
  costUsd: number | null;
}

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
  const t = result.totals;
  const noEvents = 'n/a (no events)';

  const allInput = t.usage.inputTokens + t.usage.cacheReadTokens + t.usage.cacheWriteTokens;
  const rows: string[][] = [
    ['status', `${result.status} (run ${result.runId})`],
    ['tasks', formatInt(t.tasks)],
    ['  completed', formatInt(t.completed)],
    ['  failed', formatInt(t.failed)],
    ['  skipped', formatInt(t.skipped)],
    ['  cancelled', formatInt(t.cancelled)],
    ['requests', formatInt(t.requests)],
    ['429s', seen ? formatInt(seen.rateLimited) : noEvents],
    ['retries', formatInt(t.retries)],
    ['cache read', `${formatPercent(t.usage.cacheReadTokens, allInput)} of input tokens (${formatInt(t.usage.cacheReadTokens)} of ${formatInt(allInput)})`],
    ['tools', seen ? toolsText(seen) : noEvents],
    ['makespan', makespanText(t.durationMs)],
  ];
  // Maps with `dedupe`: what their outputs (and any reduce over them) left out.
  const deduped = Object.values(result.tasks).filter((task) => task.dropped !== undefined);
  if (deduped.length > 0) {
    const text = deduped.map((task) => `${task.id}: ${formatInt(task.dropped!)} of ${formatInt(task.subtasks?.length ?? 0)} item outputs dropped as duplicates`).join('; ');
    rows.splice(rows.findIndex((r) => r[0] === 'requests'), 0, ['duplicates', text]);
  }
  // Escaped before the columns are measured: a name or message from outside may hold controls.
  const lines = columns(rows.map(visibleCells), ['left', 'left']);

  lines.push('', ...columns(modelTable(result, seen).map(visibleCells), ['left', 'left']));

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

/** One row per model (the plan's names), then the total: tasks, requests, tokens, cost. */
function modelTable(result: RunResult, seen: ProgressState | undefined): string[][] {
  const byModel = new Map<string, ModelRow>();
  for (const task of Object.values(result.tasks)) {
    const row = byModel.get(task.model) ?? { tasks: 0, requests: 0, usage: ZERO_USAGE, costUsd: null };
    row.tasks += 1;
    row.requests += task.requests;
    row.usage = addUsage(row.usage, task.usage);
    // The runtime prices every task; a result from elsewhere may carry no cost, and then the
    // prices in run:started still tell it.
    const usd = task.costUsd !== undefined ? task.costUsd : costOf(task.usage, seen?.models[task.model]?.price);
    if (usd !== null) row.costUsd = (row.costUsd ?? 0) + usd;
    byModel.set(task.model, row);
  }
  const table: string[][] = [['model', 'route', 'tasks', 'requests', 'input', 'output', 'cache read', 'cache write', 'cost']];
  let total: number | null = null;
  for (const [name, row] of [...byModel].sort(([a], [b]) => a.localeCompare(b))) {
    const route = seen?.models[name];
    table.push([name, route ? `${route.provider}/${route.model}` : '', ...numbers(row.tasks, row.requests, row.usage), formatUsd(row.costUsd)]);
    if (row.costUsd !== null) total = (total ?? 0) + row.costUsd;
  }
  const t = result.totals;
  const totalUsd = t.costUsd !== undefined ? t.costUsd : total === null ? null : Math.round(total * 1e8) / 1e8;
  table.push(['total', '', ...numbers(t.tasks, t.requests, t.usage), formatUsd(totalUsd)]);
  return table;
}

function numbers(tasks: number, requests: number, usage: Usage): string[] {
  return [tasks, requests, usage.inputTokens, usage.outputTokens, usage.cacheReadTokens, usage.cacheWriteTokens].map(formatInt);
}
