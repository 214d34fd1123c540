/**
 * The state of the live progress view and the reducer that folds each run event into it: no
 * I/O, no clock (the time is the event's `at`), so tests need no timers. progress.ts writes it.
 */
import type { KeyLimits, KeyState, RunEvent, RunStatus, TaskStatus, Usage } from '../../machines/protocol.js';
import { ZERO_USAGE } from '../../machines/protocol.js';
import { StreamCounts } from '../../machines/tasks/eventCounts.js';
import type { ModelPrice } from '../plan/index.js';
import type { TimedRunEvent } from '../swarm.js';

export interface KeyView {
  state: KeyState;
  /** Model calls sent with it. */
  requests: number;
  /** Its calls not yet answered. */
  active: number;
  rateLimited: number;
  limits: KeyLimits;
  /** The request rate it paces at (rpm) and where it comes from, from its last `key:rate`. */
  rate?: { rpm: number | null; source: 'stated' | 'learned' | 'adaptive' | 'none' };
}

export interface BreakerView {
  state: 'open' | 'halfOpen' | 'closed';
  /** Times it opened. */
  opened: number;
}

export interface ToolTally {
  /** Calls the agents made (tool:called). */
  requested: number;
  /** Executions the bus ran (tool:result): a shared, cached or batched call needs none of its own. */
  executed: number;
  /** Calls that joined an identical one already running. */
  shared: number;
  /** Calls answered from the cache. */
  cached: number;
  /** Calls refused before reaching the bus (a tool the task may not use). */
  denied: number;
  /** Executions that ended in an error or timed out. */
  failed: number;
}

/**
 * What the stream has told so far. Mutable on purpose, like machines/tasks/runTable.ts: `reduce`
 * updates it in place in O(1), so a 10,000-task run never copies its task table per event.
 */
export interface ProgressState {
  runId?: string;
  /**
   * The run's counts from the stream, as every surface adds them up (machines/tasks/counts.ts):
   * the fields below that say "counts" are copied from it after each event.
   */
  stream: StreamCounts;
  /** Tasks (counts): the plan's, and those planners, maps and reduces made; containers left out. */
  total: number;
  maxInFlight?: number;
  /** The run's budget in USD, as its run:started stated it (a resume states it too). */
  budgetUsd?: number;
  /** `at` of run:started (of the first event, if the stream began later). */
  startedAt?: number;
  /** `at` of the latest event. */
  lastAt?: number;
  /** `at` of run:completed. */
  endedAt?: number;
  status?: RunStatus;
  cancelReason?: string;
  /** The plan's models: name to route and price. */
  models: Record<string, { provider: string; model: string; price?: ModelPrice }>;
  /** Tasks per status (counts; containers left out). */
  counts: Record<TaskStatus, number>;
  /** Agents started (counts). */
  attempts: number;
  /** Retries inside attempts (task:retry) and new attempts (task:failed with willRetry) (counts). */
  retries: number;
  /** Model calls sent (counts). */
  requests: number;
  responses: number;
  errors: number;
  /** Model calls answered 429 (counts). */
  rateLimited: number;
  compactions: number;
  /** Tokens (counts). */
  usage: Usage;
  /** USD of the tasks whose cost is known (counts). */
  costUsd: number;
  /** Responses without a price: their cost is unknown, not zero (counts). */
  unpriced: number;
  keys: Map<string, KeyView>;
  /** Only routes whose breaker left closed at least once. */
  breakers: Map<string, BreakerView>;
  tools: ToolTally;
}

/** A state before any event: no tasks, nothing sent, nothing spent. */
export function progressState(): ProgressState {
  const stream = new StreamCounts();
  return {
    stream,
    total: 0,
    models: Object.create(null) as ProgressState['models'],
    counts: stream.counts.byStatus,
    attempts: 0,
    retries: 0,
    requests: 0,
    responses: 0,
    errors: 0,
    rateLimited: 0,
    compactions: 0,
    usage: ZERO_USAGE,
    costUsd: 0,
    unpriced: 0,
    keys: new Map(),
    breakers: new Map(),
    tools: { requested: 0, executed: 0, shared: 0, cached: 0, denied: 0, failed: 0 },
  };
}

