/**
 * A journaled run as the report reads it: the event stream the report is built from, rebuilt
 * from the journal's rows (`swarmstate ui`), so a past run has its page without an events file.
 *
 * The journal keeps less than the stream, and the page says so. What it keeps is exact: the plan
 * (models, prices, the DAG), the sub-tasks planners and maps made, each attempt's start, end, route
 * and outcome, each task's status, output, error, requests, retries and usage, and the stored
 * result (the final word on statuses, cost and makespan, as `report --result` is). What it does
 * not keep is drawn from that: a task's model calls are spread evenly over its last attempt, the
 * attempt's tokens on its last call; the keys are not journaled, so the timeline has one lane per
 * route; 429s, backoffs, breakers and tool calls are not shown.
 */
import type { ErrorInfo, RunEvent, Usage } from '../../machines/protocol.js';
import { ZERO_USAGE } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/tasks/results.js';
import { priceOf } from '../cost/prices.js';
import type { ReportInput } from '../report/html.js';
import { skipCauseOf, type AttemptRow, type PlannerExtra, type RunRecord, type TaskRow } from '../store/index.js';
import type { TimedRunEvent } from '../swarm.js';

/** What the report is built from, and what the page says about where it came from. */
export interface JournalReport extends ReportInput {
  /** One line for the top of the page: the run as the journal has it, and what is drawn. */
  note: string;
}

type PlanModel = { provider?: unknown; model?: unknown; price?: unknown };
type PlanTask = { id?: unknown; deps?: unknown; model?: unknown };

const RUN_STATUSES = new Set(['completed', 'partial', 'failed', 'cancelled', 'budget_exceeded']);

/** An attempt that failed before its last: the journal keeps the last error of a task only. */
const EARLIER_FAILURE: ErrorInfo = { code: 'internal', message: 'this attempt failed (the journal keeps a task\'s last error only)', retryable: true };
const RETRIED_CALL: ErrorInfo = { code: 'internal', message: 'a call retried within the attempt (the journal keeps how many, not why)', retryable: true };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** The stored result, when it is a run's result (not a refusal at start, not missing). */
function resultOf(stored: unknown): RunResult | undefined {
  return isObject(stored) && isObject(stored['tasks']) && isObject(stored['totals']) ? (stored as unknown as RunResult) : undefined;
}

/**
 * The report's input for a journaled run.
 *
 * @param status the run's status as the journal says it (`interrupted` for a running one no process holds)
 */
