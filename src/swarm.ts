/**
 * The public face of the runtime: createSwarm() and what its runs hand back. A run, top to bottom:
 *
 * 1. run() validates the plan (every problem at once), journals it and takes its lock
 *    (src/run/lock.ts); resume() and retry() read the run back from its journal first
 *    (src/run/journaled.ts, src/run/retry.ts);
 * 2. src/run/start.ts connects the plan's tool servers, loads its hooks, resolves it (keys into the
 *    keyring, models into routes, tasks into supervised tasks with their critical-path rank), picks
 *    where its calls are made (src/run/transport.ts: here, or on the workers) and gives the
 *    machines their effects (src/run/effects.ts);
 * 3. the supervisor actor starts with the clock and inspector given to createSwarm, and its
 *    output is the run's result.
 */
import { customAlphabet, nanoid } from 'nanoid';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import type { Actor, InspectionEvent, Observer } from 'xstate';
import type { Tracer } from '@opentelemetry/api';
import type { ErrorInfo, RunEvent } from '../machines/protocol.js';
import type { RunResult } from '../machines/tasks/results.js';
import type { supervisorMachine } from '../machines/supervisor/machine.js';
import { realClock, type TimedClock } from '../machines/clock.js';
import type { Emitter } from './util/emitter.js';
import type { SwarmFunctions } from './fn/types.js';
import { kindOf } from './plan/issues.js';
import { parsePlan, type Plan, type ResultOf } from './plan/index.js';
import type { PlanBudget } from './plan/planTypes.js';
import { ProviderRegistry, type ProviderObject } from './providers/registry.js';
import type { Provider } from './providers/types.js';
import type { BreakerOptions } from './resolve.js';
import type { Hooks } from './hooks.js';
import type { ToolDefinition } from './tools/local.js';
import { refusalOf } from './durable.js';
import { hasRedactions, redactPlan, unredactPlan } from './planSecrets.js';
import { openStore, openStoreToRead, type PruneRule, type RunRecord, type RunSummary, type Store, type StoreError } from './store/index.js';
import { applyRetention, checkPruneRule } from './store/prune.js';
import { lazyRemote } from './distributed/lazy.js';
import { checkBudgetAboveSpent, RetryError, retrySessionsOf, tasksToRetry, withBudget, type RetrySession } from './run/retry.js';
import { FINISHED, finishedHandle, readPlanFile, stateOf, type JournaledState } from './run/journaled.js';
import { takeLock, withLiveness } from './run/lock.js';
import { startRun, type SwarmShared } from './run/start.js';
import { checkDistributable } from './run/transport.js';

export { RunLockedError } from './run/lock.js';

/** The public event stream of a run: one entry per RunEvent type. */
/** A run event as the stream carries it: stamped with the time (ms, the swarm's clock). */
export type TimedRunEvent = RunEvent & { at: number };
export type RunEvents = { [K in RunEvent['type']]: Extract<RunEvent, { type: K }> & { at: number } };

