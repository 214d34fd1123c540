/**
 * The statecharts of the machines of machines/, read from `machine.toJSON()` and drawn as SVG
 * with the report's layered layout: one box per state (nested states named by their path under
 * the machine), one arrow per transition, labelled with its event; events handled without a
 * change of state are listed. A state's badge is how many actors (for the task lifecycle: tasks)
 * are in it now, from the stream (approximate for agents: events name no states).
 */
// Each from its module (not machines/index.js, which would load the rest of machines/ with the report).
import { agentMachine } from '../../machines/agent/index.js';
import { breakerMachine } from '../../machines/breaker.machine.js';
import { keyMachine } from '../../machines/key.machine.js';
import { poolMachine } from '../../machines/pool.machine.js';
import { supervisorMachine } from '../../machines/supervisor/machine.js';
import { groupMachine } from '../../machines/supervisor/group.machine.js';
import { taskLifecycleMachine } from '../../machines/tasks/task.machine.js';
import { toolBusMachine } from '../../machines/toolBus.machine.js';
import { ledgerMachine } from '../../machines/ledger.machine.js';
import { esc, int } from './format.js';
import { edgePath, layered } from './layout.js';

export interface ChartState {
  /** The state's id in the machine (`agent.active.running`). */
  id: string;
  /** Its path below the machine (`active.running`). */
  path: string;
  type: string;
  depth: number;
}
export interface Chart {
  id: string;
  states: ChartState[];
  transitions: { from: string; to: string; event: string }[];
  /** Transitions of the machine itself, taken from whatever state it is in (`CANCEL` -> `cancelled`). */
  fromAny: { to: string; event: string }[];
  /**
   * Events handled by actions alone, the state kept (`from` '': by the machine itself, in any
   * state): most of what a group or a ledger does.
   */
  stays: { from: string; event: string }[];
}

/**
 * Every machine of machines/, supervisor first (it spawns the others): what the report draws and
 * `swarmstate machines` lists. `task` is drawn, not run: the lifecycle the run table checks each
 * status change against (machines/tasks/lifecycle.ts).
 */
export const MACHINES = [supervisorMachine, groupMachine, agentMachine, poolMachine, keyMachine, breakerMachine, toolBusMachine, ledgerMachine, taskLifecycleMachine];

interface JsonState {
  id: string;
  key: string;
  type?: string;
  initial?: { target?: unknown[] };
  states?: Record<string, JsonState>;
  transitions?: { eventType?: string; target?: unknown[] }[];
}

