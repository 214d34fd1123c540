/**
 * Live progress of a run, from its event stream.
 *
 * Three layers, so tests need no timers: `reduce` folds each event into a `ProgressState` (no
 * I/O, no clock: the time is the event's `at`), `renderFrame` and `statusLine` turn a state into
 * text, and `createProgress` writes that text: on a terminal a view redrawn in place at most ten
 * times a second; elsewhere (CI, a pipe) one line per notable event and a status line every
 * `intervalMs` of event time.
 */
import type { KeyLimits, KeyState, RunEvent, RunStatus, TaskStatus, Usage } from '../../machines/protocol.js';
import { addUsage, ZERO_USAGE } from '../../machines/protocol.js';
import { costOf } from '../cost/price.js';
import type { ModelPrice } from '../plan/index.js';
import type { TimedRunEvent } from '../swarm.js';
import { formatEventLine, formatInt, renderFrame, stamp, startLine, statusLine } from './format.js';
import { colourLine } from './colour.js';
import { visible } from './terminal.js';

export { etaMs, finishedTasks, renderFrame, statusLine } from './format.js';

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

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
  /** Tasks in the plan. */
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
  /** Each task's latest status; tasks never mentioned are pending. */
  tasks: Map<string, TaskStatus>;
  counts: Record<TaskStatus, number>;
  /** Retries inside attempts (task:retry) and new attempts (task:failed with willRetry). */
  retries: number;
  requests: number;
  responses: number;
  errors: number;
  /** Model calls answered 429. */
  rateLimited: number;
  compactions: number;
  usage: Usage;
  /** USD of the responses whose route has a price. */
  costUsd: number;
  /** Responses on a route without a price: their cost is unknown, not zero. */
  unpriced: number;
  keys: Map<string, KeyView>;
  /** Only routes whose breaker left closed at least once. */
  breakers: Map<string, BreakerView>;
  tools: ToolTally;
}

