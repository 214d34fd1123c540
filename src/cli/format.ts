/**
 * The CLI's text: durations, dollars, counts, a bar, aligned columns; the one-line form of the
 * run events worth a person's attention; and a run in progress as log lines (`statusLine`) or as
 * the live view's frame (`renderFrame`). All pure: the writer is progress.ts, the end-of-run
 * table summary.ts.
 */
import type { RunEvent } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/tasks/results.js';
import type { ProgressState } from './progressState.js';
import { visible } from './terminal.js';

/** `0.0s`, `12.3s` (tenths cut, not rounded), `5m02s`, `1h02m`. */
export function formatElapsed(ms: number): string {
  const safe = Number.isFinite(ms) && ms > 0 ? ms : 0;
  if (safe < 60_000) return `${(Math.floor(safe / 100) / 10).toFixed(1)}s`;
  const s = Math.floor(safe / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * Dollars with the precision their size needs: `$0.000417`, `$0.0080`, `$0.0123`, `$12.34`;
 * `unknown` when no price was known (null), never a made-up zero.
 */
export function formatUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return 'unknown';
  if (usd === 0) return '$0.00';
  if (usd < 0.001) return `$${usd.toFixed(6)}`;
  if (usd < 1) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

/** An integer with thousands separators: `12,345`. */
export function formatInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** `1 retry`, `3 retries`. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${formatInt(n)} ${n === 1 ? one : many}`;
}

/** A percentage with one decimal: `12.5%`; `0.0%` of nothing. */
export function formatPercent(part: number, whole: number): string {
  return `${(whole > 0 ? (100 * part) / whole : 0).toFixed(1)}%`;
}

/** A line cut to `width` columns (the last one an ellipsis), so a terminal never wraps it. */
export function fit(line: string, width: number): string {
  if (width <= 0 || line.length <= width) return line;
  return width === 1 ? line.slice(0, 1) : `${line.slice(0, width - 1)}…`;
}

/** `[#####.....]`: `width` cells between the brackets, filled in proportion to `fraction`. */
export function bar(fraction: number, width: number): string {
  const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
  const filled = Math.floor(f * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/**
 * Rows as aligned columns, two spaces apart: the first column left-aligned, the others as
 * `align` says (right by default, which suits numbers). Trailing spaces are trimmed.
 */
export function columns(rows: string[][], align: ('left' | 'right')[] = []): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    row
      .map((cell, i) => ((align[i] ?? (i === 0 ? 'left' : 'right')) === 'left' ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

/**
 * A line for the events worth a person's attention (failures, retries, skips, budgets refusing or
 * overrun, keys backing off, revoked or set aside, breakers opening and closing, compactions, denied
 * tools, approvals asked and decided, cancellation); undefined
 * for the rest, completed tasks included: a 10,000-task run must not print 10,000 lines.
 */
export function formatEventLine(event: RunEvent): string | undefined {
  switch (event.type) {
    case 'task:retry':
      return `retry    ${event.taskId} #${event.retry} in ${event.delayMs} ms (${errorText(event.error)})`;
    case 'task:failed':
      return event.willRetry
        ? `failed*  ${event.taskId} attempt ${event.attempt} (${errorText(event.error)}) - will retry`
        : `FAILED   ${event.taskId} attempt ${event.attempt} (${errorText(event.error)})`;
    case 'task:skipped':
      return `skipped  ${event.taskId} (${event.reason})`;
    case 'task:compacted':
      return `compact  ${event.taskId} attempt ${event.attempt}: ${event.mode}, ${plural(event.removed, 'message')} removed, ${formatInt(event.tokensBefore)} -> ${formatInt(event.tokensAfter)} tokens`;
    case 'budget:overrun':
      return `budget   ${event.taskId} OVERRAN the ${event.budget} budget: a call on ${event.model} cost ${formatUsd(event.actualUsd)} (${formatUsd(event.reservedUsd)} reserved); spent ${formatUsd(event.spentUsd)} of ${formatBudget(event.limitUsd)}`;
    case 'budget:denied':
      return `budget   ${event.taskId} refused $${event.amountUsd} by the ${event.budget} budget (limit $${event.limitUsd}, spent $${event.spentUsd})`;
    case 'tool:denied':
      return `denied   ${event.taskId} tool "${event.name}" (${event.reason})`;
    case 'key:backoff':
      return `key      ${event.keyId} backs off ${event.retryAfterMs} ms`;
    case 'key:revoked':
      return `key      ${event.keyId} REVOKED`;
    case 'key:set-aside':
      return `key      ${event.keyId} SET ASIDE: nothing but 429s for ${event.rateLimitedMs} ms (${plural(event.responses, 'response')})`;
    case 'breaker:open':
      return `breaker  ${event.route} OPEN for ${event.cooldownMs} ms after ${plural(event.failures, 'failure')}`;
    case 'breaker:closed':
      return `breaker  ${event.route} closed`;
    case 'approval:requested':
      return `waiting for approval: ${event.taskId} approves ${event.approves} — ${event.prompt}${event.round > 1 ? ` (round ${event.round} of ${event.maxRounds})` : ''}`;
    case 'approval:decided':
      return decidedLine(event);
    case 'run:cancelled':
      return `run cancelled: ${event.reason}`;
    default:
      return undefined;
  }
}

/** `approved ok by cli: ship it (edited output)`, `rejected ok by ui: too long — "draft" goes back for another attempt`. */
function decidedLine(e: Extract<RunEvent, { type: 'approval:decided' }>): string {
  const note = e.note !== undefined ? `: ${e.note}` : '';
  const edited = e.edited ? ' (edited output)' : '';
  const next = e.outcome === 'revise' ? ` — "${e.approves}" goes back for another attempt` : e.outcome === 'rejected' ? ' — the approval fails' : '';
  return `${e.approved ? 'approved' : 'rejected'} ${e.taskId} by ${e.by}${note}${edited}${next}`;
}

function errorText(error: { code?: string; message?: string } | undefined): string {
  return `${error?.code ?? 'error'}: ${error?.message ?? ''}`;
}

// ---------------------------------------------------------------------------------------------
// A run in progress, as text
// ---------------------------------------------------------------------------------------------

/** Tasks with a final status. */
export function finishedTasks(state: ProgressState): number {
  const c = state.counts;
  return c.completed + c.failed + c.skipped + c.cancelled;
}

/** Time since the start: frozen at run:completed. */
function elapsedMs(state: ProgressState, now: number): number {
  if (state.startedAt === undefined) return 0;
  return Math.max(0, (state.endedAt ?? now) - state.startedAt);
}

/** Time left at the rate tasks have been finishing; undefined until one has, or once all have. */
export function etaMs(state: ProgressState, now: number): number | undefined {
  const worked = state.counts.completed + state.counts.failed;
  const left = state.total - finishedTasks(state);
  const elapsed = elapsedMs(state, now);
  if (state.endedAt !== undefined || worked === 0 || left <= 0 || elapsed <= 0) return undefined;
  return (elapsed / worked) * left;
}

function costText(state: ProgressState, budgetUsd?: number): string | undefined {
  const priced = state.responses - state.unpriced > 0 || Object.values(state.models).some((m) => m.price);
  if (!priced) return undefined;
  const spent = formatUsd(state.costUsd);
  if (budgetUsd === undefined) return spent;
  return `${spent} of ${formatBudget(budgetUsd)}`;
}

/** A budget's limit: usually whole cents, so `$0.05`, not `$0.0500`; else as `formatUsd` says. */
export function formatBudget(usd: number): string {
  const cents = usd * 100;
  return usd >= 0.01 && Math.abs(cents - Math.round(cents)) < 1e-9 ? `$${usd.toFixed(2)}` : formatUsd(usd);
}

/**
 * One line for logs: `[12.3s] 120/865 done, 8 in flight, 400 queued, 3 retries, $0.0123`;
 * failed, skipped and cancelled counts appear once there are any.
 */
export function statusLine(state: ProgressState, at: number, budgetUsd?: number): string {
  const c = state.counts;
  const parts = [`${formatInt(c.completed)}/${formatInt(state.total)} done`];
  if (c.failed > 0) parts.push(`${formatInt(c.failed)} failed`);
  if (c.skipped > 0) parts.push(`${formatInt(c.skipped)} skipped`);
  if (c.cancelled > 0) parts.push(`${formatInt(c.cancelled)} cancelled`);
  parts.push(`${formatInt(c.running)} in flight`, `${formatInt(c.queued)} queued`);
  if (c.waiting > 0) parts.push(`${formatInt(c.waiting)} waiting for approval`);
  parts.push(plural(state.retries, 'retry', 'retries'));
  const cost = costText(state, budgetUsd);
  if (cost) parts.push(cost);
  const head = state.status ? `run ${state.status}: ` : '';
  return `${stamp(state, at)} ${head}${parts.join(', ')}`;
}

/** The first log line: `run BxmoUl2h02a1: 865 tasks, 3 keys, at most 16 in flight`. */
export function startLine(state: ProgressState): string {
  const parts = [`run ${state.runId ?? '?'}: ${plural(state.total, 'task')}`];
  if (state.keys.size > 0) parts.push(plural(state.keys.size, 'key'));
  if (state.maxInFlight !== undefined) parts.push(`at most ${formatInt(state.maxInFlight)} in flight`);
  return parts.join(', ');
}

/** `[12.3s]`: time since the run started. */
export function stamp(state: ProgressState, at: number): string {
  return `[${formatElapsed(state.startedAt === undefined ? 0 : at - state.startedAt)}]`;
}

/** The frame must fit a terminal's height, or redrawing in place breaks: long lists are cut. */
const MAX_KEY_LINES = 8;
const MAX_BREAKER_LINES = 4;

/**
 * The live view, one string per line, each at most `width` columns:
 *
 *     swarmstate run BxmoUl2h02a1  12.3s  ETA 40.1s
 *     tasks    [###.................]  122/865  14.0%  120 completed  2 failed
 *     now      8 in flight, 400 queued, 3 retries, 210 requests (4 rate limited)
 *     cost     $0.0123 of $1.00 (1.2%)
 *     key      sim:29c2cc88  ready      80 requests  2 active
 *     breaker  sim/sim-fast  open (opened 1 time)
 *     tools    40 requested, 22 executed, 10 shared, 8 cached
 *
 * The tasks count those with a final status (completed, failed, skipped, cancelled); the ETA
 * comes from the rate at which tasks completed or failed so far.
 */
export function renderFrame(state: ProgressState, now: number, width: number, budgetUsd?: number): string[] {
  const c = state.counts;
  const finished = finishedTasks(state);
  const eta = etaMs(state, now);
  const lines: string[] = [];

  const head = [`swarmstate run ${state.runId ?? '?'}`, formatElapsed(elapsedMs(state, now))];
  if (state.status) head.push(state.status);
  else if (state.cancelReason !== undefined) head.push(`cancelling (${state.cancelReason})`);
  else if (eta !== undefined) head.push(`ETA ${formatElapsed(eta)}`);
  lines.push(head.join('  '));

  const tally = [`${formatInt(finished)}/${formatInt(state.total)}`, formatPercent(finished, state.total)];
  if (c.completed !== finished) tally.push(`${formatInt(c.completed)} completed`);
  if (c.failed > 0) tally.push(`${formatInt(c.failed)} failed`);
  if (c.skipped > 0) tally.push(`${formatInt(c.skipped)} skipped`);
  if (c.cancelled > 0) tally.push(`${formatInt(c.cancelled)} cancelled`);
  const counts = tally.join('  ');
  // Sized by the width and the widest counts this run can have, so it does not jump as they grow.
  const n = formatInt(state.total);
  const widest = `${n}/${n}  100.0%  ${n} completed  ${n} failed  ${n} skipped`.length;
  const barWidth = Math.max(10, Math.min(40, width - 'tasks    []  '.length - widest));
  lines.push(`tasks    ${bar(state.total > 0 ? finished / state.total : 0, barWidth)}  ${counts}`);

  const requests = `${plural(state.requests, 'request')}${state.rateLimited > 0 ? ` (${formatInt(state.rateLimited)} rate limited)` : ''}`;
  const waiting = c.waiting > 0 ? `, ${formatInt(c.waiting)} waiting for approval` : '';
  lines.push(`now      ${formatInt(c.running)} in flight, ${formatInt(c.queued)} queued${waiting}, ${plural(state.retries, 'retry', 'retries')}, ${requests}`);

  const cost = costText(state, budgetUsd);
  const share = budgetUsd !== undefined && budgetUsd > 0 ? ` (${formatPercent(state.costUsd, budgetUsd)})` : '';
  const unpriced = state.unpriced > 0 ? ` + ${plural(state.unpriced, 'unpriced response')}` : '';
  lines.push(`cost     ${cost === undefined ? 'unknown (no model has a price)' : `${cost}${share}${unpriced}`}`);

  const keys = [...state.keys.entries()];
  const idWidth = Math.max(0, ...keys.slice(0, MAX_KEY_LINES).map(([id]) => id.length));
  for (const [id, key] of keys.slice(0, MAX_KEY_LINES)) {
    const use = [plural(key.requests, 'request')];
    if (key.rate?.rpm !== null && key.rate?.rpm !== undefined) use.push(`${key.rate.rpm} rpm ${key.rate.source}`);
    if (key.active > 0) use.push(`${formatInt(key.active)} active`);
    if (key.rateLimited > 0) use.push(`${formatInt(key.rateLimited)} rate limited`);
    lines.push(`key      ${id.padEnd(idWidth)}  ${key.state.padEnd(9)}  ${use.join('  ')}`);
  }
  if (keys.length > MAX_KEY_LINES) {
    const byState = new Map<string, number>();
    for (const [, key] of keys.slice(MAX_KEY_LINES)) byState.set(key.state, (byState.get(key.state) ?? 0) + 1);
    lines.push(`key      ${formatInt(keys.length - MAX_KEY_LINES)} more: ${[...byState].map(([s, n]) => `${n} ${s}`).join(', ')}`);
  }

  // Open ones first: with many routes, the ones refusing calls now are what matters.
  const breakers = [...state.breakers].sort(([, a], [, b]) => Number(a.state === 'closed') - Number(b.state === 'closed'));
  for (const [route, breaker] of breakers.slice(0, MAX_BREAKER_LINES)) lines.push(`breaker  ${route}  ${breaker.state} (opened ${plural(breaker.opened, 'time')})`);
  if (breakers.length > MAX_BREAKER_LINES) lines.push(`breaker  ${formatInt(breakers.length - MAX_BREAKER_LINES)} more routes`);

  const t = state.tools;
  if (t.requested + t.executed + t.denied > 0) {
    const extra = [t.denied > 0 ? `, ${formatInt(t.denied)} denied` : '', t.failed > 0 ? `, ${formatInt(t.failed)} failed` : ''].join('');
    lines.push(`tools    ${formatInt(t.requested)} requested, ${formatInt(t.executed)} executed, ${formatInt(t.shared)} shared, ${formatInt(t.cached)} cached${extra}`);
  }
  if (state.compactions > 0) lines.push(`context  ${plural(state.compactions, 'compaction')}`);
  // Route names and key ids come from the plan, shown escaped, and cut after escaping.
  return lines.map((line) => fit(visible(line), width));
}

