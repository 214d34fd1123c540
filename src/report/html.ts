/**
 * `buildReport`: one self-contained HTML page from a run's event stream. Inline CSS and a small
 * inline script, nothing loaded (a Content-Security-Policy says so), every string from the
 * stream escaped.
 */
import type { RunResult } from '../../machines/tasks/results.js';
import type { TimedRunEvent } from '../swarm.js';
import { CSS, OUTCOME_STYLE, SCRIPT } from './assets.js';
import { at, duration, esc, int, jsonForScript, pct, raw, table, usd, type Cell } from './format.js';
import { analyze } from './model.js';
import { approvalSection, approvalsOf, type ApprovalsView } from './approvals.js';
import { OUTCOMES, SHOWN_STATUSES, stageOf, type KeyReport, type Outcome, type ReportModel, type ShownStatus, type Spend } from './types.js';
import { renderTimeline } from './timeline.js';
import { costSection as costOverTime, dagSection, machinesSection, taskList } from './views.js';

export interface ReportInput {
  /** The run's events, in order, as the stream carries them (with `at`). */
  events: readonly TimedRunEvent[];
  /** The run's result, when saved: the final word on every task's status and the cost total. */
  result?: RunResult;
  /** The page title. Default: "swarmstate run <runId>". */
  title?: string;
  /** The pipeline stage of a task. Default `stageOf`: the id without its first dot-separated segment. */
  stageOf?: (taskId: string, modelName: string | undefined) => string;
  /**
   * The stream is all there will be: a run with no `run:completed` was cut short, and what had
   * not ended reads `unfinished`. Default true for `buildReport` (a file), false for
   * `renderReport` (the live page: such a run is `running`, its calls without a reply in flight).
   */
  ended?: boolean;
  /** The live page: whether it can post decisions on waiting approvals, and whether the run waits for them. Default: no buttons. */
  approvals?: ApprovalsView;
}

/** Rows shown at most in the failure tables: the rest is counted. */
const MAX_ROWS = 200;

/**
 * Builds the report page.
 *
 * @example
 * const events: TimedRunEvent[] = [];
 * const run = swarm.run(plan);
 * run.events.on('*', (_type, e) => events.push(e));
 * writeFileSync('report.html', buildReport({ events, result: await run.result }));
 */
export function buildReport(input: ReportInput): string {
  return reportPage(renderReport({ ...input, ended: input.ended ?? true }), {
    csp: "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:",
  });
}

export interface RenderedReport {
  title: string;
  /** The inside of `<main>`: every view, and the timeline's data block. */
  main: string;
}

/** The report's views from the events: what the static page holds and the live page swaps in. */
export function renderReport(input: ReportInput): RenderedReport {
  const model = analyze(input.events, input.result, input.stageOf ?? stageOf, { ended: input.ended ?? false });
  const title = input.title ?? `swarmstate run ${model.runId ?? '(unknown)'}`;
  const timeline = model.calls.length > 0 || model.keys.length > 0 || model.functionLanes.length > 0 ? renderTimeline(model) : undefined;
  const main = `${header(model, title)}
${approvalSection(approvalsOf(input.events, input.result), input.approvals)}
${dagSection(model)}
<section><h2>Timeline</h2>
${timeline ? timeline.svg : '<p class="note">No model calls in this stream.</p>'}
<p class="note">One lane per key; one bar per model call, from its request to its reply. Calls in flight at once on a key stack.${
    model.functionLanes.length > 0 ? ' Function steps hold no key: one lane per function, a bar per attempt.' : ''
  }${
    model.unmatchedReplies > 0 ? ` ${model.unmatchedReplies} replies had no request in the stream (it was cut).` : ''
  }</p></section>
${costOverTime(model)}
${costTables(model)}
${keySection(model)}
${routeSection(model)}
${toolSection(model)}
${stageSection(model)}
${taskList(model)}
${failureSection(model)}
${machinesSection(model)}
<footer>swarmstate report · <span id="event-count">${int(input.events.length)}</span> events · times are seconds since the run started</footer>
${timeline ? `<script type="application/json" id="report-data">${jsonForScript(timeline.data)}</script>` : ''}`;
  return { title, main };
}

/**
 * The page around the views. The static report allows inline scripts by its meta CSP (a file has
 * no headers); the live page sends a nonce, its CSP comes as a header, and adds its own script.
 */