export interface SwarmOptions {
  /**
   * The functions `kind: "fn"` tasks name (`"fn": "fetchOrders"`), and the per-item and merge
   * steps of maps and reduces that name one. A plan that names a function not given here is
   * rejected before anything runs.
   */
  functions?: SwarmFunctions;
  /**
   * Provider adapters, by the plan's provider name or by provider type. A `custom` provider is
   * any object with `call(request)`; an `ai-sdk` one an AI SDK language model or provider. A
   * plan provider with none here uses the built-in adapter for its type: Anthropic Messages,
   * OpenAI-compatible Chat Completions, or (`sim`) a simulated provider server on 127.0.0.1.
   */
  providers?: Record<string, ProviderObject>;
  /** In-process function tools the plan's tasks may name. */
  tools?: ToolDefinition[];
  /** Passed to the root actor: see every machine's events (e.g. @statelyai/inspect). */
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** The clock of the actor system (`new SimulatedClock()` in tests). Must have `now()`. */
  clock?: TimedClock;
  /** Seed of every random choice (retry jitter). Default 0. */
  seed?: number;
  /**
   * Where `{ "env": NAME }` keys are read. Default `process.env`. The swarm's own settings
   * (`SWARMSTATE_STORE`) are read here when this object names them, else from `process.env`:
   * an `env` given for the plan's keys does not move the journal.
   */
  env?: Record<string, string | undefined>;
  /** Retry backoff: full jitter over base * 2^retry, capped. Default 500 ms / 30 s. */
  backoff?: { baseMs: number; maxMs: number };
  /**
   * Code that sees every model call before it is sent: allow, deny, or rewrite it (another model
   * of the plan, a smaller maxTokens, trimmed messages). A plan's `hooks.module` runs after it.
   */
  hooks?: Hooks;
  /** False turns off the tool bus's sharing and cache (to measure what they save). Default true. */
  shareTools?: boolean;
  /** Circuit breakers of every route. Default: open after 5 failures, 10 s cool-down doubling to 5 min. */
  breaker?: BreakerOptions;
  /**
   * Where runs are journaled, so a crash never costs finished work (`swarm.resume(runId)`): a
   * Store, a SQLite file path, `"memory"`, or `false` for none. Default: `$SWARMSTATE_STORE`, else
   * `.swarmstate/runs.db` in the working directory (SQLite, WAL).
   */
  store?: Store | string | false;
  /**
   * Journal upkeep: once per swarm, when its first run (or resume, or retry) has started and holds
   * its lock, the journal's runs this rule picks are removed (`olderThanMs`: started longer ago;
   * `keep`: all but the n newest, that run among them; both: what both pick), then VACUUM. Never
   * a run a live process holds, nor an interrupted one (a resume continues it). What
   * `swarmstate runs prune` does. A failure is a process warning (SWARMSTATE_RETENTION), not the
   * run's. Default: none (the journal only grows).
   */
  retention?: PruneRule;
  /**
   * Distributed runs: this process coordinates (the DAG, the journal, the budget, the key and
   * breaker actors) and every model and tool call goes to `swarmstate worker` processes through
   * BullMQ on this Redis (`redis://host:6379`). Keys must come from the environment (`{ env }`):
   * each worker reads its own. Without it, everything runs in this process. Needs the optional
   * packages bullmq and ioredis: without them createSwarm throws MissingPackageError.
   */
  redis?: string;
  /**
   * Told each new connection error of the coordinator's Redis clients (`source`: 'queue', 'queue
   * events' or 'cancel publisher'; the message without the URL's password). They reconnect on
   * their own and the run goes on (its calls wait). Default: a process warning
   * (`process.emitWarning`, code `SWARMSTATE_REDIS`), which Node prints on stderr.
   */
  onRedisError?: (source: string, message: string) => void;
  /**
   * Stream each task's text as it arrives as `task:delta` events (for UIs): off by default, so
   * a run's event volume does not change. Never journaled. `run`, `resume` and `retry` may say
   * otherwise for one run.
   */
  deltas?: boolean;
  /**
   * OpenTelemetry: the tracer of the runs' spans (run, task, attempt, `chat`, `execute_tool`;
   * docs/tracing.md). Default: the global tracer of `@opentelemetry/api`, which records nothing
   * until the application registers an SDK. `false`: no spans at all.
   */
  tracer?: Tracer | false;
}

export interface RunOptions {
  /** The plan file's path: recorded with the run, so a resume can read inline secrets from it again. */
  source?: string;
  /** `task:delta` events for this run (default: the swarm's `deltas`). */
  deltas?: boolean;
}

export interface ResumeOptions {
  /** The plan again, for a run whose plan had inline secrets (they are never stored) and whose file is gone. */
  plan?: unknown;
  /** `task:delta` events for this run (default: the swarm's `deltas`). */
  deltas?: boolean;
}

export interface RetryOptions extends ResumeOptions {
  /**
   * Only these tasks (and what depends on them) run again; each must be one that did not
   * complete. Default: every task of the run that did not complete.
   */
  tasks?: readonly string[];
  /**
   * New caps for this retry and what follows it (a later resume keeps them): the run's cap
   * (`usd`) and caps per model, as in the plan's `budget`. A run stopped by its budget goes on
   * only with a higher one. Each replaces the plan's; what was spent still counts.
   */
  budget?: PlanBudget;
}