export function journalReport(run: RunRecord, rows: readonly TaskRow[], attempts: readonly AttemptRow[], status: string): JournalReport {
  const plan = isObject(run.plan) ? run.plan : {};
  const planModels = isObject(plan['models']) ? (plan['models'] as Record<string, PlanModel>) : {};
  const models: NonNullable<Extract<RunEvent, { type: 'run:started' }>['models']> = {};
  for (const [name, m] of Object.entries(planModels)) {
    if (!isObject(m) || typeof m.provider !== 'string' || typeof m.model !== 'string') continue;
    const price = priceOf(m.model, isObject(m.price) ? (m.price as { input: number; output: number }) : undefined);
    models[name] = { provider: m.provider, model: m.model, ...(price ? { price } : {}) };
  }

  // The DAG: the plan's tasks in its order, then the sub-tasks in the order they were made.
  const deps: Record<string, string[]> = {};
  const modelOf = new Map<string, string>();
  const add = (t: PlanTask) => {
    if (typeof t.id !== 'string' || Object.hasOwn(deps, t.id)) return;
    deps[t.id] = strings(t.deps);
    if (typeof t.model === 'string') modelOf.set(t.id, t.model);
  };
  for (const t of Array.isArray(plan['tasks']) ? (plan['tasks'] as unknown[]) : []) if (isObject(t)) add(t);
  const made = new Map<string, string[]>();
  for (const row of rows) {
    if (row.parent === null) continue;
    if (isObject(row.spec)) add({ ...row.spec, id: row.taskId });
    else add({ id: row.taskId });
    (made.get(row.parent) ?? made.set(row.parent, []).get(row.parent)!).push(row.taskId);
  }
  for (const row of rows) add({ id: row.taskId });

  const timed: { at: number; n: number; event: RunEvent }[] = [];
  const emit = (at: number, event: RunEvent) => timed.push({ at, n: timed.length, event });
  const budget = isObject(plan['budget']) ? plan['budget']['usd'] : undefined;
  const maxInFlight = isObject(plan['defaults']) ? plan['defaults']['maxInFlight'] : undefined;
  emit(run.createdAt, {
    type: 'run:started',
    runId: run.id,
    tasks: run.tasksTotal,
    models,
    deps,
    ...(typeof maxInFlight === 'number' ? { maxInFlight } : {}),
    ...(typeof budget === 'number' ? { budgetUsd: budget } : {}),
  });

  const byTask = new Map<string, AttemptRow[]>();
  for (const a of attempts) (byTask.get(a.taskId) ?? byTask.set(a.taskId, []).get(a.taskId)!).push(a);
  const routeModel = (route: string) => Object.entries(models).find(([, m]) => `${m.provider}/${m.model}` === route)?.[0];
  const endOf = run.updatedAt;

  for (const row of rows) {
    const tries = (byTask.get(row.taskId) ?? []).sort((a, b) => a.attempt - b.attempt);
    const children = made.get(row.taskId);
    if (children) {
      // Only those of its last answer (as a resume takes them).
      const subtasks = (row.extra as Partial<PlannerExtra> | null)?.subtasks;
      const kept = Array.isArray(subtasks) ? children.filter((id) => subtasks.includes(id)) : children;
      const firstChild = Math.min(...kept.flatMap((id) => (byTask.get(id) ?? []).map((a) => a.startedAt)));
      const at = Number.isFinite(firstChild) ? firstChild : (tries.at(-1)?.endedAt ?? row.updatedAt);
      emit(at, { type: 'task:planned', taskId: row.taskId, attempt: row.attempts, subtasks: kept, depth: 1 });
    }
    for (const a of tries) {
      const model = modelOf.get(row.taskId) ?? routeModel(a.route) ?? a.route;
      emit(a.startedAt, { type: 'task:started', taskId: row.taskId, attempt: a.attempt, model, route: a.route });
      const last = a.attempt === row.attempts;
      if (last) callsOf(row, a, a.endedAt ?? endOf, emit);
      if (a.endedAt === null) continue;
      if (a.status === 'completed' && (!last || row.status === 'completed')) {
        const usage = (last ? row.usage : a.usage) ?? ZERO_USAGE;
        emit(a.endedAt, { type: 'task:completed', taskId: row.taskId, attempt: a.attempt, output: row.output ?? '', usage, requests: row.requests, retries: row.retries });
      } else if (a.status === 'failed') {
        const final = last && row.status === 'failed';
        const error = last && isObject(row.error) ? (row.error as unknown as ErrorInfo) : EARLIER_FAILURE;
        emit(a.endedAt, { type: 'task:failed', taskId: row.taskId, attempt: a.attempt, error, willRetry: !final });
      }
    }
    if (row.status === 'skipped') emit(row.updatedAt, { type: 'task:skipped', taskId: row.taskId, reason: row.reason ?? '', cause: skipCauseOf(row.extra) });
    if (row.status === 'cancelled') emit(row.updatedAt, { type: 'task:cancelled', taskId: row.taskId });
  }
  if (RUN_STATUSES.has(run.status)) emit(endOf, { type: 'run:completed', status: run.status as Extract<RunEvent, { type: 'run:completed' }>['status'] });

  const events: TimedRunEvent[] = timed.sort((a, b) => a.at - b.at || a.n - b.n).map(({ at, event }) => ({ ...event, at }));
  const result = resultOf(run.result);
  const drawn = 'rebuilt from the journal: each task\'s model calls are drawn evenly over its last attempt, one timeline lane per route (keys, 429s, backoffs, breakers and tool calls are not journaled)';
  return { events, ...(result ? { result } : {}), note: `run ${run.id} is ${status} in the journal; this page was ${drawn}` };
}

/**
 * A task's model calls, as many as the journal counts (its requests), one after another over its
 * last attempt, the last carrying the attempt's tokens, or the task's error if it failed; and its
 * retries within attempts, as many as the journal counts (why each was retried is not kept).
 */
function callsOf(row: TaskRow, a: AttemptRow, end: number, emit: (at: number, e: RunEvent) => void): void {
  const n = row.requests;
  if (n <= 0) return;
  const slash = a.route.indexOf('/');
  const provider = slash < 0 ? a.route : a.route.slice(0, slash);
  const model = slash < 0 ? '' : a.route.slice(slash + 1);
  const failed = row.status === 'failed' && a.status === 'failed' && isObject(row.error);
  const span = Math.max(0, end - a.startedAt);
  for (let retry = 1; retry <= row.retries; retry++) {
    emit(a.startedAt + (span * Math.min(retry, n - 1)) / n, { type: 'task:retry', taskId: row.taskId, attempt: a.attempt, retry, delayMs: 0, error: RETRIED_CALL });
  }
  for (let turn = 0; turn < n; turn++) {
    const call = { taskId: row.taskId, attempt: a.attempt, turn, provider, model, keyId: a.route };
    emit(a.startedAt + (span * turn) / n, { type: 'model:request', ...call });
    const at = a.startedAt + (span * (turn + 1)) / n;
    if (turn === n - 1 && failed) emit(at, { type: 'model:error', ...call, error: row.error as ErrorInfo });
    else emit(at, { type: 'model:response', ...call, usage: turn === n - 1 ? ((row.usage as Usage | null) ?? ZERO_USAGE) : ZERO_USAGE });
  }
}
