/**
 * The timeline: one lane per key (grouped by provider), one `<rect data-call>` per model call,
 * key backoff / saturation / revocation spans behind the bars, one lane per function of the
 * function steps (they hold no key; steps.ts), and one lane per route whose breaker ever opened. Plain SVG, one short element per bar, so thousands of calls stay small;
 * the details of each call live in the JSON data block that the hover script reads.
 */
import { OUTCOME_STYLE } from './assets.js';
import { OUTCOMES, type Call, type ReportModel, type Span } from './types.js';
import { at as secs, esc } from './format.js';

export const PLOT_W = 1040;
const LABEL_W = 200;
const AXIS_H = 24;
const GROUP_H = 20;
const ROUTE_H = 22;
/** Tick spacing steps (ms) and the least pixels between two ticks. */
export const TICK_STEPS = [100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5];
const TICK_PX = 90;

/** The row of one call in the data block, by position: see the script in assets.ts. */
export type CallRow = [
  start: number, end: number, task: number, attempt: number, turn: number, route: number, model: number, key: number,
  outcome: number, input: number, output: number, cacheWrite: number, cacheRead: number, cost: number | null,
  code: number, message: number,
];

export interface Timeline {
  svg: string;
  /** JSON for the script: it must be put in the page with `jsonForScript`. */
  data: unknown;
}

