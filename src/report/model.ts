/**
 * What a run report shows, computed from a saved event stream: model calls paired into bars, key
 * and breaker spans, cost and cache by model and by stage, tool-bus savings and the DAG by stage.
 * Pure: no I/O and no HTML here (html.ts renders it), so every number can be tested on its own.
 *
 * Times are milliseconds since the run started (`run:started`'s `at`, else the first event's).
 */
import type { KeyState } from '../../machines/protocol.js';
import { CountBook } from '../../machines/tasks/counts.js';
import { StreamCounts } from '../../machines/tasks/eventCounts.js';
import { tallyOfResult, type RunResult } from '../../machines/tasks/results.js';
import { costOf } from '../cost/price.js';
import { analyzeExtras } from './extras.js';
import { functionLanes } from './steps.js';
import type { TimedRunEvent } from '../swarm.js';
import { shownStatuses, spendOf, taskViews, type TaskFacts } from './tasks.js';
import { outcomeOf, stageOf, type BreakerTransition, type Call, type KeyReport, type Outcome, type Price, type ReportModel, type RouteReport, type Span, type Started, type ToolReport } from './types.js';

const zeroOutcomes = (): Record<Outcome, number> => ({ ok: 0, rate_limited: 0, server: 0, timeout: 0, network: 0, other: 0, inflight: 0 });

export interface AnalyzeOptions {
  /**
   * The stream is all there will be (a saved file): what has not ended is `unfinished`. Default
   * false: a run with no `run:completed` (and no result) is still going, and says `running`.
   */
  ended?: boolean;
}

const getOr = <K, V>(map: Map<K, V>, key: K, make: () => NoInfer<V>): V => {
  let v = map.get(key);
  if (v === undefined) map.set(key, (v = make()));
  return v;
};

