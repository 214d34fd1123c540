/**
 * The shapes of a run report: what model.ts computes from a stream and html.ts renders, plus the
 * two rules that classify things (a call's outcome, a task's stage).
 */
import type { FunctionLane } from './steps.js';
import type { ErrorInfo, RunEvent, Usage } from '../../machines/protocol.js';
import type { RunCounts } from '../../machines/tasks/counts.js';
import type { FinalTaskStatus } from '../../machines/tasks/lifecycle.js';
import type { Extras } from './extras.js';

/**
 * How a model call ended, as the timeline colours it. `server` is 5xx: server_error and
 * overloaded. `inflight`: no reply yet while the run goes; `other` takes a call that never had
 * one in a stream that ended (the run was cut short).
 */
export type Outcome = 'ok' | 'rate_limited' | 'server' | 'timeout' | 'network' | 'other' | 'inflight';
export const OUTCOMES: readonly Outcome[] = ['ok', 'rate_limited', 'server', 'timeout', 'network', 'other', 'inflight'];

export type Price = { input: number; output: number; cacheWrite?: number; cacheRead?: number };
export type Started = Extract<RunEvent, { type: 'run:started' }>;

/** One model call: from its `model:request` to the `model:response`/`model:error` of the same task, attempt and turn. */
export interface Call {
  taskId: string;
  attempt: number;
  turn: number;
  route: string;
  /** The plan's name of the model that priced it, when known. */
  modelName?: string;
  keyId: string;
  start: number;
  end: number;
  /** No reply in the stream (the run was cut short, or the call was aborted). */
  open: boolean;
  outcome: Outcome;
  usage?: Usage;
  costUsd: number | null;
  error?: ErrorInfo;
  /** Its row inside its key's lane: calls in flight at once stack. */
  track: number;
}

export interface Span {
  start: number;
  end: number;
}

export interface KeyReport {
  keyId: string;
  provider: string;
  limits: { rpm?: number; itpm?: number; otpm?: number; concurrency?: number };
  calls: Call[];
  tracks: number;
  outcomes: Record<Outcome, number>;
  backoffs: number;
  backoff: Span[];
  saturated: Span[];
  revokedAt?: number;
  /** Set aside (`key:set-aside`): when, and how long it had met nothing but 429s, and how many. */
  setAside?: { at: number; rateLimitedMs: number; responses: number };
  /** Time with at least one call in flight. */
  busyMs: number;
  /** Most requests that started in any 60 s window (the window an rpm limit counts). */
  peak60: number;
  /** The request rate the key paced at over the run (`key:rate` events), in order. */
  rates: { at: number; rpm: number | null; source: 'stated' | 'learned' | 'adaptive' | 'none' }[];
}

export interface BreakerTransition {
  at: number;
  to: 'open' | 'halfOpen' | 'closed';
  cooldownMs?: number;
  failures?: number;
}

export interface RouteReport {
  route: string;
  /** Plan model names on this route. */
  models: string[];
  requests: number;
  outcomes: Record<Outcome, number>;
  transitions: BreakerTransition[];
  open: Span[];
  halfOpen: Span[];
}

/** Token and cost totals of a group of calls (a model, a stage, the run). */
export interface Spend {
  requests: number;
  usage: Usage;
  /** USD over the calls with a known price; null when none had one. */
  costUsd: number | null;
  /** Calls whose model has no price. */
  unpriced: number;
}

export interface ToolReport {
  name: string;
  called: number;
  /** Joined an identical call already running. */
  shared: number;
  cached: number;
  executions: number;
  /** Calls served by batch executions. */
  batchedCalls: number;
  errors: number;
  timeouts: number;
  durationMs: number;
  denied: number;
}

/**
 * A task's status as a report shows it: its final status (the lifecycle's); while the run goes,
 * `running` or `waiting` (pending or queued); in a stream that ended without it (the run was cut
 * short), `unfinished`.
 */
export type ShownStatus = FinalTaskStatus | 'running' | 'waiting' | 'unfinished';
export const SHOWN_STATUSES: readonly ShownStatus[] = ['completed', 'failed', 'skipped', 'cancelled', 'running', 'waiting', 'unfinished'];

export interface TaskReport {
  id: string;
  stage: string;
  modelName?: string;
  status: ShownStatus;
  /** A map or reduce that expanded: its items or groups are the tasks (counted apart). */
  container: boolean;
  attempts: number;
  retries: number;
  requests: number;
  firstStart?: number;
  lastEnd?: number;
  error?: ErrorInfo;
  skippedReason?: string;
  spend: Spend;
}

export interface StageReport {
  stage: string;
  tasks: number;
  byStatus: Record<ShownStatus, number>;
  attempts: number;
  retries: number;
  spend: Spend;
  firstStart?: number;
  lastEnd?: number;
}

export interface ReportModel extends Extras {
  runId?: string;
  /** The plan's models (name -> route and price), from `run:started`. */
  models: Record<string, { provider: string; model: string; price?: Price }>;
  status: string;
  cancelReason?: string;
  /** Epoch ms of time 0. */
  origin: number;
  makespanMs: number;
  /** The run is still going (the live page): what has not ended is `running` or `waiting`. */
  live: boolean;
  /** The run's counts, as every surface adds them up (machines/tasks/counts.ts). */
  counts: RunCounts;
  /** Tasks, containers left out (`counts.tasks`). */
  taskCount: number;
  /** Tasks per status as shown: they sum to `taskCount`. */
  byStatus: Record<ShownStatus, number>;
  requests: number;
  retries: number;
  compactions: number;
  spend: Spend;
  calls: Call[];
  /** Function steps (`kind: "fn"`), a lane per function: they hold no key. */
  functionLanes: FunctionLane[];
  /** Replies with no request before them (a truncated stream). */
  unmatchedReplies: number;
  keys: KeyReport[];
  routes: RouteReport[];
  byModel: [string, Spend][];
  stages: StageReport[];
  tasks: TaskReport[];
  tools: ToolReport[];
  errorCodes: [string, number][];
  maxInFlight?: number;
}

/**
 * The pipeline stage of a task: its id without the first dot-separated segment, which names the
 * item the pipeline works on (`kettle.extract` -> `extract`, `kettle.translate.fr` ->
 * `translate.fr`). An id without a dot (or ending in one) is a stage of its own, named by the id:
 * grouping it under its model's name hid which task it was. `modelName` is kept for custom rules.
 */
export function stageOf(taskId: string, _modelName?: string | undefined): string {
  const dot = taskId.indexOf('.');
  if (dot > 0 && dot < taskId.length - 1) return taskId.slice(dot + 1);
  return taskId;
}

export function outcomeOf(error: ErrorInfo | undefined): Outcome {
  if (!error) return 'ok';
  switch (error.code) {
    case 'rate_limited':
      return 'rate_limited';
    case 'server_error':
    case 'overloaded':
      return 'server';
    case 'timeout':
      return 'timeout';
    case 'network':
      return 'network';
    default:
      return 'other';
  }
}