export interface RunHandle<R = RunResult> {
  readonly id: string;
  /**
   * Typed events: `run.events.on('task:completed', (e) => ...)`, or `'*'` for all. The run starts
   * on the next microtask: subscribe in the same synchronous block as `run()` to see every event.
   */
  readonly events: Emitter<RunEvents>;
  /**
   * The run's result. It resolves for every ending, cancelled and partial included; it rejects
   * when the run cannot start (an MCP server that does not connect, a tool it lacks), and with a
   * StoreError when its journal cannot be written (the run stops; resume it once that is fixed).
   */
  readonly result: Promise<R>;
  /** Cancels the run: nothing new starts, agents in flight are aborted, results so far are kept. */
  cancel(reason?: string): void;
  /** The supervisor actor, for inspection and tests (undefined until the run has started). */
  readonly actor: Actor<typeof supervisorMachine> | undefined;
}

export interface Swarm {
  /**
   * Validates the plan (throws PlanValidationError listing every problem) and starts it. A plan
   * object written in code types its result: a task whose `output.schema` is a zod schema has
   * that schema's output type.
   */
  run<const P>(plan: P, options?: RunOptions): RunHandle<ResultOf<P>>;
  /**
   * Continues a journaled run: completed tasks are not run again, unfinished ones are, budgets
   * continue from what was spent. A run that had finished gives back its result. Throws
   * RunLockedError when another live process holds the run.
   */
  resume(runId: string, options?: ResumeOptions): RunHandle;
  /**
   * Runs the failed, skipped and cancelled tasks of a journaled run again, with fresh retries
   * (and what depends on them), as the same run: completed tasks keep their outputs and are not
   * sent again, budgets continue from what was spent (`budget` sets higher caps). Throws
   * RetryError (nothing to retry, a task named that is unknown or completed, a cap not above
   * what was spent), PlanValidationError (an invalid cap) and RunLockedError (the run is running).
   */
  retry(runId: string, options?: RetryOptions): RunHandle;
  /** The journaled runs, newest first (empty without a store). */
  runs(limit?: number): RunSummary[];
  /** Cancels runs still going and frees provider connections. */
  close(): Promise<void>;
}

/**
 * Creates a swarm: the providers, tools and clock its runs share.
 *
 * @example
 * const swarm = createSwarm();
 * const run = swarm.run(plan);
 * run.events.on('task:completed', (e) => console.log(e.taskId));
 * const result = await run.result;
 * await swarm.close();
 */