/** Reads the stream once and builds everything the report shows. */
export function analyze(events: readonly TimedRunEvent[], result?: RunResult, stage: typeof stageOf = stageOf, opts: AnalyzeOptions = {}): ReportModel {
  const started = events.find((e): e is Started & { at: number } => e.type === 'run:started');
  const origin = started?.at ?? events[0]?.at ?? 0;
  const ended = events.findLast((e) => e.type === 'run:completed');
  const lastAt = events.reduce((m, e) => Math.max(m, e.at), origin);
  const endAt = (ended?.at ?? lastAt) - origin;
  const t = (e: { at: number }) => e.at - origin;

  const models = started?.models ?? {};
  const routeModels = new Map<string, string[]>();
  for (const [name, m] of Object.entries(models)) getOr(routeModels, `${m.provider}/${m.model}`, () => []).push(name);
  const priceOf = (name: string | undefined): Price | undefined => (name ? models[name]?.price : undefined);

  const keys = new Map<string, KeyReport>();
  const keyOf = (keyId: string) =>
    getOr(keys, keyId, () => ({
      keyId,
      provider: keyId.includes(':') ? keyId.slice(0, keyId.indexOf(':')) : keyId,
      limits: { ...(started?.keys?.[keyId] ?? {}) },
      calls: [],
      tracks: 0,
      outcomes: zeroOutcomes(),
      backoffs: 0,
      rates: [],
      backoff: [],
      saturated: [],
      busyMs: 0,
      peak60: 0,
    }));
  for (const keyId of Object.keys(started?.keys ?? {})) keyOf(keyId);
  const routes = new Map<string, RouteReport>();
  const routeOf = (route: string) =>
    getOr(routes, route, () => ({ route, models: routeModels.get(route) ?? [], requests: 0, outcomes: zeroOutcomes(), transitions: [], open: [], halfOpen: [] }));
  for (const route of routeModels.keys()) routeOf(route);

  // Every task's counts, as every surface counts them; what else the stream tells of it, beside.
  const stream = new StreamCounts();
  const facts = new Map<string, TaskFacts>();
  const taskOf = (id: string) => getOr(facts, id, () => ({}));
  const tools = new Map<string, ToolReport>();
  const toolOf = (name: string) =>
    getOr(tools, name, () => ({ name, called: 0, shared: 0, cached: 0, executions: 0, batchedCalls: 0, errors: 0, timeouts: 0, durationMs: 0, denied: 0 }));

  const calls: Call[] = [];
  const inFlight = new Map<string, Call[]>();
  const keyStates = new Map<string, { state: KeyState; since: number }>();
  const breakerStates = new Map<string, { state: 'open' | 'halfOpen'; since: number }>();
  const errorCodes = new Map<string, number>();
  let unmatchedReplies = 0;
  let compactions = 0;
  let runStatus: string | undefined;
  let cancelReason: string | undefined;

  for (const e of events) {
    stream.add(e);
    switch (e.type) {
      case 'run:started':
        for (const [id, c] of Object.entries(e.restored ?? {})) if (c.model !== undefined) taskOf(id).modelName ??= c.model;
        break;
      case 'task:started': {
        const task = taskOf(e.taskId);
        task.modelName = e.model;
        task.firstStart ??= t(e);
        break;
      }
      case 'task:compacted':
        compactions += 1;
        break;
      case 'task:completed': {
        const task = taskOf(e.taskId);
        task.lastEnd = t(e);
        delete task.error;
        break;
      }
      case 'task:failed': {
        const task = taskOf(e.taskId);
        task.error = e.error;
        task.lastEnd = t(e);
        break;
      }
      case 'task:skipped':
        taskOf(e.taskId).skippedReason = e.reason;
        break;
      case 'model:request': {
        const task = taskOf(e.taskId);
        const route = `${e.provider}/${e.model}`;
        const names = routeModels.get(route) ?? [];
        // The task's own model prices the call when it is on this route; a compaction or fallback call uses the route's.
        const modelName = task.modelName !== undefined && names.includes(task.modelName) ? task.modelName : names[0];
        const call: Call = { taskId: e.taskId, attempt: e.attempt, turn: e.turn, route, keyId: e.keyId, start: t(e), end: endAt, open: true, outcome: 'other', costUsd: null, track: 0 };
        if (modelName !== undefined) call.modelName = modelName;
        calls.push(call);
        getOr(inFlight, `${e.taskId}\u0000${e.attempt}\u0000${e.turn}`, () => []).push(call);
        break;
      }
      case 'model:response':
      case 'model:error': {
        const call = inFlight.get(`${e.taskId}\u0000${e.attempt}\u0000${e.turn}`)?.shift();
        if (!call) {
          unmatchedReplies += 1;
          break;
        }
        call.end = Math.max(call.start, t(e));
        call.open = false;
        if (e.type === 'model:response') {
          call.outcome = 'ok';
          call.usage = e.usage;
          // What the run charged for it (the price of the model that served it), else the plan's price.
          call.costUsd = e.costUsd ?? costOf(e.usage, priceOf(e.modelName ?? call.modelName));
        } else {
          call.outcome = outcomeOf(e.error);
          call.error = e.error;
          // A failed call that may have reached the server is charged its worst case (the agent says how much).
          if (e.costUsd !== undefined) call.costUsd = e.costUsd;
          errorCodes.set(e.error.code, (errorCodes.get(e.error.code) ?? 0) + 1);
        }
        break;
      }
      case 'tool:called': {
        const tool = toolOf(e.name);
        tool.called += 1;
        if (e.shared) tool.shared += 1;
        if (e.cached) tool.cached += 1;
        break;
      }
      case 'tool:result': {
        const tool = toolOf(e.name);
        tool.executions += 1;
        if (e.batch !== undefined) tool.batchedCalls += e.batch;
        if (e.isError) tool.errors += 1;
        if (e.timedOut) tool.timeouts += 1;
        tool.durationMs += e.durationMs ?? 0;
        break;
      }
      case 'tool:denied':
        toolOf(e.name).denied += 1;
        break;
      case 'key:state': {
        const key = keyOf(e.keyId);
        const prev = keyStates.get(e.keyId);
        if (prev?.state === 'backoff') key.backoff.push({ start: prev.since, end: t(e) });
        if (prev?.state === 'saturated') key.saturated.push({ start: prev.since, end: t(e) });
        if (e.state === 'revoked') key.revokedAt ??= t(e);
        keyStates.set(e.keyId, { state: e.state, since: t(e) });
        break;
      }
      case 'key:backoff': {
        const key = keyOf(e.keyId);
        key.backoffs += 1;
        // Also a span of its own: a stream without key:state still shows the wait.
        key.backoff.push({ start: t(e), end: Math.min(endAt, t(e) + e.retryAfterMs) });
        break;
      }
      case 'key:revoked':
        keyOf(e.keyId).revokedAt ??= t(e);
        break;
      case 'key:set-aside':
        keyOf(e.keyId).setAside ??= { at: t(e), rateLimitedMs: e.rateLimitedMs, responses: e.responses };
        break;
      case 'key:rate':
        keyOf(e.keyId).rates.push({ at: t(e), rpm: e.rpm, source: e.source });
        break;
      case 'breaker:open':
      case 'breaker:halfOpen':
      case 'breaker:closed': {
        const route = routeOf(e.route);
        const to = e.type === 'breaker:open' ? 'open' : e.type === 'breaker:halfOpen' ? 'halfOpen' : 'closed';
        const transition: BreakerTransition = { at: t(e), to };
        if (e.type === 'breaker:open') Object.assign(transition, { cooldownMs: e.cooldownMs, failures: e.failures });
        route.transitions.push(transition);
        const prev = breakerStates.get(e.route);
        if (prev) route[prev.state].push({ start: prev.since, end: t(e) });
        if (to === 'closed') breakerStates.delete(e.route);
        else breakerStates.set(e.route, { state: to, since: t(e) });
        break;
      }
      case 'run:cancelled':
        cancelReason = e.reason;
        break;
      case 'run:completed':
        runStatus = e.status;
        break;
      default:
        break;
    }
  }
  // States still held when the stream ends last until its end.
  for (const [keyId, s] of keyStates) {
    if (s.state === 'backoff') keyOf(keyId).backoff.push({ start: s.since, end: endAt });
    if (s.state === 'saturated') keyOf(keyId).saturated.push({ start: s.since, end: endAt });
  }
  for (const [route, s] of breakerStates) routeOf(route)[s.state].push({ start: s.since, end: endAt });

  // The run still goes while it has no ending: its calls with no reply yet are in flight.
  const live = !opts.ended && result === undefined && runStatus === undefined;
  for (const call of calls) if (call.open) call.outcome = live ? 'inflight' : 'other';

  // The result, when given, is the final word on each task (tasks that never started included):
  // its counts are its tasks', with the 429s only the stream knows.
  let book = stream.book;
  if (result) {
    book = new CountBook();
    for (const r of Object.values(result.tasks)) {
      book.set(r.id, tallyOfResult(r, stream.book.get(r.id)?.rateLimited ?? 0));
      const task = taskOf(r.id);
      task.modelName ??= r.model;
      if (r.error) task.error = r.error;
    }
  }

  for (const call of calls) {
    const key = keyOf(call.keyId);
    key.calls.push(call);
    key.outcomes[call.outcome] += 1;
    const route = routeOf(call.route);
    route.requests += 1;
    route.outcomes[call.outcome] += 1;
  }
  for (const key of keys.values()) {
    key.backoff = mergeSpans(key.backoff);
    layoutKey(key);
  }

  const counts = book.counts;
  const views = taskViews(book, facts, live, stage);
  const model: ReportModel = {
    ...analyzeExtras(events, calls, result),
    models,
    status: result?.status ?? runStatus ?? (cancelReason !== undefined ? 'cancelled' : live ? 'running' : 'unfinished'),
    origin,
    makespanMs: result?.totals.durationMs ?? endAt,
    live,
    counts,
    taskCount: counts.tasks,
    byStatus: shownStatuses(counts.byStatus, live),
    requests: counts.requests,
    retries: counts.retries,
    compactions,
    spend: spendOf(counts),
    calls,
    functionLanes: functionLanes(events, origin, endAt, live),
    unmatchedReplies,
    keys: [...keys.values()],
    routes: [...routes.values()],
    byModel: views.byModel,
    stages: views.stages,
    tasks: views.tasks,
    tools: [...tools.values()].sort((a, b) => a.name.localeCompare(b.name)),
    errorCodes: [...errorCodes.entries()].sort((a, b) => b[1] - a[1]),
  };
  const runId = result?.runId ?? started?.runId;
  if (runId !== undefined) model.runId = runId;
  if (cancelReason !== undefined) model.cancelReason = cancelReason;
  if (started?.maxInFlight !== undefined) model.maxInFlight = started.maxInFlight;
  return model;
}

