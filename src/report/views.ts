/**
 * The drawn views of the report (static and live): the task DAG with each task's state, spend
 * over time against the budget, the task list with outputs, and the machines' statecharts.
 */
import { arrowhead, machineCharts, renderChart } from './charts.js';
import { at, duration, esc, int, usd } from './format.js';
import { edgePath, layered } from './layout.js';
import type { ReportModel } from './types.js';

/** Tasks drawn at most in the DAG: beyond that the picture helps no one; the list has them all. */
export const MAX_DAG_NODES = 400;
const CHAR_W = 6.6;

/** Task rows listed at most: a row is small, but a run of 10,000 tasks re-rendered live is not. */
export const MAX_TASK_ROWS = 1000;

/**
 * The element id of a task's row: its position in the model (tasks only ever append as events
 * arrive, so it is stable across live re-renders), not the id, which may hold any character.
 */
const anchors = new WeakMap<ReportModel, Map<string, string>>();
function taskAnchor(m: ReportModel, id: string): string {
  let map = anchors.get(m);
  if (!map) anchors.set(m, (map = new Map(m.tasks.map((t, i) => [t.id, `task-${i}`]))));
  return map.get(id) ?? '';
}

/** A task's state for colouring: its final status, `running`, or `pending` while it waits. */
function stateOf(t: ReportModel['tasks'][number]): string {
  if (t.status === 'waiting') return 'pending';
  return t.status === 'unfinished' ? (t.firstStart !== undefined ? 'running' : 'pending') : t.status;
}

export function dagSection(m: ReportModel): string {
  if (m.tasks.length === 0) return '';
  const tasks = m.tasks.slice(0, MAX_DAG_NODES);
  const nodes = tasks.map((t) => ({ id: t.id, width: Math.min(220, Math.max(60, t.id.length * CHAR_W + 20)), height: 24 }));
  const layout = layered(nodes, m.edges);
  const edges = m.edges
    .map(([a, b]) => [layout.nodes.get(a), layout.nodes.get(b)] as const)
    .filter(([a, b]) => a && b)
    .map(([a, b]) => `<path class="dag-edge" d="${edgePath(a!, b!)}" marker-end="url(#arrow-dag)"/>`);
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const boxes = [...layout.nodes.values()].map((p) => {
    const t = byId.get(p.id)!;
    const st = stateOf(t);
    const label = t.id.length * CHAR_W + 20 > p.width ? t.id.slice(0, Math.floor((p.width - 20) / CHAR_W) - 1) + '\u2026' : t.id;
    return `<g class="dag-node s-${st}" tabindex="0" data-task="${esc(t.id)}" data-anchor="${taskAnchor(m, t.id)}"><title>${esc(`${t.id}: ${st}${t.attempts > 1 ? `, ${t.attempts} attempts` : ''}`)}</title><rect x="${p.x}" y="${p.y}" width="${p.width}" height="${p.height}" rx="5"/><text x="${p.x + 8}" y="${p.y + 16}">${esc(label)}</text></g>`;
  });
  const states = ['pending', 'running', 'completed', 'failed', 'skipped', 'cancelled'];
  const legend = states.map((s) => `<span><i class="sw s-${s}"></i>${s}</span>`).join('');
  return `<section id="dag"><h2>DAG</h2>
<div class="legend">${legend}<span>· click a task for its output</span></div>
<div class="scroll dag-wrap"><svg id="dag-svg" width="${layout.width}" height="${layout.height}" role="img" aria-label="task DAG">${arrowhead('arrow-dag')}${edges.join('')}${boxes.join('')}</svg></div>
${m.tasks.length > tasks.length ? `<p class="note">The first ${int(tasks.length)} of ${int(m.tasks.length)} tasks are drawn; the task list has them all.</p>` : ''}</section>`;
}

const CW = 900;
const CH = 200;
/** Room for the dollar axis label. */
const LEFT = 76;