/**
 * Folds one event into the state (in place) and returns it. Tolerates what a saved or foreign
 * stream may hold: events before run:started, unknown keys and routes, missing fields.
 */
export function reduce(state: ProgressState, event: TimedRunEvent | RunEvent): ProgressState {
  const at = (event as { at?: unknown }).at;
  if (typeof at === 'number' && Number.isFinite(at)) {
    state.startedAt ??= at;
    state.lastAt = at;
  }
  // The counts: tasks by status (a resume's earlier lives included), attempts, requests, retries, 429s, cost.
  state.stream.add(event);
  const c = state.stream.counts;
  state.total = c.tasks;
  state.attempts = c.attempts;
  state.retries = c.retries;
  state.requests = c.requests;
  state.rateLimited = c.rateLimited;
  state.usage = c.usage;
  state.costUsd = c.costUsd ?? 0;
  state.unpriced = c.unpriced;
  switch (event.type) {
    case 'run:started':
      state.runId = event.runId;
      if (typeof at === 'number' && Number.isFinite(at)) state.startedAt = at;
      if (event.maxInFlight !== undefined) state.maxInFlight = event.maxInFlight;
      if (typeof event.budgetUsd === 'number' && event.budgetUsd > 0) state.budgetUsd = event.budgetUsd;
      state.models = Object.assign(Object.create(null) as ProgressState['models'], event.models);
      for (const [keyId, limits] of Object.entries(event.keys ?? {})) keyOf(state, keyId).limits = limits ?? {};
      break;
    case 'task:compacted':
      state.compactions += 1;
      break;
    case 'model:request': {
      const key = keyOf(state, event.keyId);
      key.requests += 1;
      key.active += 1;
      break;
    }
    case 'model:response': {
      state.responses += 1;
      const key = keyOf(state, event.keyId);
      key.active = Math.max(0, key.active - 1);
      break;
    }
    case 'model:error': {
      state.errors += 1;
      const key = keyOf(state, event.keyId);
      key.active = Math.max(0, key.active - 1);
      if (event.error?.code === 'rate_limited') key.rateLimited += 1;
      break;
    }
    case 'tool:called':
      state.tools.requested += 1;
      if (event.shared) state.tools.shared += 1;
      if (event.cached) state.tools.cached += 1;
      break;
    case 'tool:result':
      state.tools.executed += 1;
      if (event.isError || event.timedOut) state.tools.failed += 1;
      break;
    case 'tool:denied':
      state.tools.denied += 1;
      break;
    case 'key:state':
      keyOf(state, event.keyId).state = event.state;
      break;
    case 'key:backoff':
      keyOf(state, event.keyId).state = 'backoff';
      break;
    case 'key:rate':
      keyOf(state, event.keyId).rate = { rpm: event.rpm, source: event.source };
      break;
    case 'key:revoked':
      keyOf(state, event.keyId).state = 'revoked';
      break;
    case 'breaker:open': {
      const breaker = state.breakers.get(event.route) ?? { state: 'open', opened: 0 };
      breaker.state = 'open';
      breaker.opened += 1;
      state.breakers.set(event.route, breaker);
      break;
    }
    case 'breaker:halfOpen':
    case 'breaker:closed': {
      // A route that never opened stays out of the view.
      const breaker = state.breakers.get(event.route);
      if (breaker) breaker.state = event.type === 'breaker:closed' ? 'closed' : 'halfOpen';
      break;
    }
    case 'run:cancelled':
      state.cancelReason = event.reason;
      break;
    case 'run:completed':
      state.status = event.status;
      if (typeof at === 'number' && Number.isFinite(at)) state.endedAt = at;
      break;
  }
  return state;
}

function keyOf(state: ProgressState, keyId: string): KeyView {
  let key = state.keys.get(keyId);
  if (!key) {
    key = { state: 'ready', requests: 0, active: 0, rateLimited: 0, limits: {} };
    state.keys.set(keyId, key);
  }
  return key;
}
