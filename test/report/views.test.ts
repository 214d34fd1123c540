/**
 * The report's drawn views, on the static page: the DAG (one node per task, one edge per
 * dependency, coloured by state), cost over time against the budget, the task list with outputs,
 * and every machine's statechart from `toJSON()`; plus the layout they share.
 */
import { describe, expect, it } from 'vitest';
import { analyze, buildReport } from '../../src/report/index.js';
import { chartOf, machineCharts, renderChart } from '../../src/report/charts.js';
import { layered } from '../../src/report/layout.js';
import { breakerMachine } from '../../machines/index.js';
import type { TimedRunEvent } from '../../src/swarm.js';

const usage = { inputTokens: 100, outputTokens: 20, cacheWriteTokens: 0, cacheReadTokens: 0 };
const ev = (at: number, e: Record<string, unknown>) => ({ ...e, at }) as unknown as TimedRunEvent;
const req = (at: number, taskId: string) => ev(at, { type: 'model:request', taskId, attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:k' });
const res = (at: number, taskId: string) => ev(at, { type: 'model:response', taskId, attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:k', usage });
const count = (s: string, sub: string) => s.split(sub).length - 1;

/** Three tasks, `draft` -> `review` and `solo`: `draft` done, `review` running, `solo` not started. */
const events: TimedRunEvent[] = [
  ev(0, { type: 'run:started', runId: 'r-views', tasks: 3, models: { m: { provider: 'p', model: 'm', price: { input: 1, output: 5 } } }, keys: { 'p:k': {} }, budgetUsd: 0.5, deps: { draft: [], review: ['draft'], solo: [] } }),
  ev(1, { type: 'task:started', taskId: 'draft', attempt: 1, model: 'm' }),
  req(2, 'draft'),
  res(50, 'draft'),
  ev(51, { type: 'task:completed', taskId: 'draft', attempt: 1, output: 'the <b>draft</b> text', usage }),
  ev(52, { type: 'task:started', taskId: 'review', attempt: 1, model: 'm' }),
  req(53, 'review'),
];

describe('the drawn views of the static report', () => {
  it('draws the DAG: one node per task in its state, one edge per dependency', () => {
    const page = buildReport({ events });
    expect(count(page, 'class="dag-node')).toBe(3);
    expect(page).toMatch(/<g class="dag-node s-completed" tabindex="0" data-task="draft"/);
    expect(page).toMatch(/<g class="dag-node s-running" tabindex="0" data-task="review"/);
    expect(page).toMatch(/<g class="dag-node s-pending" tabindex="0" data-task="solo"/);
    expect(count(page, 'class="dag-edge"')).toBe(1);
  });

  it('shows the tasks a resume found ended as they ended, not as pending', () => {
    const resumed = [
      ev(0, { type: 'run:started', runId: 'r', tasks: 2, resumed: true, alreadyCompleted: 1, deps: { draft: [], review: ['draft'] }, before: { draft: 'completed' } }),
      ev(1, { type: 'task:started', taskId: 'review', attempt: 1, model: 'm' }),
    ];
    const page = buildReport({ events: resumed });
    expect(page).toMatch(/<g class="dag-node s-completed" tabindex="0" data-task="draft"/);
    expect(page).toMatch(/<g class="dag-node s-running" tabindex="0" data-task="review"/);
    // Live (the page while it runs): running; a saved stream that stops there was cut short.
    expect(analyze(resumed).byStatus).toMatchObject({ completed: 1, running: 1 });
    expect(analyze(resumed, undefined, undefined, { ended: true }).byStatus).toMatchObject({ completed: 1, unfinished: 1 });
  });

  it('shows the budget and the spend over time against it', () => {
    const m = analyze(events);
    expect(m.budgetUsd).toBe(0.5);
    expect(m.costSeries).toEqual([{ at: 50, usd: 0.0002 }]);
    const page = buildReport({ events });
    expect(page).toContain('budget $0.5000');
    expect(page).toContain('class="budget-line"');
    expect(page).toContain('<div class="k">budget</div><div class="v">$0.5000</div>');
  });

  it('lists every task with its output, escaped', () => {
    const page = buildReport({ events });
    expect(count(page, '<details class="task"')).toBe(3);
    expect(page).toContain('<pre class="output">the &lt;b&gt;draft&lt;/b&gt; text</pre>');
  });

  it('draws every machine of machines/ as a statechart with its states, and counts actors in them', () => {
    const page = buildReport({ events });
    const charts = machineCharts();
    // What `swarmstate machines` lists: the supervisor's groups, the ledger and the task lifecycle too.
    expect(charts.map((c) => c.id).sort()).toEqual(['agent', 'breaker', 'group', 'key', 'ledger', 'pool', 'supervisor', 'task', 'toolBus']);
    expect(count(page, '<svg class="chart"')).toBe(charts.length);
    for (const c of charts) {
      const svg = page.slice(page.indexOf(`<svg class="chart" data-machine="${c.id}"`));
      const own = svg.slice(0, svg.indexOf('</svg>'));
      for (const s of c.states) expect(own, `${c.id}: ${s.path}`).toContain(`>${s.path}</text>`);
    }
    // `draft` done, `review` waiting for its reply: one agent in each state.
    expect(analyze(events).machineStates['agent']).toEqual({ 'agent.done': 1, 'agent.active.running': 1 });
    expect(page).toMatch(/data-state="agent\.active\.running"><title>[^<]*<\/title><rect[^>]*\/><text[^>]*>active\.running<\/text><text class="count"[^>]*>1</);
  });

  it('draws the supervisor\'s group and the task lifecycle: their states, their events, and where the tasks are', () => {
    const page = buildReport({ events });
    const own = (id: string) => {
      const at = page.indexOf(`<svg class="chart" data-machine="${id}"`);
      expect(at, id).toBeGreaterThan(0);
      const rest = page.slice(at);
      // The chart and the notes under it, up to the next machine.
      return rest.slice(0, rest.indexOf('<div class="machine">') < 0 ? undefined : rest.indexOf('<div class="machine">'));
    };
    const group = own('group');
    for (const s of ['idle', 'busy']) expect(group).toContain(`>${s}</text>`);
    expect(group).toContain('<title>SPAWN</title>');
    // What a group mostly does changes no state: said under its chart, and in its state's title.
    expect(group).toContain('In any state, handled without a change of state: CANCEL, GROUP.DEADLINE, done: *, error: *');
    expect(group).toMatch(/data-state="group\.busy"><title>busy \(atomic\)\nalways → idle\nstays on: SPAWN<\/title>/);
    const task = own('task');
    for (const s of ['pending', 'queued', 'running', 'completed', 'failed', 'skipped', 'cancelled']) expect(task).toContain(`>${s}</text>`);
    for (const e of ['READY', 'START', 'COMPLETE', 'FAIL', 'RETRY', 'REQUEUE', 'WAIT', 'SKIP', 'CANCEL', 'REVISE', 'RESTORE_COMPLETED']) expect(task, e).toContain(`<title>${e}</title>`);
    // `draft` completed, `review` running, `solo` not started: each counted in its state.
    expect(analyze(events).machineStates['task']).toEqual({ 'task.completed': 1, 'task.running': 1, 'task.pending': 1 });
    expect(page).toContain('<h3>task <span class="count">3 tasks</span></h3>');
    // A retried attempt is queued again; a task that ends for good is counted where it ended.
    const later = [
      ...events,
      ev(60, { type: 'task:failed', taskId: 'review', attempt: 1, error: { code: 'network', message: 'x', retryable: true }, willRetry: true }),
      ev(61, { type: 'task:queued', taskId: 'solo' }),
    ];
    expect(analyze(later).machineStates['task']).toEqual({ 'task.completed': 1, 'task.queued': 2 });
    const ended = [...later, ev(70, { type: 'task:skipped', taskId: 'solo', reason: 'x' }), ev(71, { type: 'task:cancelled', taskId: 'review' })];
    expect(analyze(ended).machineStates['task']).toEqual({ 'task.completed': 1, 'task.skipped': 1, 'task.cancelled': 1 });
  });

  it('reads states, nested states and transitions by event from toJSON()', () => {
    const chart = chartOf(breakerMachine);
    expect(chart.states.map((s) => s.path)).toEqual(['closed', 'open', 'halfOpen']);
    expect(chart.transitions).toContainEqual({ from: 'breaker.open', to: 'breaker.halfOpen', event: 'after cooldown' });
    expect(chart.transitions).toContainEqual({ from: 'breaker.closed', to: 'breaker.open', event: 'BREAKER.REPORT' });
    const agent = machineCharts().find((c) => c.id === 'agent')!;
    expect(agent.states.find((s) => s.path === 'active.waiting.lease')).toMatchObject({ depth: 3, type: 'atomic' });
    expect(agent.transitions).toContainEqual({ from: 'agent.active.waiting', to: 'agent.active.waiting.lease', event: '' });
    expect(renderChart(chart)).toContain('<title>after cooldown</title>');
    // Eventless transitions (not in toJSON()) come from the machine's state nodes.
    const key = machineCharts().find((c) => c.id === 'key')!;
    expect(key.transitions).toContainEqual({ from: 'key.deciding', to: 'key.backoff', event: 'always' });
    // The machine's own transitions, taken from any state, are said under the chart.
    expect(agent.fromAny).toContainEqual({ to: 'agent.cancelled', event: 'CANCEL' });
    expect(renderChart(agent)).toContain('From any state: CANCEL → cancelled');
  });
});

describe('the layered layout', () => {
  it('puts each node a layer after its furthest predecessor, and survives cycles', () => {
    const n = (id: string) => ({ id, width: 40, height: 20 });
    const dag = layered([n('a'), n('b'), n('c'), n('d')], [['a', 'b'], ['b', 'c'], ['a', 'c'], ['c', 'd']]);
    expect(['a', 'b', 'c', 'd'].map((id) => dag.nodes.get(id)!.layer)).toEqual([0, 1, 2, 3]);
    const loop = layered([n('x'), n('y'), n('z')], [['x', 'y'], ['y', 'z'], ['z', 'x'], ['y', 'y']]);
    expect(['x', 'y', 'z'].map((id) => loop.nodes.get(id)!.layer)).toEqual([0, 1, 2]);
    // No two nodes overlap.
    const boxes = [...dag.nodes.values(), ...loop.nodes.values()];
    for (const a of dag.nodes.values()) for (const b of dag.nodes.values()) {
      if (a !== b) expect(a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y).toBe(true);
    }
    expect(boxes.every((p) => Number.isFinite(p.x) && Number.isFinite(p.y))).toBe(true);
  });
});