export function createSwarm(options: SwarmOptions = {}): Swarm {
  const env = options.env ?? process.env;
  /** A SWARMSTATE_* setting: from `env` when it names it, else from the process's environment. */
  const setting = (name: string): string | undefined => (options.env !== undefined && options.env[name] !== undefined ? options.env[name] : process.env[name]);
  /** The journal's file (or `memory`) when the swarm opens its own: the option, else SWARMSTATE_STORE, else the default. */
  const storeSpec = (): string | undefined => (typeof options.store === 'string' ? options.store : setting('SWARMSTATE_STORE') || undefined);
  const clock = options.clock ?? realClock;
  if (options.retention !== undefined) {
    try {
      checkPruneRule(options.retention);
    } catch (error) {
      throw new TypeError(`createSwarm({ retention }): ${(error as Error).message}`);
    }
  }
  /** Retention, once: called with the journal as soon as a run holds its lock in it. */
  let retain = (durable: Store): void => {
    retain = () => {};
    if (options.retention !== undefined) applyRetention(durable, options.retention);
  };
  const tools = new Map((options.tools ?? []).map((t) => [t.name, t]));
  // Every plan is checked against these names: one that names another function is refused.
  const functions = functionsOf(options.functions);
  const registry = new ProviderRegistry({ now: () => clock.now(), seed: options.seed ?? 0, ...(options.providers ? { overrides: options.providers } : {}) });

  let store: Store | undefined;
  const ownStore = typeof options.store !== 'object';
  const journals = new Set<{ failWith(e: StoreError): void }>();
  /** The journal, opened on first use (creating the swarm touches no disk). */
  const storeOf = (): Store | undefined => {
    if (options.store === false) return undefined;
    if (typeof options.store === 'object') return options.store;
    store ??= openStore(storeSpec(), { onError: (e) => journals.forEach((j) => j.failWith(e)) });
    return store;
  };
  const shared: SwarmShared = {
    options,
    env,
    clock,
    tools,
    registry,
    // Distributed runs: one connection to the call queue for every run of the swarm.
    remote: options.redis ? lazyRemote(options.redis, options.onRedisError) : undefined,
    storeOf,
    journals,
    owner: { id: nanoid(10), pid: process.pid, host: hostname() },
    live: new Set(),
  };
  const { owner, remote, live } = shared;
  const start = (plan: Plan, runId: string, seed: number, restore: JournaledState | undefined, deltas: boolean, baseDir?: string) =>
    startRun(shared, { plan, runId, seed, restore, deltas, ...(baseDir !== undefined ? { baseDir } : {}) });

  /** A journaled run that can be continued: it exists and was not refused at start. */
  const journaledRun = (runId: string, what: 'resume' | 'retry') => {
    const durable = storeOf();
    if (!durable) {
      const message = `this swarm has no store (store: false): there is nothing to ${what} from`;
      throw what === 'retry' ? new RetryError('NO_STORE', message, runId) : new Error(message);
    }
    const record = durable.getRun(runId);
    if (!record) {
      // One message for both, and the same code: a caller tells "no such run" apart from other refusals.
      const message = `no run ${runId} in ${durable.path}`;
      throw what === 'retry' ? new RetryError('RUN_NOT_FOUND', message, runId) : Object.assign(new Error(message), { code: 'RUN_NOT_FOUND' as const, runId });
    }
    const refused = refusalOf(record.result);
    if (refused) {
      throw new Error(`run ${runId} was refused at start and never ran (${refused.code}: ${refused.message}); there is nothing to ${what}: start it again once that is fixed`);
    }
    return { durable, record };
  };

  /** The journaled run's plan (its inline secrets put back) and seed. */
  const planOf = (record: RunRecord, given: unknown, budget?: PlanBudget): { plan: Plan; seed: number; baseDir?: string } => {
    let raw = record.plan;
    if (hasRedactions(raw)) {
      const source = given ?? (record.source ? readPlanFile(record.source) : undefined);
      if (source === undefined) {
        throw new Error(`run ${record.id} was started with inline secrets in its plan, which are never stored: pass the plan again (resume(runId, { plan }) or --plan)`);
      }
      raw = unredactPlan(raw, source);
    }
    // A map's items file is read relative to the plan file the run was started from.
    const baseDir = record.source ? dirname(record.source) : undefined;
    // The caps set by the run's retries, the latest last, then this retry's.
    for (const session of retrySessionsOf(record.options)) raw = withBudget(raw, session.budget);
    raw = withBudget(raw, budget);
    const plan = parsePlan(raw, { env, tools: tools.keys(), functions, ...(baseDir !== undefined ? { baseDir } : {}) });
    if (remote) checkDistributable(plan, tools.size);
    // The run's own seed, as it started: the same jitter and route draws as if never interrupted.
    const recorded = (record.options as { seed?: unknown } | null)?.seed;
    return { plan, seed: typeof recorded === 'number' ? recorded : (options.seed ?? 0), ...(baseDir !== undefined ? { baseDir } : {}) };
  };

  return {
    run(raw, runOptions = {}) {
      // A map's items file is read relative to the plan file (else the working directory).
      const baseDir = runOptions.source !== undefined ? dirname(runOptions.source) : undefined;
      const plan = parsePlan(raw, { env, tools: tools.keys(), functions, ...(baseDir !== undefined ? { baseDir } : {}) });
      if (remote) checkDistributable(plan, tools.size);
      const runId = newRunId();
      const durable = storeOf();
      if (durable) {
        durable.createRun({
          id: runId,
          plan: redactPlan(plan),
          ...(runOptions.source !== undefined ? { source: runOptions.source } : {}),
          options: { seed: options.seed ?? 0 },
          tasksTotal: plan.tasks.length,
          createdAt: Date.now(),
        });
        takeLock(durable, runId, owner);
        retain(durable);
      }
      // The result's outputs are typed from the plan as written (structured ones are parsed values).
      return start(plan, runId, options.seed ?? 0, undefined, runOptions.deltas ?? options.deltas === true, baseDir) as RunHandle<never>;
    },

    resume(runId, resumeOptions = {}) {
      const { durable, record } = journaledRun(runId, 'resume');
      if (FINISHED.has(record.status)) return finishedHandle(runId, record.result as RunResult);
      const { plan, seed, baseDir } = planOf(record, resumeOptions.plan);
      takeLock(durable, runId, owner);
      try {
        retain(durable);
        return start(plan, runId, seed, stateOf(durable, runId, record.options), resumeOptions.deltas ?? options.deltas === true, baseDir);
      } catch (error) {
        durable.releaseLock(runId, owner.id);
        throw error;
      }
    },

    retry(runId, retryOptions = {}) {
      const only: unknown = retryOptions.tasks;
      if (only !== undefined && !(Array.isArray(only) && only.every((t) => typeof t === 'string'))) {
        throw new TypeError(`retry(runId, { tasks }): tasks must be an array of task ids (strings), got ${JSON.stringify(only)?.slice(0, 80) ?? typeof only}`);
      }
      const { durable, record } = journaledRun(runId, 'retry');
      const budget = retryOptions.budget;
      const { plan, seed, baseDir } = planOf(record, retryOptions.plan, budget);
      // Taken first: a run that is running is refused for that, whatever else it is.
      takeLock(durable, runId, owner);
      try {
        retain(durable);
        if (budget) checkBudgetAboveSpent(runId, budget, durable.spent(runId));
        const rows = durable.loadTasks(runId);
        const tasks = tasksToRetry(runId, plan.tasks, rows, retryOptions.tasks);
        // The journal first, durably: a crash from here on leaves a run that a resume finishes
        // as this retry would (the tasks reopened, their earlier attempts not counted, its budget).
        const attempts = new Map(rows.map((r) => [r.taskId, r.attempts]));
        const session: RetrySession = { at: Date.now(), tasks, from: Object.fromEntries(tasks.map((id) => [id, attempts.get(id) ?? 0])) };
        // As checked: the two caps, nothing else the caller's object had.
        if (budget) session.budget = { ...(budget.usd !== undefined ? { usd: budget.usd } : {}), ...(budget.perModel !== undefined ? { perModel: budget.perModel } : {}) };
        const recorded = { ...(record.options as Record<string, unknown> | null), retries: [...retrySessionsOf(record.options), session] };
        durable.reopenRun(runId, recorded, tasks, session.at);
        return start(plan, runId, seed, { ...stateOf(durable, runId, recorded), retried: tasks.length }, retryOptions.deltas ?? options.deltas === true, baseDir);
      } catch (error) {
        durable.releaseLock(runId, owner.id);
        throw error;
      }
    },

    runs(limit) {
      if (options.store === false) return [];
      // Listing writes nothing: a journal this swarm has not opened is opened read-only for it.
      if (typeof options.store === 'object' || store !== undefined) {
        const durable = storeOf()!;
        return withLiveness(durable, durable.listRuns(limit));
      }
      const reader = openStoreToRead(storeSpec());
      if (!reader) return [];
      try {
        return withLiveness(reader, reader.listRuns(limit));
      } finally {
        reader.close();
      }
    },

    async close() {
      for (const run of live) run.cancel('swarm closed');
      await Promise.allSettled([...live].map((r) => r.result));
      await registry.close();
      if (ownStore) store?.close();
      await remote?.close();
      await Promise.allSettled(Object.values(options.providers ?? {}).map((p) => (p as Partial<Provider>).close?.()));
    },
  };
}

/** Run ids: letters and digits only (a leading "-" would read as an option on the command line). */
const newRunId = customAlphabet('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', 12);

export type { ErrorInfo, RunResult };

/** The names of `createSwarm({ functions })`, each checked to be a function. */
function functionsOf(given: SwarmFunctions | undefined): string[] {
  if (given === undefined) return [];
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new TypeError(`createSwarm({ functions }): functions is ${kindOf(given)}: give an object of functions by name ({ fetchOrders: async (ctx) => ... })`);
  }
  for (const [name, fn] of Object.entries(given)) {
    if (typeof fn !== 'function') throw new TypeError(`createSwarm({ functions }): functions.${name} is ${kindOf(fn)}, not a function`);
  }
  return Object.keys(given);
}