export function reportPage(r: RenderedReport, opts: { csp?: string; nonce?: string; script?: string }): string {
  const nonce = opts.nonce !== undefined ? ` nonce="${esc(opts.nonce)}"` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
${opts.csp !== undefined ? `<meta http-equiv="Content-Security-Policy" content="${opts.csp}">\n` : ''}<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${esc(r.title)}</title>
<style>${CSS}</style></head>
<body><main>
${r.main}
</main>
<div id="tip" hidden></div>
<script${nonce}>${SCRIPT}${opts.script ?? ''}</script>
</body></html>
`;
}

function header(m: ReportModel, title: string): string {
  const status = m.status.replace(/[^a-z]/g, '');
  // Every number here is the run's counts (m.counts): what the summary, --json and show say.
  const c = m.counts;
  const cost = c.costUsd;
  const rateLimited = c.rateLimited;
  const errors = m.calls.filter((call) => !call.open && call.outcome !== 'ok').length;
  const inFlight = m.calls.filter((call) => call.outcome === 'inflight').length;
  const u = c.usage;
  // The breakdown sums to the card's number: tasks, containers left out (they are said apart).
  const statusLine =
    SHOWN_STATUSES.filter((s) => m.byStatus[s] > 0)
      .map((s) => `${int(m.byStatus[s])} ${s}`)
      .join(', ') || 'none';
  const containers = c.containers > 0 ? ` · and ${int(c.containers)} container${c.containers === 1 ? '' : 's'} (maps and reduces that expanded)` : '';
  const card = (k: string, v: string, d = '') => `<div class="card"><div class="k">${k}</div><div class="v">${v}</div>${d ? `<div class="d">${d}</div>` : ''}</div>`;
  const started = m.origin > 1e12 ? ` · started ${esc(new Date(m.origin).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'))}` : '';
  return `<header><h1>${esc(title)}</h1>
<div class="sub">run <code>${esc(m.runId ?? '(unknown)')}</code> · <span class="badge ${status}">${esc(m.status)}</span>${started}${
    m.cancelReason !== undefined ? ` · cancelled: ${esc(m.cancelReason)}` : ''
  }${m.maxInFlight !== undefined ? ` · up to ${esc(m.maxInFlight)} tasks in flight` : ''}</div>
<div class="cards">
${card('tasks', int(m.taskCount), esc(statusLine + containers))}
${card('makespan', duration(m.makespanMs))}
${card('attempts', int(c.attempts), 'agents started')}
${card('model requests', int(c.requests), `${int(errors)} failed${inFlight ? `, ${int(inFlight)} in flight` : ''}${m.compactions ? `, ${m.compactions} compactions` : ''}`)}
${card('429s', int(rateLimited), pct(rateLimited, c.requests) + ' of requests')}
${card('retries', int(c.retries), 'calls sent again, new attempts')}
${card('cost', usd(cost), cost === null ? 'no model has a price' : c.unpriced > 0 ? `${c.unpriced} calls without a price` : '')}
${card('budget', m.budgetUsd === undefined ? 'none' : usd(m.budgetUsd), m.budgetUsd === undefined ? 'the plan sets no budget.usd' : `${pct(cost ?? 0, m.budgetUsd)} spent`)}
${card('tokens', int(u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens + u.outputTokens), `${int(u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens)} prompt, ${int(u.outputTokens)} output`)}
${card('cache read share', pct(u.cacheReadTokens, u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens), `${int(u.cacheReadTokens)} read, ${int(u.cacheWriteTokens)} written`)}
</div></header>`;
}

const spendColumns = [
  { label: 'requests', num: true },
  { label: 'input', num: true, title: 'uncached input tokens' },
  { label: 'output', num: true },
  { label: 'cache write', num: true },
  { label: 'cache read', num: true },
  { label: 'cache read share', num: true, title: 'cache read / (input + cache write + cache read)' },
  { label: 'cost', num: true },
];
function spendCells(s: Spend): Cell[] {
  const u = s.usage;
  return [int(s.requests), int(u.inputTokens), int(u.outputTokens), int(u.cacheWriteTokens), int(u.cacheReadTokens), pct(u.cacheReadTokens, u.inputTokens + u.cacheWriteTokens + u.cacheReadTokens), usd(s.costUsd)];
}

function costTables(m: ReportModel): string {
  const price = (name: string) => {
    const p = m.models[name]?.price;
    return p ? `$${p.input} / $${p.output}` : '—';
  };
  const byModel = table(
    [{ label: 'model' }, { label: 'route' }, { label: 'price in/out per M', num: true }, ...spendColumns],
    m.byModel.map(([name, s]) => [name, m.models[name] ? `${m.models[name].provider}/${m.models[name].model}` : '', price(name), ...spendCells(s)]),
    ['total', '', '', ...spendCells(m.spend)],
  );
  const byStage = table(
    [{ label: 'stage' }, { label: 'tasks', num: true }, ...spendColumns, { label: 'cost per task', num: true }],
    m.stages.map((s) => [s.stage, int(s.tasks), ...spendCells(s.spend), usd(s.spend.costUsd === null ? null : s.spend.costUsd / Math.max(1, s.tasks))]),
  );
  return `<section><h2>Cost and tokens</h2>
<h3>By model</h3>${byModel}
<h3>By pipeline stage</h3>${byStage}
<p class="note">Cost is each reply's usage at its model's plan price (cache writes 1.25x input and reads 0.1x unless the plan says otherwise); "—" means no price. Failed calls carry no usage in the stream.
A task's stage is its id without the first dot-separated segment (<code>kettle.translate.fr</code> → <code>translate.fr</code>); an id without a dot is a stage of its own.</p></section>`;
}

/** The outcomes a table has a column for: every one but ok, and `in flight` only while the run goes. */
const tableOutcomes = (m: ReportModel): Outcome[] => OUTCOMES.filter((o) => o !== 'ok' && (o !== 'inflight' || m.live));
const outcomeColumns = (m: ReportModel) =>
  tableOutcomes(m).map((o) => ({ label: o === 'inflight' ? 'in flight' : OUTCOME_STYLE[o].label.split(' ')[0]!, num: true, title: OUTCOME_STYLE[o].label }));
const outcomeCells = (m: ReportModel, o: Record<Outcome, number>): Cell[] => tableOutcomes(m).map((x) => (o[x] ? int(o[x]) : raw('<span class="zero">0</span>')));

function meter(value: number, limit: number | undefined): Cell {
  if (!limit) return raw('<span class="zero">no limit known</span>');
  const p = Math.min(100, (value / limit) * 100);
  return raw(`<div class="use"><div class="meter"><i class="${p >= 90 ? 'hot' : ''}" style="width:${p.toFixed(1)}%"></i></div>${esc(pct(value, limit))}</div>`);
}

/** The rate a key ended at and where it came from, with the lowest cut if a 429 cut it. */
function pacedAt(k: KeyReport): Cell {
  const last = k.rates.at(-1);
  if (!last || last.rpm === null) return raw('<span class="zero">not paced</span>');
  const cuts = k.rates.filter((r) => r.source === 'adaptive' && r.rpm !== null).map((r) => r.rpm!);
  const low = cuts.length > 0 ? ` · cut to ${Math.min(...cuts)}` : '';
  return `${last.rpm} rpm ${last.source}${low}`;
}

/** What took a key out of the run, if anything did: revoked, or set aside after nothing but 429s. */
function keyFate(k: KeyReport): string {
  if (k.revokedAt !== undefined) return ' (revoked)';
  if (k.setAside !== undefined) return ` (set aside after ${duration(k.setAside.rateLimitedMs)} of nothing but 429s, ${int(k.setAside.responses)} response${k.setAside.responses === 1 ? '' : 's'})`;
  return '';
}

function keySection(m: ReportModel): string {
  if (m.keys.length === 0) return '';
  const span = Math.max(1, m.makespanMs);
  const rows = m.keys.map((k) => {
    const backoffMs = k.backoff.reduce((a, s) => a + s.end - s.start, 0);
    const saturatedMs = k.saturated.reduce((a, s) => a + s.end - s.start, 0);
    const shortSpan = Math.min(60_000, span);
    return [
      k.keyId + keyFate(k),
      int(k.calls.length), int(k.outcomes.ok), ...outcomeCells(m, k.outcomes),
      k.backoffs || backoffMs ? `${int(k.backoffs)} · ${duration(backoffMs)}` : raw('<span class="zero">0</span>'),
      pct(saturatedMs, span), pct(k.busyMs, span),
      `${k.tracks}${k.limits.concurrency ? ` / ${k.limits.concurrency}` : ''}`,
      pacedAt(k),
      `${int(k.peak60)}${k.limits.rpm ? ` / ${int(k.limits.rpm)}` : ''}`,
      meter(k.peak60, k.limits.rpm),
      span >= 60_000 ? (k.calls.length / (span / 60_000)).toFixed(1) : raw(`<span class="zero" title="the run was shorter than a minute: ${int(k.calls.length)} in ${esc(duration(shortSpan))}">—</span>`),
    ] as Cell[];
  });
  return `<section><h2>Keys</h2>${table(
    [
      { label: 'key', id: true }, { label: 'requests', num: true }, { label: 'ok', num: true }, ...outcomeColumns(m),
      { label: 'backoffs · time', num: true }, { label: 'saturated', num: true, title: 'share of the run the key was at a limit' },
      { label: 'busy', num: true, title: 'share of the run with at least one call in flight' },
      { label: 'in flight max / limit', num: true },
      { label: 'paced at', title: 'the request rate the key paced at when the run ended (stated, learned from the headers, or adaptive after a 429), and the lowest it was cut to' },
      { label: 'peak 60 s / rpm', num: true, title: 'most requests started in any 60 s window, against the rpm limit' },
      { label: 'rpm use' }, { label: 'avg / min', num: true },
    ],
    rows,
  )}<p class="note">A key paces as a token bucket: evenly at 97% of its rate, with a burst of about one second's worth. The busiest 60 s window is measured against the rpm limit; the average per minute is shown for runs longer than a minute.</p></section>`;
}

function routeSection(m: ReportModel): string {
  if (m.routes.length === 0) return '';
  const rows = m.routes.map((r) => {
    const openMs = r.open.reduce((a, s) => a + s.end - s.start, 0);
    const shown = r.transitions.slice(0, 60);
    const list = shown.length === 0
      ? raw('<span class="zero">closed throughout</span>')
      : raw(`<ul class="tr">${shown.map((t) => `<li>${at(t.at)} → <b>${t.to === 'halfOpen' ? 'half-open' : t.to}</b>${t.to === 'open' ? ` after ${esc(t.failures)} failures, cool-down ${duration(t.cooldownMs ?? 0)}` : ''}</li>`).join('')}${
        r.transitions.length > shown.length ? `<li>and ${r.transitions.length - shown.length} more</li>` : ''
      }</ul>`);
    return [r.route, r.models.join(', '), int(r.requests), int(r.outcomes.ok), ...outcomeCells(m, r.outcomes), int(r.transitions.filter((t) => t.to === 'open').length), duration(openMs), list] as Cell[];
  });
  return `<section><h2>Routes and breakers</h2>${table(
    [{ label: 'route', id: true }, { label: 'models' }, { label: 'requests', num: true }, { label: 'ok', num: true }, ...outcomeColumns(m), { label: 'opened', num: true }, { label: 'time open', num: true }, { label: 'breaker transitions' }],
    rows,
  )}</section>`;
}

function toolSection(m: ReportModel): string {
  if (m.tools.length === 0) return '';
  const sum = (f: (t: (typeof m.tools)[number]) => number) => m.tools.reduce((a, t) => a + f(t), 0);
  const cells = (t: { called: number; shared: number; cached: number; executions: number; batchedCalls: number; errors: number; timeouts: number; durationMs: number; denied: number }): Cell[] => [
    int(t.called), int(t.shared), int(t.cached), int(t.executions), int(t.batchedCalls), int(t.errors), int(t.timeouts),
    t.executions ? duration(t.durationMs / t.executions) : '—', int(t.denied),
    `${int(Math.max(0, t.called - t.executions))} (${pct(Math.max(0, t.called - t.executions), t.called)})`,
  ];
  const total = {
    called: sum((t) => t.called), shared: sum((t) => t.shared), cached: sum((t) => t.cached), executions: sum((t) => t.executions), batchedCalls: sum((t) => t.batchedCalls),
    errors: sum((t) => t.errors), timeouts: sum((t) => t.timeouts), durationMs: sum((t) => t.durationMs), denied: sum((t) => t.denied),
  };
  return `<section><h2>Tool bus</h2>${table(
    [
      { label: 'tool', id: true }, { label: 'requested', num: true, title: 'tool:called' }, { label: 'joined in flight', num: true, title: 'shared an identical call already running' },
      { label: 'from cache', num: true }, { label: 'executions', num: true, title: 'tool:result: one per execution (a batch is one)' }, { label: 'calls in batches', num: true },
      { label: 'errors', num: true }, { label: 'timed out', num: true }, { label: 'mean time', num: true }, { label: 'denied', num: true }, { label: 'executions saved', num: true },
    ],
    m.tools.map((t) => [t.name, ...cells(t)]),
    m.tools.length > 1 ? ['total', ...cells(total)] : undefined,
  )}</section>`;
}

function stageSection(m: ReportModel): string {
  if (m.stages.length === 0) return '';
  const domain = Math.max(1, m.makespanMs);
  const pill = (s: ShownStatus, n: number) => (n ? `<span class="pill ${s}" title="${s}">${int(n)}</span>` : '<span class="zero">0</span>');
  const shown = stageStatuses(m);
  const rows = m.stages.map((s) => {
    const bar =
      s.firstStart === undefined
        ? raw('<span class="zero">never started</span>')
        : raw(`<div class="span" title="${esc(at(s.firstStart))} to ${esc(at(s.lastEnd ?? domain))}"><i style="left:${((s.firstStart / domain) * 100).toFixed(2)}%;width:${((((s.lastEnd ?? domain) - s.firstStart) / domain) * 100).toFixed(2)}%"></i></div>`);
    return [s.stage, int(s.tasks), ...shown.map((st) => raw(pill(st, s.byStatus[st]))), int(s.attempts), int(s.retries), int(s.spend.requests), usd(s.spend.costUsd), bar] as Cell[];
  });
  const unseen = m.taskCount - m.tasks.filter((t) => !t.container).length;
  return `<section><h2>DAG by stage</h2>${table(
    [{ label: 'stage', id: true }, { label: 'tasks', num: true }, ...shown.map((s) => ({ label: s, num: true })), { label: 'attempts', num: true }, { label: 'retries', num: true }, { label: 'requests', num: true }, { label: 'cost', num: true }, { label: 'first start → last end' }],
    rows,
  )}${unseen > 0 ? `<p class="note">${int(unseen)} tasks never appear in the stream by name (counted ${m.live ? 'waiting' : 'unfinished'} above).</p>` : ''}${
    m.counts.containers > 0 ? `<p class="note">Maps and reduces that expanded are containers, not tasks: their items and groups are counted in their own stages.</p>` : ''
  }</section>`;
}

/** The stage table's status columns: the final ones, and how the others read (live or cut short). */
function stageStatuses(m: ReportModel): ShownStatus[] {
  return SHOWN_STATUSES.filter((s) => (s === 'running' || s === 'waiting' ? m.live : s === 'unfinished' ? !m.live : true));
}

function failureSection(m: ReportModel): string {
  const failed = m.tasks.filter((t) => t.status === 'failed');
  const skipped = m.tasks.filter((t) => t.status === 'skipped');
  const parts: string[] = [];
  if (m.errorCodes.length > 0) {
    parts.push(`<h3>Model call errors by code</h3><div class="narrow">${table([{ label: 'code' }, { label: 'calls', num: true }], m.errorCodes.map(([code, n]) => [code, int(n)]))}</div>`);
  }
  const more = (n: number) => (n > MAX_ROWS ? `<p class="note">and ${int(n - MAX_ROWS)} more</p>` : '');
  if (failed.length > 0) {
    parts.push(
      `<h3>Failed tasks</h3>${table(
        [{ label: 'task', id: true }, { label: 'attempts', num: true }, { label: 'code' }, { label: 'message', msg: true }],
        failed.slice(0, MAX_ROWS).map((t) => [t.id, int(t.attempts), t.error?.code ?? '', t.error?.message ?? '']),
      )}${more(failed.length)}`,
    );
  }
  if (skipped.length > 0) {
    parts.push(`<h3>Skipped tasks</h3>${table([{ label: 'task', id: true }, { label: 'reason', msg: true }], skipped.slice(0, MAX_ROWS).map((t) => [t.id, t.skippedReason ?? t.error?.message ?? '']))}${more(skipped.length)}`);
  }
  return parts.length === 0 ? '' : `<section><h2>Failures</h2>${parts.join('\n')}</section>`;
}