/** Sorted, overlapping spans joined. */
export function mergeSpans(spans: Span[]): Span[] {
  const sorted = [...spans].sort((a, b) => a.start - b.start);
  const out: Span[] = [];
  for (const s of sorted) {
    const last = out[out.length - 1];
    if (last && s.start <= last.end) last.end = Math.max(last.end, s.end);
    else out.push({ ...s });
  }
  return out;
}

/**
 * Stacks a key's calls into tracks (first free track; calls in flight at once never overlap),
 * and measures its busy time and its busiest 60 s window of request starts.
 */
function layoutKey(key: KeyReport): void {
  const calls = [...key.calls].sort((a, b) => a.start - b.start);
  const trackEnds: number[] = [];
  let busyUntil = -Infinity;
  let windowStart = 0;
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    let track = trackEnds.findIndex((end) => end <= call.start);
    if (track < 0) track = trackEnds.push(0) - 1;
    trackEnds[track] = call.end;
    call.track = track;
    if (call.end > busyUntil) {
      key.busyMs += call.end - Math.max(call.start, busyUntil);
      busyUntil = call.end;
    }
    while (call.start - calls[windowStart]!.start >= 60_000) windowStart += 1;
    key.peak60 = Math.max(key.peak60, i - windowStart + 1);
  }
  key.tracks = Math.max(1, trackEnds.length);
  key.calls = calls;
}
