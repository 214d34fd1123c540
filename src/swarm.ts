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
import type { ErrorInfo } from '../machines/protocol.js';
import type { RunResult } from '../machines/tasks/results.js';
import { realClock } from '../machines/clock.js';
import { ApprovalError, approveJournaled, decisionOf } from './run/approvals.js';
import { parsePlan, type Plan } from './plan/index.js';
import type { SwarmFunctions } from './fn/types.js';
import { kindOf } from './plan/issues.js';
import type { PlanBudget } from './plan/planTypes.js';
import { ProviderRegistry } from './providers/registry.js';
import type { Provider } from './providers/types.js';
import { refusalOf } from './durable.js';
import { hasRedactions, redactPlan, unredactPlan } from './planSecrets.js';
import { openStore, openStoreToRead, type RunRecord, type Store, type StoreError } from './store/index.js';
import { applyRetention, checkPruneRule } from './store/prune.js';
import { lazyRemote } from './distributed/lazy.js';
import { checkBudgetAboveSpent, RetryError, retrySessionsOf, tasksToRetry, withBudget, type RetrySession } from './run/retry.js';
import { FINISHED, finishedHandle, readPlanFile, stateOf, type JournaledState } from './run/journaled.js';
import { takeLock, withLiveness } from './run/lock.js';
import { startRun, type SwarmShared } from './run/start.js';
import { checkDistributable } from './run/transport.js';
import { toolDefinitions } from './tools/define.js';

export { RunLockedError } from './run/lock.js';

export type { RetryOptions, ResumeOptions, RunEvents, RunEventStream, RunHandle, RunOptions, Swarm, SwarmOptions, TimedRunEvent } from './swarmTypes.js';
import type { RunHandle, RunOptions, Swarm, SwarmOptions } from './swarmTypes.js';


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
  // Every definition checked and made JSON Schema now: a wrong one is refused here, not at its first call.
  const tools = new Map(toolDefinitions(options.tools).map((t) => [t.name, t]));
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
  const start = (plan: Plan, runId: string, seed: number, restore: JournaledState | undefined, opts: RunOptions, baseDir?: string) =>
    startRun(shared, { plan, runId, seed, restore, deltas: opts.deltas ?? options.deltas === true, holdApprovals: opts.holdApprovals === true, ...(baseDir !== undefined ? { baseDir } : {}) });

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
      return start(plan, runId, options.seed ?? 0, undefined, runOptions, baseDir) as RunHandle<never>;
    },

    resume(runId, resumeOptions = {}) {
      const { durable, record } = journaledRun(runId, 'resume');
      if (FINISHED.has(record.status)) return finishedHandle(runId, record.result as RunResult);
      const { plan, seed, baseDir } = planOf(record, resumeOptions.plan);
      takeLock(durable, runId, owner);
      try {
        retain(durable);
        return start(plan, runId, seed, stateOf(durable, runId, record.options), resumeOptions, baseDir);
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
        return start(plan, runId, seed, { ...stateOf(durable, runId, recorded), retried: tasks.length }, retryOptions, baseDir);
      } catch (error) {
        durable.releaseLock(runId, owner.id);
        throw error;
      }
    },

    approve(runId, taskId, decision, by = 'code') {
      const here = [...live].find((r) => r.id === runId);
      if (here) return here.approve(taskId, decision, by);
      const durable = storeOf();
      if (!durable) throw new ApprovalError('NO_STORE', `this swarm has no store (store: false): run ${runId} is not running here, and there is no journal to decide in`);
      approveJournaled(durable, runId, taskId, decisionOf(decision, by, Date.now(), `approve("${taskId}")`));
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
