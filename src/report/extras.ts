/**
 * The parts of a report model that the drawn views need: the DAG's edges, each task's output,
 * spend over time against the budget, and how many actors are in each machine state. Pure, like
 * model.ts, and computed from the same stream, so the static report and the live page agree.
 */
import type { RunResult } from '../../machines/tasks/results.js';
import type { TimedRunEvent } from '../swarm.js';
import type { Call, Started } from './types.js';

/** Characters of a task's output kept in the model: a page holds every task's output. */
export const OUTPUT_CHARS = 20_000;

export interface Extras {
  budgetUsd?: number;
  /** Cumulative spend after each priced reply, in time order (ms since the run started). */
  costSeries: { at: number; usd: number }[];
  /** dependency -> dependent, and planner -> its sub-tasks. */
  edges: [string, string][];
  outputs: Record<string, { text: string; truncated: boolean }>;
  /**
   * Machine id -> state id (as in `machine.toJSON()`, e.g. `agent.active.running`) -> actors there
   * now; for `task` (the lifecycle, drawn not run), tasks.
   */
  machineStates: Record<string, Record<string, number>>;
}

/** Where an agent is after an event about its task: an approximation, the events name no states. */
const AGENT_STATE: Partial<Record<TimedRunEvent['type'], string>> = {
  'task:started': 'agent.active.waiting',
  'model:request': 'agent.active.running',
  'tool:called': 'agent.active.tools',
  'task:retry': 'agent.active.backoff',
  'task:compacted': 'agent.active.waiting',
  'model:response': 'agent.active.waiting',
  'task:completed': 'agent.done',
  'task:cancelled': 'agent.cancelled',
};

/**
 * Where a task is in its lifecycle (machines/tasks/lifecycle.ts) after an event about it. Exact
 * but for two moves no event says: a map or reduce waiting on its sub-tasks (WAIT: shown running)
 * and a draft a reviewer sent back (REVISE: shown completed until it is queued again).
 */
const TASK_STATE: Partial<Record<TimedRunEvent['type'], string>> = {
  'task:queued': 'task.queued',
  'task:started': 'task.running',
  'approval:requested': 'task.waiting',
  'task:completed': 'task.completed',
  'task:skipped': 'task.skipped',
  'task:cancelled': 'task.cancelled',
};

const KEY_STATE: Record<string, string> = { ready: 'key.ready', saturated: 'key.saturated', backoff: 'key.backoff', revoked: 'key.revoked', setAside: 'key.setAside' };

export function analyzeExtras(events: readonly TimedRunEvent[], calls: readonly Call[], result?: RunResult): Extras {
  const started = events.find((e): e is Started & { at: number } => e.type === 'run:started');
  const edges: [string, string][] = [];
  for (const [task, deps] of Object.entries(started?.deps ?? {})) for (const dep of deps) edges.push([dep, task]);
  const outputs: Extras['outputs'] = {};
  const agents = new Map<string, string>();
  const keys = new Map<string, string>();
  const breakers = new Map<string, string>();
  // Every task of the plan is pending until an event moves it (a resume's ended ones aside).
  const tasks = new Map<string, string>(Object.keys(started?.deps ?? {}).map((id) => [id, 'task.pending']));
  for (const [id, status] of Object.entries(started?.before ?? {})) tasks.set(id, `task.${status}`);
  let supervisor = started ? 'supervisor.running' : undefined;
  for (const [id, status] of Object.entries(started?.before ?? {})) if (status !== 'skipped') agents.set(id, `agent.${status === 'completed' ? 'done' : 'failed'}`);
  const keep = (id: string, value: unknown) => {
    const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2) ?? '';
    outputs[id] = { text: text.slice(0, OUTPUT_CHARS), truncated: text.length > OUTPUT_CHARS };
  };
  for (const e of events) {
    const agentState = AGENT_STATE[e.type];
    if (agentState !== undefined && 'taskId' in e) agents.set(e.taskId, agentState);
    const taskState = TASK_STATE[e.type];
    if (taskState !== undefined && 'taskId' in e) tasks.set(e.taskId, taskState);
    switch (e.type) {
      case 'task:completed':
        keep(e.taskId, e.output);
        break;
      case 'task:failed':
        agents.set(e.taskId, e.willRetry ? 'agent.active.backoff' : 'agent.failed');
        // A new attempt follows: RETRY puts it back in the queue.
        tasks.set(e.taskId, e.willRetry ? 'task.queued' : 'task.failed');
        break;
      case 'task:planned':
        for (const sub of e.subtasks) {
          edges.push([e.taskId, sub]);
          if (!tasks.has(sub)) tasks.set(sub, 'task.pending');
        }
        break;
      case 'key:state':
        if (KEY_STATE[e.state]) keys.set(e.keyId, KEY_STATE[e.state]!);
        break;
      case 'breaker:open':
      case 'breaker:halfOpen':
      case 'breaker:closed':
        breakers.set(e.route, `breaker.${e.type.slice('breaker:'.length)}`);
        break;
      case 'run:cancelled':
        supervisor = 'supervisor.draining';
        break;
      case 'run:completed':
        supervisor = 'supervisor.finished';
        break;
      default:
        break;
    }
  }
  if (result) {
    supervisor = 'supervisor.finished';
    for (const r of Object.values(result.tasks)) {
      if (r.output !== undefined) keep(r.id, r.output);
      tasks.set(r.id, `task.${r.status}`);
    }
  }
  for (const keyId of Object.keys(started?.keys ?? {})) if (!keys.has(keyId)) keys.set(keyId, 'key.ready');

  const count = (states: Iterable<string>) => {
    const out: Record<string, number> = {};
    for (const s of states) out[s] = (out[s] ?? 0) + 1;
    return out;
  };
  const machineStates: Extras['machineStates'] = { agent: count(agents.values()), key: count(keys.values()), breaker: count(breakers.values()) };
  if (supervisor) machineStates['supervisor'] = { [supervisor]: 1 };
  if (tasks.size > 0) machineStates['task'] = count(tasks.values());

  // A resume or a retry starts from what earlier lives spent: the line ends at the run's cost.
  let spent = Object.values(started?.restored ?? {}).reduce((sum, t) => Math.round((sum + t.costUsd) * 1e8) / 1e8, 0);
  const before = spent > 0 ? [{ at: 0, usd: spent }] : [];
  const costSeries = [
    ...before,
    ...calls
      .filter((c) => c.costUsd !== null && !c.open)
      .sort((a, b) => a.end - b.end)
      .map((c) => ({ at: c.end, usd: (spent = Math.round((spent + c.costUsd!) * 1e8) / 1e8) })),
  ];
  const extras: Extras = { costSeries, edges, outputs, machineStates };
  if (started?.budgetUsd !== undefined) extras.budgetUsd = started.budgetUsd;
  return extras;
}