const targetId = (t: unknown): string | undefined =>
  typeof t === 'string' ? t.replace(/^#/, '') : t && typeof t === 'object' && 'id' in t ? String((t as { id: unknown }).id) : undefined;

/** Internal event names (`xstate.done.actor.callModel`) shortened to what they say. */
function eventLabel(type: string | undefined): string {
  if (!type) return 'always';
  const after = /^xstate\.after\.([^.]+)\./.exec(type);
  if (after) return `after ${after[1]}`;
  return type.replace(/^xstate\.done\.actor\./, 'done: ').replace(/^xstate\.error\.actor\./, 'error: ');
}

interface LiveNode {
  id: string;
  always?: { eventType?: string; target?: unknown[] }[];
  states?: Record<string, LiveNode>;
}

/**
 * `toJSON()` leaves out eventless (`always`) transitions; the machine's own state nodes have
 * them, so they are read from there and drawn labelled `always`.
 */
function alwaysOf(root: LiveNode | undefined): Map<string, { eventType?: string; target?: unknown[] }[]> {
  const out = new Map<string, { eventType?: string; target?: unknown[] }[]>();
  const walk = (n: LiveNode) => {
    if (n.always?.length) out.set(n.id, n.always);
    for (const c of Object.values(n.states ?? {})) walk(c);
  };
  if (root) walk(root);
  return out;
}

export function chartOf(machine: { toJSON(): unknown; root?: unknown }): Chart {
  const root = machine.toJSON() as JsonState;
  const always = alwaysOf(machine.root as LiveNode | undefined);
  const chart: Chart = { id: root.id, states: [], transitions: [], fromAny: [], stays: [] };
  const seen = new Set<string>();
  const walk = (s: JsonState, depth: number) => {
    if (depth > 0) chart.states.push({ id: s.id, path: s.id.slice(root.id.length + 1), type: s.type ?? 'atomic', depth });
    const from = depth === 0 ? '' : s.id;
    for (const t of [...(s.transitions ?? []), ...(always.get(s.id) ?? [])]) {
      if ((t.target ?? []).length === 0 && t.eventType) {
        const event = eventLabel(t.eventType);
        if (!chart.stays.some((x) => x.from === from && x.event === event)) chart.stays.push({ from, event });
        continue;
      }
      for (const target of t.target ?? []) {
        const to = targetId(target);
        const event = eventLabel(t.eventType);
        const key = `${from}\u0000${to}\u0000${event}`;
        if (to === undefined || seen.has(key)) continue;
        seen.add(key);
        if (from === '') {
          chart.fromAny.push({ to, event });
          continue;
        }
        chart.transitions.push({ from, to, event });
      }
    }
    for (const child of Object.values(s.states ?? {})) walk(child, depth + 1);
    // A compound state enters its initial child: drawn as an unlabelled arrow.
    const initial = targetId(s.initial?.target?.[0]);
    if (depth > 0 && initial !== undefined) chart.transitions.push({ from: s.id, to: initial, event: '' });
  };
  walk(root, 0);
  return chart;
}

let charts: Chart[] | undefined;
/** Every machine's chart, computed once: the definitions never change while a process runs. */
export function machineCharts(): Chart[] {
  charts ??= MACHINES.map(chartOf);
  return charts;
}

/**
 * A character of a state's name, as the page draws it: 12 px monospace, 0.6 em a character (the
 * count's bold digits too). Measured too small, long names ran out of their boxes.
 */
const CHAR_W = 7.2;
/** Room left of the name, right of the count, and between the two. */
const PAD_LEFT = 10;
const PAD_RIGHT = 10;
const GAP = 8;

/** An arrowhead for the ends of a drawing's edges (each SVG its own id: a page holds several). */
export const arrowhead = (id: string) =>
  `<defs><marker id="${id}" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L8 4L0 8z" fill="#8a94a1"/></marker></defs>`;

/** One chart as SVG; `counts` maps state ids to actors in them now. */
export function renderChart(chart: Chart, counts: Record<string, number> = {}): string {
  // Wide enough for the name and, when there is one, the count drawn at its right.
  const countWidth = (id: string) => (counts[id] ? GAP + int(counts[id]).length * CHAR_W : 0);
  const nodes = chart.states.map((s) => ({ id: s.id, width: Math.ceil(Math.max(70, PAD_LEFT + s.path.length * CHAR_W + countWidth(s.id) + PAD_RIGHT)), height: 26 }));
  const layout = layered(nodes, chart.transitions.map((t) => [t.from, t.to] as const));
  const byId = new Map(chart.states.map((s) => [s.id, s]));
  const marker = `arrow-${chart.id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const parts: string[] = [arrowhead(marker)];
  for (const t of chart.transitions) {
    const a = layout.nodes.get(t.from);
    const b = layout.nodes.get(t.to);
    if (!a || !b) continue;
    if (a === b) continue; // self-transitions keep the state: listed in its title instead
    const d = edgePath(a, b);
    parts.push(`<path class="ch-edge${t.event === '' ? ' init' : ''}" d="${d}" marker-end="url(#${marker})"><title>${esc(t.event || 'initial state')}</title></path>`);
  }
  for (const p of layout.nodes.values()) {
    const s = byId.get(p.id)!;
    const n = counts[s.id] ?? 0;
    const selfEvents = [...chart.transitions.filter((t) => t.from === s.id && t.to === s.id), ...chart.stays.filter((t) => t.from === s.id)].map((t) => t.event);
    const events = [...new Set(chart.transitions.filter((t) => t.from === s.id && t.to !== s.id && t.event).map((t) => `${t.event} → ${t.to.slice(chart.id.length + 1)}`))];
    const title = [`${s.path} (${s.type})`, ...events, ...(selfEvents.length ? [`stays on: ${[...new Set(selfEvents)].join(', ')}`] : [])].join('\n');
    parts.push(
      `<g class="ch-state ${esc(s.type)}${n ? ' occupied' : ''}" data-state="${esc(s.id)}"><title>${esc(title)}</title>` +
        `<rect x="${p.x}" y="${p.y}" width="${p.width}" height="${p.height}" rx="${s.type === 'final' ? 13 : 6}"/>` +
        `<text x="${p.x + PAD_LEFT}" y="${p.y + 17}">${esc(s.path)}</text>` +
        (n ? `<text class="count" x="${p.x + p.width - PAD_RIGHT}" y="${p.y + 17}" text-anchor="end">${esc(int(n))}</text>` : '') +
        `</g>`,
    );
  }
  const any = chart.fromAny.map((t) => `${t.event} → ${t.to === chart.id ? '(itself)' : t.to.slice(chart.id.length + 1)}`);
  const kept = chart.stays.filter((t) => t.from === '').map((t) => t.event);
  return `<svg class="chart" data-machine="${esc(chart.id)}" width="${layout.width}" height="${layout.height + 20}" role="img" aria-label="${esc(chart.id)} statechart">${parts.join('')}</svg>${
    any.length > 0 ? `<p class="note">From any state: ${esc([...new Set(any)].join(', '))}</p>` : ''
  }${kept.length > 0 ? `<p class="note">In any state, handled without a change of state: ${esc(kept.join(', '))}</p>` : ''}`;
}