/** A state before any event: no tasks, nothing sent, nothing spent. */
export function progressState(): ProgressState {
  return {
    total: 0,
    models: Object.create(null) as ProgressState['models'],
    tasks: new Map(),
    counts: { pending: 0, queued: 0, running: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0 },
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
  switch (event.type) {
    case 'task:planned':
      // A planner's sub-tasks join the run: the total grows with them.
      state.total += event.subtasks.length;
      break;
    case 'run:started':
      state.runId = event.runId;
      state.total = event.tasks;
      // A resume: what had completed before counts as done (those tasks send no events).
      if (event.alreadyCompleted) state.counts.completed += event.alreadyCompleted;
      if (typeof at === 'number' && Number.isFinite(at)) state.startedAt = at;
      if (event.maxInFlight !== undefined) state.maxInFlight = event.maxInFlight;
      if (typeof event.budgetUsd === 'number' && event.budgetUsd > 0) state.budgetUsd = event.budgetUsd;
      state.models = Object.assign(Object.create(null) as ProgressState['models'], event.models);
      for (const [keyId, limits] of Object.entries(event.keys ?? {})) keyOf(state, keyId).limits = limits ?? {};
      break;
    case 'task:queued':
      setTask(state, event.taskId, 'queued');
      break;
    case 'task:started':
      setTask(state, event.taskId, 'running');
      break;
    case 'task:completed':
      setTask(state, event.taskId, 'completed');
      break;
    case 'task:failed':
      // A failed attempt that will be retried stays running until its task:queued.
      if (event.willRetry) state.retries += 1;
      else setTask(state, event.taskId, 'failed');
      break;
    case 'task:skipped':
      setTask(state, event.taskId, 'skipped');
      break;
    case 'task:cancelled':
      setTask(state, event.taskId, 'cancelled');
      break;
    case 'task:retry':
      state.retries += 1;
      break;
    case 'task:compacted':
      state.compactions += 1;
      break;
    case 'model:request': {
      state.requests += 1;
      const key = keyOf(state, event.keyId);
      key.requests += 1;
      key.active += 1;
      break;
    }
    case 'model:response': {
      state.responses += 1;
      const key = keyOf(state, event.keyId);
      key.active = Math.max(0, key.active - 1);
      if (event.usage) {
        state.usage = addUsage(state.usage, event.usage);
        const usd = costOf(event.usage, priceOf(state, event.provider, event.model));
        if (usd === null) state.unpriced += 1;
        else state.costUsd += usd;
      }
      break;
    }
    case 'model:error': {
      state.errors += 1;
      const key = keyOf(state, event.keyId);
      key.active = Math.max(0, key.active - 1);
      if (event.error?.code === 'rate_limited') {
        state.rateLimited += 1;
        key.rateLimited += 1;
      }
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

function setTask(state: ProgressState, taskId: string, to: TaskStatus): void {
  const from = state.tasks.get(taskId);
  if (from !== undefined) state.counts[from] -= 1;
  state.counts[to] += 1;
  state.tasks.set(taskId, to);
}

function keyOf(state: ProgressState, keyId: string): KeyView {
  let key = state.keys.get(keyId);
  if (!key) {
    key = { state: 'ready', requests: 0, active: 0, rateLimited: 0, limits: {} };
    state.keys.set(keyId, key);
  }
  return key;
}

/** The price of a route (provider and provider's model id), from the plan's models. */
function priceOf(state: ProgressState, provider: string, model: string): ModelPrice | undefined {
  for (const m of Object.values(state.models)) if (m.provider === provider && m.model === model && m.price) return m.price;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// The writer
// ---------------------------------------------------------------------------------------------

export interface ProgressOptions {
  out: NodeJS.WritableStream;
  /** A terminal gets the live view; anything else gets log lines. */
  tty: boolean;
  /** The clock of the redraw throttle (TTY only). Default Date.now. */
  now?: () => number;
  /** Non-TTY: a status line every this many ms of event time (`at`). Default 5000. */
  intervalMs?: number;
  /** Columns of the terminal. Default: the stream's `columns` (0 counts as unknown), else 80. */
  width?: number;
  /** Shown next to the cost so far. Default: the budget the run's `run:started` states. */
  budgetUsd?: number;
  /** Colour the lines (see `terminalMode` in colour.ts for what decides it). Default false. */
  colour?: boolean;
}

export interface Progress {
  /** Never throws: a broken stream or a strange event must not take the run down. */
  onEvent(event: TimedRunEvent): void;
  /** Draws the last state (TTY: and shows the cursor again). Idempotent. */
  finish(): void;
}

/** Redraws of the live view: at most one per this many ms. */
export const REDRAW_MS = 100;
/** Without events, the live view still redraws this often so the elapsed time moves. */
const HEARTBEAT_MS = 1000;
/** Skipped tasks printed one by one per failed dependency; the rest are counted on one line. */
const SKIPS_SHOWN = 3;

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const CLEAR_TO_EOL = '\x1b[K';
const CLEAR_BELOW = '\x1b[J';
const up = (n: number) => (n > 0 ? `\x1b[${n}A\r` : '\r');

/**
 * Progress of one run on `out`.
 *
 * @example
 * const progress = createProgress({ out: process.stderr, tty: process.stderr.isTTY === true });
 * run.events.on('*', (_type, event) => progress.onEvent(event));
 * const result = await run.result;
 * progress.finish();
 */
export function createProgress(opts: ProgressOptions): Progress {
  const state = progressState();
  const now = opts.now ?? Date.now;
  const intervalMs = opts.intervalMs !== undefined && opts.intervalMs > 0 ? opts.intervalMs : 5000;
  const paint = opts.colour === true ? colourLine : (line: string) => line;
  const budgetOf = () => opts.budgetUsd ?? state.budgetUsd;
  let broken = false;
  let finished = false;

  const write = (text: string) => {
    if (broken || text === '') return;
    try {
      opts.out.write(text);
    } catch {
      broken = true;
    }
  };
  // A stream that fails later (EPIPE when the reader went away) says so with an 'error' event,
  // which would crash the process if nobody listened.
  try {
    opts.out.on?.('error', () => {
      broken = true;
    });
  } catch {
    // Not an emitter: writes are guarded anyway.
  }

  return opts.tty ? liveView() : logLines();

  /** Non-TTY: notable events and a status line per `intervalMs` of event time. */
  function logLines(): Progress {
    let nextStatusAt: number | undefined;
    // A failed task with 1,000 dependents skips them in one burst: a few lines, then a count.
    let skips: { reason: string; shown: number; held: number; at: number } | undefined;
    const flushSkips = () => {
      if (skips && skips.held > 0) write(`${stamp(state, skips.at)} skipped  ... and ${formatInt(skips.held)} more (${visible(skips.reason)})\n`);
      skips = undefined;
    };
    const log = (event: RunEvent, line: string, at: number) => {
      if (event.type !== 'task:skipped') flushSkips();
      else {
        if (skips?.reason !== event.reason) {
          flushSkips();
          skips = { reason: event.reason, shown: 0, held: 0, at };
        }
        if (skips.shown >= SKIPS_SHOWN) {
          skips.held += 1;
          skips.at = at;
          return;
        }
        skips.shown += 1;
      }
      // A line may quote a server's error: its control characters are shown, not obeyed.
      write(`${paint(`${stamp(state, at)} ${visible(line)}`)}\n`);
    };
    const status = (at: number) => {
      flushSkips();
      write(`${paint(visible(statusLine(state, at, budgetOf())))}\n`);
    };
    return {
      onEvent(event) {
        if (finished) return;
        try {
          reduce(state, event);
          const at = Number.isFinite(event.at) ? event.at : (state.lastAt ?? 0);
          if (event.type === 'run:completed') {
            status(at);
            finished = true;
            return;
          }
          const line = event.type === 'run:started' ? startLine(state) : formatEventLine(event);
          if (line !== undefined) log(event, line, at);
          nextStatusAt ??= (state.startedAt ?? at) + intervalMs;
          if (at >= nextStatusAt) {
            status(at);
            // On the interval's grid, however long the stream was quiet.
            nextStatusAt += Math.floor((at - nextStatusAt) / intervalMs + 1) * intervalMs;
          }
        } catch {
          // Progress is best effort.
        }
      },
      finish() {
        if (finished) return;
        finished = true;
        try {
          status(state.lastAt ?? 0);
        } catch {
          // Progress is best effort.
        }
      },
    };
  }

  /** TTY: the frame redrawn in place; final failures and alarms logged above it. */
  function liveView(): Progress {
    let drawn = 0;
    let shown = false;
    let lastDraw = -Infinity;
    let dirty = false;
    let timer: ReturnType<typeof setInterval> | undefined;
    const above: string[] = [];
    const restore = () => write(SHOW_CURSOR);

    /** One write per frame: back to the frame's top, each line overwritten then cleared to its end. */
    const draw = (t: number, tail = '') => {
      const columns = opts.width ?? (opts.out as { columns?: number }).columns;
      // A terminal that says it has 0 columns (or nothing) is taken as 80 wide, not as 20.
      const width = Math.max(20, columns !== undefined && columns > 0 ? columns : 80);
      // The frame stays one column short of the width, so no line wraps and `up(drawn)` is exact.
      const frame = renderFrame(state, t, width - 1, budgetOf()).map(paint);
      const lines = [...above.splice(0).map(paint), ...frame];
      write(`${shown ? up(drawn) : HIDE_CURSOR}${lines.map((l) => `${l}${CLEAR_TO_EOL}\n`).join('')}${CLEAR_BELOW}${tail}`);
      shown = true;
      drawn = frame.length;
      lastDraw = t;
      dirty = false;
    };
    const drawIfDue = () => {
      try {
        const t = now();
        if ((dirty && t - lastDraw >= REDRAW_MS) || t - lastDraw >= HEARTBEAT_MS) draw(t);
      } catch {
        // Progress is best effort.
      }
    };

    return {
      onEvent(event) {
        if (finished) return;
        try {
          reduce(state, event);
          if (isAlarm(event)) {
            const line = formatEventLine(event);
            if (line) above.push(`${stamp(state, event.at)} ${visible(line)}`);
          }
          dirty = true;
          const t = now();
          if (t - lastDraw >= REDRAW_MS) draw(t);
          if (timer === undefined) {
            timer = setInterval(drawIfDue, REDRAW_MS);
            timer.unref?.();
            process.once('exit', restore);
          }
        } catch {
          // Progress is best effort.
        }
      },
      finish() {
        if (finished) return;
        finished = true;
        if (timer !== undefined) clearInterval(timer);
        process.off('exit', restore);
        try {
          draw(now(), SHOW_CURSOR);
        } catch {
          restore();
        }
      },
    };
  }
}

/** What stays on a terminal above the live view: what a person must not miss. */
function isAlarm(event: RunEvent): boolean {
  return (event.type === 'task:failed' && !event.willRetry) || event.type === 'key:revoked' || event.type === 'breaker:open' || event.type === 'run:cancelled';
}