export function costSection(m: ReportModel): string {
  const last = m.costSeries.at(-1)?.usd ?? 0;
  const budget = m.budgetUsd;
  const budgetText = budget === undefined ? 'no budget set' : `budget ${usd(budget)} · ${((last / budget) * 100).toFixed(budget > 0 && last / budget < 0.1 ? 1 : 0)}% spent`;
  const head = `<section id="cost-over-time"><h2>Cost over time</h2><p class="sub"><b class="spent">${esc(usd(last))}</b> spent · <span class="budget">${esc(budgetText)}</span></p>`;
  if (m.costSeries.length === 0) return `${head}<p class="note">No priced reply yet.</p></section>`;
  const maxT = Math.max(1, m.makespanMs, m.costSeries.at(-1)!.at);
  const maxY = Math.max(last, budget ?? 0) * 1.08 || 1;
  const x = (t: number) => LEFT + (t / maxT) * (CW - LEFT - 10);
  const y = (v: number) => CH - 24 - (v / maxY) * (CH - 40);
  let d = `M${x(0).toFixed(1)} ${y(0).toFixed(1)}`;
  for (const p of m.costSeries) d += `H${x(p.at).toFixed(1)}V${y(p.usd).toFixed(1)}`;
  d += `H${x(maxT).toFixed(1)}`;
  const budgetLine = budget === undefined ? '' : `<line class="budget-line" x1="${LEFT}" x2="${CW - 10}" y1="${y(budget)}" y2="${y(budget)}"/><text class="tick" x="${CW - 12}" y="${y(budget) - 4}" text-anchor="end">budget ${esc(usd(budget))}</text>`;
  const axis = `<line class="grid" x1="${LEFT}" x2="${CW - 10}" y1="${CH - 24}" y2="${CH - 24}"/><text class="tick" x="${LEFT}" y="${CH - 8}">0 s</text><text class="tick" x="${CW - 10}" y="${CH - 8}" text-anchor="end">${esc(at(maxT))}</text><text class="tick" x="${LEFT - 4}" y="${y(maxY / 1.08) + 4}" text-anchor="end">${esc(usd(maxY / 1.08))}</text>`;
  return `${head}<svg id="cost-svg" width="${CW}" height="${CH}" role="img" aria-label="cost over time">${axis}${budgetLine}<path class="cost-line" d="${d}"/></svg>
<p class="note">Cumulative cost of the priced replies, at the time each reply arrived.</p></section>`;
}

export function taskList(m: ReportModel): string {
  if (m.tasks.length === 0) return '';
  const rows = m.tasks.slice(0, MAX_TASK_ROWS).map((t) => {
    const st = stateOf(t);
    const out = m.outputs[t.id];
    const body = out
      ? `<pre class="output">${esc(out.text)}</pre>${out.truncated ? '<p class="note">(output cut here in the page; `swarmstate show` has it all)</p>' : ''}`
      : t.error
        ? `<p class="err">${esc(t.error.code)}: ${esc(t.error.message)}</p>`
        : t.skippedReason
          ? `<p class="note">skipped: ${esc(t.skippedReason)}</p>`
          : '';
    // A container runs no attempt: its items or groups are the tasks.
    const tries = t.container ? 'container' : `${int(t.attempts)} attempt${t.attempts === 1 ? '' : 's'}, ${int(t.requests)} request${t.requests === 1 ? '' : 's'}`;
    const facts = [st, t.modelName ?? '', tries, usd(t.spend.costUsd), t.firstStart !== undefined && t.lastEnd !== undefined ? duration(t.lastEnd - t.firstStart) : ''].filter(Boolean);
    return `<details class="task" id="${taskAnchor(m, t.id)}"><summary><span class="pill s-${st}">${st}</span> <code>${esc(t.id)}</code> <span class="facts">${esc(facts.slice(1).join(' · '))}</span></summary>${body}</details>`;
  });
  const more = m.tasks.length - rows.length;
  return `<section id="tasks"><h2>Tasks <span class="count">${int(m.tasks.length)}</span></h2><p class="note">Click a task for its output.</p><div class="task-list">${rows.join('')}</div>${
    more > 0 ? `<p class="note">and ${int(more)} more: <code>swarmstate show &lt;runId&gt;</code> lists them all</p>` : ''
  }</section>`;
}

export function machinesSection(m: ReportModel): string {
  const charts = machineCharts()
    .map((c) => {
      const counts = m.machineStates[c.id] ?? {};
      const total = Object.values(counts).reduce((a, n) => a + n, 0);
      // The task lifecycle is a table's, not an actor's: its boxes count tasks.
      const what = c.id === 'task' ? 'tasks' : 'actors';
      return `<div class="machine"><h3>${esc(c.id)}${total ? ` <span class="count">${int(total)} ${what}</span>` : ''}</h3><div class="scroll">${renderChart(c, counts)}</div></div>`;
    })
    .join('');
  return `<section id="machines"><h2>Machines</h2><p class="note">Each machine's statechart, from <code>machine.toJSON()</code>: nested states by their path, arrows labelled by event (hover a state for its transitions and the events it handles in place). A number is how many actors are in that state, as the events tell it (approximate for agents); in <code>task</code>, the task lifecycle every status change is checked against, how many tasks.</p>${charts}</section>`;
}
