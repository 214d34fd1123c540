/**
 * Wires one run's actor system. Read top to bottom, this is the flow of a run:
 *
 * 1. the plan is validated (every problem at once) and resolved: keys from the environment into
 *    the keyring (ids only leave it), models into routes, tasks into supervised tasks with their
 *    critical-path rank;
 * 2. the machines get their effects with `machine.provide(...)`: `callModel` (a provider call
 *    with the lease's key and an AbortSignal), `executeTool` (a registered tool's handler), and
 *    `report` (the public event stream);
 * 3. the supervisor actor starts with the clock and inspector given to createSwarm, and its
 *    output is the run's result.
 */
import { createEmitter, type Emitter } from './util/emitter.js';
import { customAlphabet, nanoid } from 'nanoid';
import type { CacheWarmEvent } from '../machines/protocol.js';
import type { PlanExpansion, PlanExpansionInput } from '../machines/supervisor.machine.js';
import { PlanExpander } from './planner.js';
import { createActor, fromPromise, toPromise, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { agentMachine } from '../machines/agent/index.js';
import { nowOf, realClock, type TimedClock } from '../machines/clock.js';
import { keyMachine } from '../machines/key.machine.js';
import { poolMachine } from '../machines/pool.machine.js';
import { breakerMachine } from '../machines/breaker.machine.js';
import { toolBusMachine } from '../machines/toolBus.machine.js';
import { ledgerMachine } from '../machines/ledger.machine.js';
import { priceOf } from './cost/prices.js';
import type { DispatchDecision, DispatchInfo, ToolCallDecision, ToolCallInfo, ErrorInfo, ModelCallInput, ModelCallOutput, RunEvent, ToolBatchInput, ToolExecInput, ToolResult } from '../machines/protocol.js';
import type { RunResult } from '../machines/runTable.js';
import { supervisorMachine, type SupervisorInput } from '../machines/supervisor.machine.js';
import { costOf } from './cost/price.js';
import { checkOutput, parsedOutput } from './plan/structured.js';
import { textOf } from '../machines/tokens.js';
import { Keyring } from './keys.js';
import { parsePlan, PlanValidationError, type Plan, type ResultOf } from './plan/index.js';
import { ProviderError, asProviderError } from './providers/errors.js';
import { ProviderRegistry, type ProviderObject } from './providers/registry.js';
import { fromWire, toolNaming, toWire } from './providers/toolNames.js';
import type { Provider, ToolSpec } from './providers/types.js';
import { resolveRun, samplingOf, targetOfModel, type BreakerOptions, type Sampling } from './resolve.js';
import { decisionOf, loadHookModule, toolDecisionOf, type BeforeDispatch, type BeforeToolCall, type Hooks } from './hooks.js';
import type { ToolDefinition } from './tools/local.js';
import { RunTools } from './tools/registry.js';
import { hasRedactions, inlineSecretPaths, redactPlan, refusalOf, restoreOf, RunJournal, settingSecrets, unredactPlan } from './durable.js';
import { openStore, openStoreToRead, type AttemptRow, type RunRecord, type RunSummary, type Spent, type Store, type StoreError, type TaskRow } from './store/index.js';
import { DeltaStream } from './run/deltas.js';
import { RetryError, retryBasesOf, retrySessionsOf, tasksToRetry, type RetrySession } from './run/retry.js';
import { readFileSync } from 'node:fs';
import { lazyRemote, unwrap, type Remote } from './distributed/lazy.js';
import type { BatchJob, ModelJob, RunConfig, ToolJob } from './distributed/protocol.js';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import type { Tracer } from '@opentelemetry/api';
import { defaultTracer, RunTracer } from './telemetry.js';

/** The public event stream of a run: one entry per RunEvent type. */
/** A run event as the stream carries it: stamped with the time (ms, the swarm's clock). */
export type TimedRunEvent = RunEvent & { at: number };
export type RunEvents = { [K in RunEvent['type']]: Extract<RunEvent, { type: K }> & { at: number } };

export interface SwarmOptions {
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
  /** Where `{ "env": NAME }` keys are read. Default `process.env`. */
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
   * Distributed runs: this process coordinates (the DAG, the journal, the budget, the key and
   * breaker actors) and every model and tool call goes to `swarmstate worker` processes through
   * BullMQ on this Redis (`redis://host:6379`). Keys must come from the environment (`{ env }`):
   * each worker reads its own. Without it, everything runs in this process. Needs the optional
   * packages bullmq and ioredis: without them createSwarm throws MissingPackageError.
   */
  redis?: string;
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
}

/** Another process is running (or resuming) this run. */
export class RunLockedError extends Error {
  readonly code = 'RUN_LOCKED';
  constructor(
    readonly runId: string,
    readonly holder: { pid: number; host: string; since: number },
  ) {
    super(`run ${runId} is already being run by process ${holder.pid} on ${holder.host} (since ${new Date(holder.since).toISOString()}); not starting it twice`);
    this.name = 'RunLockedError';
  }
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
   * sent again, budgets continue from what was spent. Throws RetryError (nothing to retry, a
   * task named that is unknown or completed) and RunLockedError (the run is running).
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
  const clock = options.clock ?? realClock;
  const tools = new Map((options.tools ?? []).map((t) => [t.name, t]));
  const registry = new ProviderRegistry({ now: () => clock.now(), seed: options.seed ?? 0, ...(options.providers ? { overrides: options.providers } : {}) });
  const live = new Set<RunHandle>();

  let store: Store | undefined;
  const ownStore = typeof options.store !== 'object';
  /** The journal, opened on first use (creating the swarm touches no disk). */
  const storeOf = (): Store | undefined => {
    if (options.store === false) return undefined;
    if (typeof options.store === 'object') return options.store;
    store ??= openStore(options.store ?? (env.SWARMSTATE_STORE || undefined), { onError: (e) => journals.forEach((j) => j.failWith(e)) });
    return store;
  };
  const journals = new Set<{ failWith(e: StoreError): void }>();
  const owner = { id: nanoid(10), pid: process.pid, host: hostname() };
  /** Distributed runs: one connection to the call queue for every run of the swarm. */
  const remote = options.redis ? lazyRemote(options.redis) : undefined;

  /** Starts a run (new, or resumed from its journal); the plan is valid and the run locked. */
  const start = (plan: Plan, runId: string, seed: number, restore: JournaledState | undefined, deltas = options.deltas === true, baseDir?: string): RunHandle => {
    const events = createEmitter<RunEvents>();
    const durable = storeOf();
    runningHere.add(runId);
    // Every secret of the run, known before anything can echo one: the tool servers' settings now,
    // the provider keys as resolveRun adds them (before the first event).
    const keyring = new Keyring();
    for (const { path, value } of settingSecrets(plan, env)) keyring.redactor.addSetting(value, path);
    const redact = <T>(value: T): T => keyring.redactor.redactDeep(value);
    const journal = durable ? new RunJournal(durable, runId, redact) : undefined;
    const journalRef = journal ? { failWith: (e: StoreError) => journal.fail(e) } : undefined;
    if (journalRef) journals.add(journalRef);
    // Made here, synchronously in run(): the caller's active span becomes the run span's parent.
    const tracing = options.tracer === false ? undefined : new RunTracer(options.tracer ?? defaultTracer(), runId, plan);
    const report = (_: unknown, raw: RunEvent) => {
      // Events go to the journal, the spans and to listeners (the CLI's --events, --json, the report): out.
      const event = redact(raw);
      // Streamed text is for the listeners of this life only: the output is journaled whole.
      if (event.type !== 'task:delta') journal?.record(event);
      if (tracing?.active) tracing.record(event, clock.now());
      // Nobody listening: no stamped copy to make (the hot path of a big run).
      if (!events.all.has(event.type) && !events.all.has('*')) return;
      try {
        events.emit(event.type, { ...event, at: clock.now() } as never);
      } catch {
        // A listener that throws must not take the run down with it.
      }
    };
    let actor: Actor<typeof supervisorMachine> | undefined;
    let cancelled: string | undefined;
    const heartbeat = durable ? setInterval(() => {
      try {
        // Another process took the lock over (this one stalled past the stale limit): stop, so
        // the run never goes on in two places.
        if (!durable.heartbeat(runId, owner.id)) {
          cancelled = 'lost the run\'s lock to another process';
          actor?.send({ type: 'CANCEL', reason: cancelled });
        }
      } catch {
        // A journal that fails stops the run through its next write.
      }
    }, 10_000) : undefined;
    heartbeat?.unref();
    if (journal) {
      // A journal that cannot write stops the run: nothing more is sent that it could not record.
      journal.onFailure = (error) => {
        cancelled = `the run's journal cannot be written: ${error.message}`;
        actor?.send({ type: 'CANCEL', reason: cancelled });
      };
    }

    // Started on the next microtask at the earliest, so listeners attached right after run()
    // see every event, `run:started` included. MCP servers connect first: a task naming a tool
    // its server does not have fails the run before anything is sent.
    /** Whether the supervisor started: a new run refused before that is journaled as failed. */
    let started = false;
    const result = (async () => {
      await Promise.resolve();
      const runTools = await RunTools.open(plan, [...tools.values()], env);
      const planHooks = plan.hooks ? await loadHookModule(plan.hooks.module, process.cwd()).catch(async (error: unknown) => {
        await runTools.close();
        throw new PlanValidationError([{ path: 'hooks.module', message: (error as Error).message }]);
      }) : undefined;
      const hooks = [options.hooks?.beforeDispatch, planHooks?.beforeDispatch].filter((h): h is BeforeDispatch => h !== undefined);
      const toolHooks = [options.hooks?.beforeToolCall, planHooks?.beforeToolCall].filter((h): h is BeforeToolCall => h !== undefined);
      try {
        const problems = runTools.problems(plan);
        if (problems.length > 0) throw new PlanValidationError(problems);
        const busTools = runTools.busTools();
        const input = resolveRun(plan, {
          runId,
          keyring,
          env,
          busTools,
          toolTokens: (names) => runTools.specTokens(names),
          seed,
          backoff: options.backoff ?? { baseMs: 500, maxMs: 30_000 },
          ...(options.breaker ? { breaker: options.breaker } : {}),
          ...(options.shareTools === false ? { shareTools: false } : {}),
          ...(hooks.length > 0 ? { hooked: true } : {}),
          ...(toolHooks.length > 0 ? { toolHooked: true } : {}),
        });
        const expander = new PlanExpander(
          plan,
          { toolTokens: (names) => runTools.specTokens(names), toolNames: busTools.map((t) => t.name), ...(baseDir !== undefined ? { baseDir } : {}) },
          journal ? (planner, specs) => journal.acceptSubtasks(planner, specs) : undefined,
        );
        if (restore) {
          input.restore = restoreOf(restore.rows, restore.attempts, restore.spent.byTask, expander, new Set(plan.tasks.map((t) => t.id)), restore.retryBases);
          if (input.budgets) input.budgets.spent = { runUsd: restore.spent.total, byTask: restore.spent.byTask, byModel: restore.spent.byModel };
        }
        const keyIdsOf = new Map(input.providers.map((p) => [p.name, p.keys.map((k) => k.keyId)]));
        // A distributed run makes no call here: no adapters (and no embedded simulator) in the coordinator.
        const adapters = remote ? new Map<string, Provider>() : registry.forPlan(plan, (name) => keyIdsOf.get(name)!.map((id) => keyring.get(id).secret).filter((x) => x !== ''));
        const budgetLeft = () => {
          const book = actor?.system.get('ledger')?.getSnapshot().context.book as { run(): { limitUsd?: number; spentUsd: number; reservedUsd: number } } | undefined;
          const run = book?.run();
          return run?.limitUsd === undefined ? undefined : run.limitUsd - run.spentUsd - run.reservedUsd;
        };
        const beforeDispatch = dispatchHook(hooks, plan, budgetLeft);
        const readOnly = new Set(busTools.filter((t) => t.readOnly).map((t) => t.name));
        const machine = provideEffects(report, {
          keyring,
          adapters,
          runTools,
          beforeDispatch,
          beforeToolCall: toolHook(toolHooks),
          expander,
          journal,
          readOnly,
          deltas,
          sampling: (name) => samplingOf(name === undefined ? undefined : plan.models[name]),
          remote: remote ? { calls: remote, runId, config: { providers: plan.providers, tools: plan.tools } } : undefined,
        });
        actor = createActor(machine, { input, clock, systemId: 'supervisor', ...(options.inspect ? { inspect: options.inspect } : {}) });
        report(null, {
          type: 'run:started',
          runId,
          tasks: input.tasks.length + (input.restore?.expansions.reduce((n, e) => n + e.tasks.length, 0) ?? 0),
          models: Object.fromEntries(
            Object.entries(plan.models).map(([name, m]) => {
              const price = priceOf(m.model, m.price);
              return [name, { provider: m.provider, model: m.model, ...(price ? { price } : {}) }];
            }),
          ),
          keys: Object.fromEntries(input.providers.flatMap((p) => p.keys.map((k) => [k.keyId, k.limits]))),
          maxInFlight: input.maxInFlight,
          ...(plan.budget?.usd !== undefined ? { budgetUsd: plan.budget.usd } : {}),
          ...depsOf([...input.tasks, ...(input.restore?.expansions.flatMap((e) => e.tasks) ?? [])]),
          ...beforeOf(input.restore?.tasks),
          ...(input.restore ? { resumed: true, alreadyCompleted: input.restore.tasks.filter((t) => t.status === 'completed').length } : {}),
          ...(restore?.retried !== undefined ? { retried: restore.retried } : {}),
        });
        started = true;
        actor.start();
        if (cancelled !== undefined) actor.send({ type: 'CANCEL', reason: cancelled });
        const out = redact(withParsedOutputs(priced(await toPromise(actor), plan), plan));
        if (journal?.failure) throw journal.failure;
        journal?.finish(out.status, out);
        if (journal?.failure) throw journal.failure;
        return out;
      } finally {
        await runTools.close();
      }
    })().catch((error: unknown) => {
      // Errors reach the caller's output: a tool server's or a provider's words may hold a secret.
      if (error instanceof Error) error.message = keyring.redact(error.message);
      tracing?.close(clock.now(), error);
      // A new run refused before anything ran (a tool server that does not connect, a tool it
      // lacks): failed, with why, not left `running` (listed as interrupted, resumable for nothing).
      // A resume refused so keeps its journal as it was: its work so far is still worth resuming.
      if (!started && !restore) journal?.refusedAtStart(error);
      throw error;
    }).finally(() => {
      tracing?.close(clock.now());
      live.delete(handle);
      runningHere.delete(runId);
      remote?.forgetRun(runId);
      if (heartbeat) clearInterval(heartbeat);
      if (journalRef) journals.delete(journalRef);
      try {
        durable?.releaseLock(runId, owner.id);
      } catch {
        // A broken journal has no lock to give back; the next resume takes it over (dead pid).
      }
    });

    const handle: RunHandle = {
      id: runId,
      events,
      result,
      get actor() {
        return actor;
      },
      cancel: (reason) => {
        cancelled = reason ?? 'cancelled by the caller';
        actor?.send({ type: 'CANCEL', reason: cancelled });
      },
    };
    live.add(handle);
    return handle;
  };

  /** Takes the run's lock for this process, or says who holds it. */
  const lock = (durable: Store, runId: string) => {
    if (runningHere.has(runId)) throw new RunLockedError(runId, { pid: process.pid, host: owner.host, since: Date.now() });
    let got = durable.acquireLock(runId, owner);
    // Held by this very process for a run it no longer runs (its journal broke before it could
    // let go): stale, take it over.
    if (!got.ok && got.holder.pid === process.pid && got.holder.host === owner.host && !runningHere.has(runId)) got = durable.acquireLock(runId, owner, -1);
    if (!got.ok) throw new RunLockedError(runId, got.holder);
  };

  /** A journaled run that can be continued: it exists and was not refused at start. */
  const journaledRun = (runId: string, what: 'resume' | 'retry') => {
    const durable = storeOf();
    if (!durable) {
      const message = `this swarm has no store (store: false): there is nothing to ${what} from`;
      throw what === 'retry' ? new RetryError('NO_STORE', message, runId) : new Error(message);
    }
    const record = durable.getRun(runId);
    if (!record) {
      const message = `no run "${runId}" in ${durable.path}`;
      throw what === 'retry' ? new RetryError('RUN_NOT_FOUND', message, runId) : new Error(message);
    }
    const refused = refusalOf(record.result);
    if (refused) {
      throw new Error(`run ${runId} was refused at start and never ran (${refused.code}: ${refused.message}); there is nothing to ${what}: start it again once that is fixed`);
    }
    return { durable, record };
  };

  /** The journaled run's plan (its inline secrets put back) and seed. */
  const planOf = (record: RunRecord, given: unknown): { plan: Plan; seed: number; baseDir?: string } => {
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
    const plan = parsePlan(raw, { env, tools: tools.keys(), ...(baseDir !== undefined ? { baseDir } : {}) });
    if (remote) checkDistributable(plan, tools.size);
    // The run's own seed, as it started: the same jitter and route draws as if never interrupted.
    const recorded = (record.options as { seed?: unknown } | null)?.seed;
    return { plan, seed: typeof recorded === 'number' ? recorded : (options.seed ?? 0), ...(baseDir !== undefined ? { baseDir } : {}) };
  };

  return {
    run(raw, runOptions = {}) {
      // A map's items file is read relative to the plan file (else the working directory).
      const baseDir = runOptions.source !== undefined ? dirname(runOptions.source) : undefined;
      const plan = parsePlan(raw, { env, tools: tools.keys(), ...(baseDir !== undefined ? { baseDir } : {}) });
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
        lock(durable, runId);
      }
      // The result's outputs are typed from the plan as written (structured ones are parsed values).
      return start(plan, runId, options.seed ?? 0, undefined, runOptions.deltas ?? options.deltas === true, baseDir) as RunHandle<never>;
    },

    resume(runId, resumeOptions = {}) {
      const { durable, record } = journaledRun(runId, 'resume');
      if (FINISHED.has(record.status)) return finishedHandle(runId, record.result as RunResult);
      const { plan, seed, baseDir } = planOf(record, resumeOptions.plan);
      lock(durable, runId);
      try {
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
      const { plan, seed, baseDir } = planOf(record, retryOptions.plan);
      // Taken first: a run that is running is refused for that, whatever else it is.
      lock(durable, runId);
      try {
        const rows = durable.loadTasks(runId);
        const tasks = tasksToRetry(runId, plan.tasks, rows, retryOptions.tasks);
        // The journal first, durably: a crash from here on leaves a run that a resume finishes
        // as this retry would (the tasks reopened, their earlier attempts not counted).
        const attempts = new Map(rows.map((r) => [r.taskId, r.attempts]));
        const session: RetrySession = { at: Date.now(), tasks, from: Object.fromEntries(tasks.map((id) => [id, attempts.get(id) ?? 0])) };
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
      const reader = openStoreToRead(options.store ?? (env.SWARMSTATE_STORE || undefined));
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

/** What a resume (or a retry) restores a run from. */
interface JournaledState {
  rows: TaskRow[];
  attempts: AttemptRow[];
  spent: Spent;
  /** Per task sent back by a retry: the attempts it had made before. */
  retryBases: Map<string, number>;
  /** A retry: how many tasks it sent back to pending. */
  retried?: number;
}

function stateOf(store: Store, runId: string, runOptions: unknown): JournaledState {
  return { rows: store.loadTasks(runId), attempts: store.loadAttempts(runId), spent: store.spent(runId), retryBases: retryBasesOf(runOptions) };
}

interface RunEffects {
  keyring: Keyring;
  adapters: Map<string, Provider>;
  runTools: RunTools;
  beforeDispatch: ReturnType<typeof dispatchHook>;
  beforeToolCall: ReturnType<typeof toolHook>;
  expander: PlanExpander;
  journal: RunJournal | undefined;
  /** Tools whose calls have no side effect (their results are not journaled). */
  readOnly: ReadonlySet<string>;
  /** Turns stream their text as `task:delta` events. */
  deltas: boolean;
  /** A distributed run: calls go to the workers as BullMQ jobs. */
  remote: { calls: Remote; runId: string; config: RunConfig } | undefined;
  /** The sampling settings of a plan model, by its name. */
  sampling: (modelName: string | undefined) => Sampling;
}

/** Run ids: letters and digits only (a leading "-" would read as an option on the command line). */
const newRunId = customAlphabet('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', 12);

/** A run journaled as `running` whose lock no live process holds died (or never started): `interrupted`. */
function withLiveness(store: Store, runs: RunSummary[]): RunSummary[] {
  return runs.map((r) => (r.status === 'running' && !runningHere.has(r.id) && !store.isHeld(r.id) ? { ...r, status: 'interrupted' as const } : r));
}

/** How much later than measured a distributed call is taken to have reached the server (key windows err late). */
const SENT_AT_MARGIN_MS = 100;

/** Runs this process is running now (a lock it holds for any other run is stale). */
const runningHere = new Set<string>();

/** Run statuses a resume does not run again. */
const FINISHED = new Set(['completed', 'partial', 'failed', 'budget_exceeded']);

/** A distributed run's keys are read by each worker from its own environment: no inline key. */
function checkDistributable(plan: Plan, localTools: number): void {
  // Keys and tool servers' settings travel to the workers (settings in every job): nothing inline that may be a secret.
  const issues = inlineSecretPaths(plan).map((path) => ({
    path,
    message: path.startsWith('providers.')
      ? 'a distributed run (--redis) needs keys from the environment ({"env": "NAME"}): each worker reads its own'
      : 'a distributed run (--redis) sends tool server settings through Redis: give this value as {"env": "NAME"} (each worker reads its own)',
  }));
  for (const [name, p] of Object.entries(plan.providers)) {
    if (p.type === 'custom' || p.type === 'ai-sdk') issues.push({ path: `providers.${name}.type`, message: `a distributed run (--redis) makes its calls on the workers: a "${p.type}" provider is an object in this process and cannot go there` });
  }
  if (localTools > 0) issues.push({ path: 'tools', message: 'a distributed run (--redis) runs tools on the workers: in-process tools (createSwarm({ tools })) cannot go there; serve them from an MCP server' });
  if (issues.length > 0) throw new PlanValidationError(issues);
}

/** A handle for a run that had already finished: its result as recorded. */
/** The DAG for `run:started`: every task with its dependencies, in plan order. */
function depsOf(tasks: readonly { id: string; deps: readonly string[] }[]): { deps?: Record<string, string[]> } {
  return tasks.length > 0 ? { deps: Object.fromEntries(tasks.map((t) => [t.id, [...t.deps]])) } : {};
}

/** For `run:started` on a resume or retry: how the tasks that had ended before ended. */
function beforeOf(tasks: readonly { id: string; status: string }[] | undefined): { before?: Record<string, 'completed' | 'failed' | 'skipped'> } {
  const ended = (tasks ?? []).filter((t): t is { id: string; status: 'completed' | 'failed' | 'skipped' } => t.status !== 'pending');
  return ended.length > 0 ? { before: Object.fromEntries(ended.map((t) => [t.id, t.status])) } : {};
}

function finishedHandle(runId: string, result: RunResult): RunHandle {
  return { id: runId, events: createEmitter<RunEvents>(), result: Promise.resolve(result), cancel: () => {}, actor: undefined };
}

function readPlanFile(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The tool hooks as the agents' `beforeToolCall` actor: per call, the first that does not allow decides. */
function toolHook(hooks: BeforeToolCall[]) {
  return fromPromise<ToolCallDecision[], ToolCallInfo[]>(({ input }) =>
    Promise.all(
      input.map(async (call): Promise<ToolCallDecision> => {
        for (const hook of hooks) {
          let decision: ToolCallDecision;
          try {
            decision = toolDecisionOf(await hook(call));
          } catch (error) {
            return { action: 'deny', reason: `the hook threw: ${(error as Error)?.message ?? String(error)}` };
          }
          if (decision.action !== 'allow') return decision;
        }
        return { action: 'allow' };
      }),
    ),
  );
}

/** The hooks as the agents' `beforeDispatch` actor: each in turn; the first that does not allow decides. */
function dispatchHook(hooks: BeforeDispatch[], plan: Plan, budgetLeft: () => number | undefined) {
  return fromPromise<DispatchDecision, DispatchInfo>(async ({ input }) => {
    const left = budgetLeft();
    const info: DispatchInfo = left === undefined ? input : { ...input, budgetLeftUsd: left };
    for (const hook of hooks) {
      let decision: DispatchDecision;
      try {
        decision = decisionOf(await hook(info), (name) => (plan.models[name] ? targetOfModel(plan, name, input.maxTokens) : undefined));
        if (decision.action === 'rewrite' && decision.maxTokens !== undefined && decision.maxTokens > input.maxTokens) {
          decision = { action: 'deny', reason: `the hook raised maxTokens from ${input.maxTokens} to ${decision.maxTokens}: a rewrite may only lower it` };
        }
      } catch (error) {
        return { action: 'deny', reason: `the hook threw: ${(error as Error)?.message ?? String(error)}` };
      }
      if (decision.action !== 'allow') return decision;
    }
    return { action: 'allow' };
  });
}

/**
 * The machines with this run's effects: a model call through the provider's adapter with the
 * lease's key, tool calls through the run's tools, and every report into the event stream.
 */
function provideEffects(report: (_: unknown, event: RunEvent) => void, { keyring, adapters, runTools, beforeDispatch, beforeToolCall, expander, journal, readOnly, deltas, remote, sampling }: RunEffects) {
  const callModel = fromPromise<ModelCallOutput, ModelCallInput>(async ({ input: call, signal, system, self }) => {
    const facts = { provider: call.provider, model: call.model, keyId: call.keyId };
    try {
      // The spend of earlier calls is on disk before this one leaves (a resumed budget must not undercount).
      journal?.beforeCall();
      const naming = toolNaming(call.tools);
      const wire = toWire(naming, call.tools.flatMap((name) => runTools.spec(name) ?? []), call.messages);
      const meta = { taskId: call.taskId, attempt: call.attempt, turn: call.turn };
      const output = call.output?.schema ? { output: { name: outputFormatName(call.taskId), schema: call.output.schema } } : {};
      const stream = deltas && !call.summary ? new DeltaStream(keyring.redactor, (text) => report(null, { type: 'task:delta', ...meta, text })) : undefined;
      if (remote) {
        // A distributed run: a worker makes the call with this lease's key (its secret from the
        // worker's own environment); the outcome comes back through the job.
        const job: ModelJob = {
          kind: 'model',
          runId: remote.runId,
          config: remote.config,
          provider: call.provider,
          model: call.model,
          messages: wire.messages,
          tools: wire.tools,
          maxTokens: call.maxTokens,
          ...sampling(call.modelName),
          keyId: call.keyId,
          meta,
          ...output,
          ...(call.system !== undefined ? { system: call.system } : {}),
        };
        const outcome = unwrap(await remote.calls.call(job, signal)) as { model: ModelCallOutput; callMs?: number };
        const out = fromWire(naming, outcome.model);
        // The call may have waited in the queue for a worker: the key's request bucket counts it
        // from when it really left (the worker's own measure of the call, so no clock is compared).
        // A margin keeps the estimate on the late side: a server counts arrivals by its own clock.
        if (outcome.callMs !== undefined) out.sentAt = nowOf(self) - outcome.callMs + SENT_AT_MARGIN_MS;
        stream?.end(textOf(out.content));
        return withVerdict(call, keyring.redactor.redactDeep(out));
      }
      const reply = await adapters.get(call.provider)!.call({
        provider: call.provider,
        model: call.model,
        messages: wire.messages,
        tools: wire.tools,
        maxTokens: call.maxTokens,
        ...sampling(call.modelName),
        key: keyring.get(call.keyId),
        signal,
        meta,
        ...output,
        ...(call.system !== undefined ? { system: call.system } : {}),
        ...(stream ? { onText: (text: string) => stream.push(text) } : {}),
        // A cache leader's response has begun: its prefix is readable, the tasks held behind it can go.
        ...(call.cacheLead
          ? { onResponseStart: () => system.get('supervisor')?.send({ type: 'CACHE.WARM', taskId: call.taskId, attempt: call.attempt } satisfies CacheWarmEvent) }
          : {}),
      });
      const out = fromWire(naming, reply);
      stream?.end(textOf(out.content));
      // A reply that echoes a key (a hostile or broken endpoint) does not carry it into the run.
      return withVerdict(call, keyring.redactor.redactDeep(out));
    } catch (error) {
      const e = asProviderError(error, facts);
      // Servers echo keys back in error bodies: nothing leaves with a secret in it.
      throw new ProviderError(e.code, keyring.redact(e.message), e.toJSON());
    }
  });
  /** One tool execution: here, or (a distributed run) on a worker. */
  const execute = async (name: string, args: unknown, signal: AbortSignal, idempotencyKey?: string): Promise<string> => {
    // What a tool says goes to a model and to the journal: no secret of the run in it, result or error.
    try {
      return keyring.redact(await executeHere(name, args, signal, idempotencyKey));
    } catch (error) {
      if (error instanceof Error) error.message = keyring.redact(error.message);
      throw error;
    }
  };
  const executeHere = async (name: string, args: unknown, signal: AbortSignal, idempotencyKey?: string): Promise<string> => {
    if (!remote) return runTools.execute(name, args, signal, idempotencyKey);
    const job: ToolJob = { kind: 'tool', runId: remote.runId, config: remote.config, name, args, ...(idempotencyKey ? { idempotencyKey } : {}) };
    const outcome = await remote.calls.call(job, signal);
    // A tool's error is its own words (as from a tool run here), not a provider's.
    if (!outcome.ok) throw new Error(outcome.error.message);
    return (outcome as { text: string }).text;
  };
  const executeTool = fromPromise<string, ToolExecInput>(({ input: call, signal }) => {
    if (!journal) return execute(call.name, call.args, signal);
    // A call with a side effect runs once per run: a resumed agent gets the recorded result.
    if (call.taskId !== undefined && !readOnly.has(call.name)) return journal.sideEffect(call.taskId, call.name, call.args, signal, (idempotencyKey) => execute(call.name, call.args, signal, idempotencyKey));
    journal.flush();
    return execute(call.name, call.args, signal);
  });
  const executeBatch = fromPromise<ToolResult[], ToolBatchInput>(async ({ input: batch, signal }) =>
    (await executeBatchHere(batch, signal)).map((r) => ({ ...r, content: keyring.redact(r.content) })),
  );
  const executeBatchHere = async (batch: ToolBatchInput, signal: AbortSignal): Promise<ToolResult[]> => {
    if (!remote) return runTools.executeBatch(batch.name, batch.calls, signal);
    const job: BatchJob = { kind: 'batch', runId: remote.runId, config: remote.config, name: batch.name, calls: batch.calls };
    const outcome = await remote.calls.call(job, signal);
    if (!outcome.ok) throw new Error(outcome.error.message);
    return (outcome as { results: ToolResult[] }).results;
  };
  const expandPlan = fromPromise<PlanExpansion, PlanExpansionInput>(async ({ input }) => expander.expand(input));
  return supervisorMachine.provide({
    actions: { report },
    actors: {
      expandPlan,
      agent: agentMachine.provide({ actions: { report }, actors: { callModel, beforeDispatch, beforeToolCall } }),
      pool: poolMachine.provide({ actions: { report }, actors: { key: keyMachine.provide({ actions: { report } }) } }),
      breaker: breakerMachine.provide({ actions: { report } }),
      toolBus: toolBusMachine.provide({ actions: { report }, actors: { executeTool, executeBatch } }),
      ledger: ledgerMachine.provide({ actions: { report } }),
    },
  });
}

/** A final answer of a task with output checks, checked on arrival (the agent reads the verdict). */
function withVerdict(call: ModelCallInput, out: ModelCallOutput): ModelCallOutput {
  if (!call.output || out.content.some((b) => b.type === 'tool_use')) return out;
  return { ...out, verdict: checkOutput(textOf(out.content), call.output) };
}

/** A wire-safe name for a task's output format (OpenAI: a-z, A-Z, 0-9, _ and -, at most 64). */
function outputFormatName(taskId: string): string {
  return taskId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'output';
}

/** A structured output is its parsed value in the public result (the runtime keeps its JSON text). */
function withParsedOutputs(result: RunResult, plan: Plan): RunResult {
  for (const spec of plan.tasks) {
    const task = result.tasks[spec.id];
    if ((spec.output || spec.kind === 'map') && task && typeof task.output === 'string') task.output = parsedOutput(spec, task.output);
  }
  return result;
}

/** Adds what each task cost (its model's price times its usage) and the total. */
function priced(result: RunResult, plan: Plan): RunResult {
  let total: number | null = null;
  for (const task of Object.values(result.tasks)) {
    // The agents priced each call at the model that served it; what they could not price (a task
    // that never called, or a model without a price) is priced here from its usage, or unknown.
    if (task.costUsd === undefined) {
      const model = plan.models[task.model];
      task.costUsd = task.requests === 0 ? 0 : costOf(task.usage, model ? priceOf(model.model, model.price) : undefined);
    }
    if (task.costUsd !== null) total = (total ?? 0) + task.costUsd;
  }
  result.totals.costUsd = total === null ? null : Math.round(total * 1e8) / 1e8;
  return result;
}

export type { ErrorInfo, RunResult };