/** Builds the timeline of a run, or an empty note when it made no calls. */
export function renderTimeline(model: ReportModel): Timeline {
  const domain = Math.max(1, model.makespanMs, ...model.calls.map((c) => c.end), ...model.functionLanes.flatMap((l) => l.steps.map((s) => s.end)));
  const x = (ms: number) => round1((ms / domain) * PLOT_W);
  const w = (span: Span, min: number) => round1(Math.max(min, ((span.end - span.start) / domain) * PLOT_W));

  const strings = new Map<string, number>();
  const str = (s: string | undefined) => {
    if (s === undefined) return -1;
    let i = strings.get(s);
    if (i === undefined) strings.set(s, (i = strings.size));
    return i;
  };
  const indexOf = new Map<Call, number>(model.calls.map((c, i) => [c, i]));
  const rows: CallRow[] = model.calls.map((c) => [
    Math.round(c.start), Math.round(c.end), str(c.taskId), c.attempt, c.turn, str(c.route), str(c.modelName), str(c.keyId),
    OUTCOMES.indexOf(c.outcome), c.usage?.inputTokens ?? 0, c.usage?.outputTokens ?? 0, c.usage?.cacheWriteTokens ?? 0,
    c.usage?.cacheReadTokens ?? 0, c.costUsd,
    str(c.error ? c.error.code + (c.error.status !== undefined ? ` (${c.error.status})` : '') : c.open ? 'no reply in the stream' : undefined),
    str(c.error ? truncate(c.error.message, 300) : undefined),
  ]);

  const labels: string[] = [];
  const back: string[] = [];
  const front: string[] = [];
  let y = AXIS_H;
  const group = (title: string) => {
    labels.push(`<rect class="grp-bg" x="0" y="${y}" width="${LABEL_W}" height="${GROUP_H}"/><text class="grp" x="10" y="${y + 14}">${esc(title)}</text>`);
    back.push(`<rect class="grp-bg" x="0" y="${y}" width="${PLOT_W}" height="${GROUP_H}"/>`);
    y += GROUP_H;
  };

  let provider: string | undefined;
  let lane = 0;
  for (const key of model.keys) {
    if (key.provider !== provider) {
      provider = key.provider;
      group(`provider ${provider}`);
    }
    const barH = key.tracks <= 6 ? 10 : key.tracks <= 16 ? 6 : key.tracks <= 40 ? 3 : 2;
    const gap = key.tracks <= 16 ? 2 : 1;
    const h = Math.max(30, 8 + key.tracks * (barH + gap) - gap + 6);
    const cls = `lane${lane++ % 2}`;
    labels.push(
      `<rect class="${cls}" x="0" y="${y}" width="${LABEL_W}" height="${h}"/>` +
        `<text x="10" y="${y + 14}">${esc(key.keyId)}</text>` +
        `<text class="meta" x="10" y="${y + 26}">${key.calls.length} calls${key.limits.rpm ? ` · ${esc(key.limits.rpm)} rpm` : ''}${key.limits.concurrency ? ` · ${esc(key.limits.concurrency)} at once` : ''}</text>`,
    );
    back.push(`<rect class="${cls}" x="0" y="${y}" width="${PLOT_W}" height="${h}"/>`);
    for (const s of key.saturated) back.push(`<rect class="sat" x="${x(s.start)}" y="${y + h - 3}" width="${w(s, 0.5)}" height="3" data-tip="saturated ${secs(s.start)} to ${secs(s.end)}"/>`);
    for (const s of key.backoff) back.push(`<rect class="backoff" x="${x(s.start)}" y="${y}" width="${w(s, 1)}" height="${h}" data-tip="backoff ${secs(s.start)} to ${secs(s.end)} (${Math.round(s.end - s.start)} ms)"/>`);
    if (key.revokedAt !== undefined) {
      const s = { start: key.revokedAt, end: domain };
      back.push(`<rect class="revoked" x="${x(s.start)}" y="${y}" width="${w(s, 1)}" height="${h}" data-tip="revoked at ${secs(s.start)}"/>`);
    }
    for (const c of key.calls) {
      front.push(`<rect data-call="${indexOf.get(c)}" class="o-${c.outcome}" x="${x(c.start)}" y="${y + 8 + c.track * (barH + gap)}" width="${w(c, 2)}" height="${barH}"/>`);
    }
    y += h;
  }

  if (model.functionLanes.length > 0) group('function steps');
  for (const fnLane of model.functionLanes) {
    const barH = fnLane.tracks <= 6 ? 10 : fnLane.tracks <= 16 ? 6 : 3;
    const gap = fnLane.tracks <= 16 ? 2 : 1;
    const h = Math.max(30, 8 + fnLane.tracks * (barH + gap) - gap + 6);
    const cls = `lane${lane++ % 2}`;
    labels.push(
      `<rect class="${cls}" x="0" y="${y}" width="${LABEL_W}" height="${h}"/>` +
        `<text x="10" y="${y + 14}">${esc(fnLane.route)}</text><text class="meta" x="10" y="${y + 26}">${fnLane.steps.length} step${fnLane.steps.length === 1 ? '' : 's'}</text>`,
    );
    back.push(`<rect class="${cls}" x="0" y="${y}" width="${PLOT_W}" height="${h}"/>`);
    for (const st of fnLane.steps) {
      const what = st.open ? 'running' : st.outcome === 'ok' ? 'completed' : (st.error ?? 'ended');
      const tip = `${st.taskId} · attempt ${st.attempt} · ${fnLane.route} · ${secs(st.start)} to ${secs(st.end)} (${Math.round(st.end - st.start)} ms) · ${truncate(what, 200)}`;
      front.push(`<rect class="o-${st.outcome} fn-step" x="${x(st.start)}" y="${y + 8 + st.track * (barH + gap)}" width="${w(st, 2)}" height="${barH}" data-tip="${esc(tip)}"/>`);
    }
    y += h;
  }

  const routes = model.routes.filter((r) => r.transitions.length > 0);
  if (routes.length > 0) group('route breakers');
  for (const route of routes) {
    const cls = `lane${lane++ % 2}`;
    labels.push(`<rect class="${cls}" x="0" y="${y}" width="${LABEL_W}" height="${ROUTE_H}"/><text x="10" y="${y + 15}">${esc(route.route)}</text>`);
    back.push(`<rect class="${cls}" x="0" y="${y}" width="${PLOT_W}" height="${ROUTE_H}"/>`);
    for (const s of route.open) back.push(`<rect class="br-open" x="${x(s.start)}" y="${y + 4}" width="${w(s, 1)}" height="${ROUTE_H - 8}" data-tip="${esc(route.route)} open ${secs(s.start)} to ${secs(s.end)}"/>`);
    for (const s of route.halfOpen) back.push(`<rect class="br-half" x="${x(s.start)}" y="${y + 4}" width="${w(s, 1)}" height="${ROUTE_H - 8}" data-tip="${esc(route.route)} half-open ${secs(s.start)} to ${secs(s.end)}"/>`);
    y += ROUTE_H;
  }
  const height = y + 4;

  const per = TICK_STEPS.find((s) => s >= (TICK_PX * domain) / PLOT_W) ?? TICK_STEPS[TICK_STEPS.length - 1]!;
  const axis: string[] = [];
  for (let ms = 0; ms <= domain + 1e-9; ms += per) {
    const px = x(ms);
    axis.push(`<line class="grid" x1="${px}" x2="${px}" y1="22" y2="${height}"/>`);
    axis.push(`<text class="tick" x="${Math.min(PLOT_W - 2, px + 3)}" y="15"${px > PLOT_W - 40 ? ' text-anchor="end"' : ''}>${per < 1000 ? (ms / 1000).toFixed(1) : Math.round(ms / 1000)} s</text>`);
  }

  // Calls in flight exist only while the run goes.
  const legend = OUTCOMES.filter((o) => o !== 'inflight' || model.live).map((o) => {
    const n = model.calls.filter((c) => c.outcome === o).length;
    return `<span><i class="sw" style="background:${OUTCOME_STYLE[o].color}"></i>${OUTCOME_STYLE[o].label} <b>${n}</b></span>`;
  }).join('') +
    `<span><svg width="14" height="10"><rect width="14" height="10" class="backoff"/></svg>key backoff</span>` +
    `<span><i class="sw" style="background:#b8c0cb;height:3px"></i>key saturated</span>` +
    `<span><svg width="14" height="10"><rect width="14" height="10" class="revoked"/></svg>key revoked</span>` +
    `<span><i class="sw" style="background:#d64541;opacity:.75"></i>breaker open</span>` +
    `<span><i class="sw" style="background:#e3a21a;opacity:.75"></i>half-open</span>`;

  const defs =
    '<defs><pattern id="hatch-backoff" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fdf1d6"/><rect width="2.5" height="6" fill="#f0c35a"/></pattern>' +
    '<pattern id="hatch-revoked" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e4e6ea"/><rect width="2.5" height="6" fill="#5f6b7a"/></pattern></defs>';
  const svg =
    `<div class="tools"><button id="zoom-out" type="button" title="zoom out">&minus;</button><button id="zoom-in" type="button" title="zoom in">+</button>` +
    `<button id="zoom-fit" type="button">fit</button><span id="zoom-level">1x</span><span>· hover a bar for its task, model, tokens and cost</span></div>` +
    `<div class="tl-wrap"><svg class="tl-labels" width="${LABEL_W}" height="${height}" role="img" aria-label="lanes">${labels.join('')}</svg>` +
    `<div class="tl-plot"><svg id="tl" width="${PLOT_W}" height="${height}" role="img" aria-label="model calls over time">${defs}` +
    `<g class="zoom">${back.join('')}</g><g id="tl-axis">${axis.join('')}</g><g class="zoom">${front.join('')}</g></svg></div></div>` +
    `<div class="legend">${legend}</div>`;
  return {
    svg,
    data: { s: [...strings.keys()], c: rows, d: domain, w: PLOT_W, t: TICK_STEPS, p: TICK_PX, o: OUTCOMES.map((o) => OUTCOME_STYLE[o].label) },
  };
}

const round1 = (n: number) => Math.round(n * 10) / 10;
const truncate = (s: string, n: number) => (s.length > n ? s.slice(0, n - 1) + '\u2026' : s);
