/**
 * The public types of a swarm and its runs: createSwarm's options, what run/resume/retry take,
 * the handle a run gives back, and the Swarm itself (src/swarm.ts makes it).
 */
import type { InspectionEvent, Observer, Actor } from 'xstate';
import type { Meter, Tracer } from '@opentelemetry/api';
import type { DecisionSource, RunEvent } from '../machines/protocol.js';
import type { RunResult } from '../machines/tasks/results.js';
import type { supervisorMachine } from '../machines/supervisor/machine.js';
import type { TimedClock } from '../machines/clock.js';
import type { Emitter } from './util/emitter.js';
import type { SwarmFunctions } from './fn/types.js';
import type { Decision } from './run/approvals.js';
import type { ResultOf } from './plan/index.js';
import type { PlanBudget } from './plan/planTypes.js';
import type { ProviderObject } from './providers/registry.js';
import type { BreakerOptions } from './resolve.js';
import type { Hooks } from './hooks.js';
import type { SwarmTools } from './tools/define.js';
import type { PruneRule, RunSummary, Store } from './store/index.js';
import type { EventStream, StreamOptions } from './run/eventStream.js';

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
  /**
   * In-process function tools the plan's tasks may name: an array (each with its `name`) or an
   * object by name. Each is a ToolDefinition (`handler`) or an AI SDK `tool()` (`execute`); its
   * `inputSchema` JSON Schema, a zod 4 schema or an AI SDK `jsonSchema()`. A definition that
   * cannot work is refused here (ToolDefinitionError, every problem at once).
   */
  tools?: SwarmTools;
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
  /**
   * OpenTelemetry, the rest (docs/tracing.md): `captureContent` records each model call's prompt
   * and output on its `chat` span (`gen_ai.system_instructions`, `gen_ai.input.messages`,
   * `gen_ai.output.messages`, JSON, redacted like everything else; default false); `meter`: the
   * meter of the GenAI metrics (default the global one, which records nothing until a
   * MeterProvider is registered; `false`: no metrics).
   */
  tracing?: { captureContent?: boolean; meter?: Meter | false };
}

export interface RunOptions {
  /** The plan file's path: recorded with the run, so a resume can read inline secrets from it again. */
  source?: string;
  /** `task:delta` events for this run (default: the swarm's `deltas`). */
  deltas?: boolean;
  /**
   * Approvals that wait keep the run going until they are decided (`run.approve`), instead of
   * ending it `paused` when nothing else can run. For a program or a page that decides.
   */
  holdApprovals?: boolean;
}

export interface ResumeOptions extends Pick<RunOptions, 'deltas' | 'holdApprovals'> {
  /** The plan again, for a run whose plan had inline secrets (they are never stored) and whose file is gone. */
  plan?: unknown;
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

/** An iterator over a run's events (`run.stream()`); `break` (its `return()`) releases it. */
export type RunEventStream = EventStream<TimedRunEvent>;

export interface RunHandle<R = RunResult> extends AsyncIterable<TimedRunEvent> {
  readonly id: string;
  /**
   * Typed events: `run.events.on('task:completed', (e) => ...)`, or `'*'` for all. The run starts
   * on the next microtask: subscribe in the same synchronous block as `run()` to see every event.
   */
  readonly events: Emitter<RunEvents>;
  /**
   * Every event of this run in order, from `run:started` to its last, whenever the iterator is
   * made (even after the run ended); typed by `type`. It ends after the last event, or throws the
   * error `result` rejects with. Each iterator has its own cursor. Bounded (src/run/eventStream.ts):
   * the handle keeps the last 100,000 events and never waits for a reader; an iterator more than
   * `maxBuffered` behind, or made after events were dropped, throws EventStreamOverflowError.
   */
  stream(options?: StreamOptions): RunEventStream;
  /** `for await (const event of run)`: `run.stream()` with its defaults. */
  [Symbol.asyncIterator](): RunEventStream;
  /**
   * The run's result. It resolves for every ending, cancelled and partial included; it rejects
   * when the run cannot start (an MCP server that does not connect, a tool it lacks), and with a
   * StoreError when its journal cannot be written (the run stops; resume it once that is fixed).
   */
  readonly result: Promise<R>;
  /** Cancels the run: nothing new starts, agents in flight are aborted, results so far are kept. */
  cancel(reason?: string): void;
  /**
   * Decides a waiting approval task of this run (`by`: where the decision comes from, default
   * `code`). Throws ApprovalError when the task is not an approval waiting now, or the decision
   * is malformed (an edited `output` that fails the approved task's output checks included).
   */
  approve(taskId: string, decision: Decision, by?: DecisionSource): void;
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
  /**
   * Decides a waiting approval of a run: this swarm's live run at once; otherwise in the journal,
   * where the process running it picks it up, or `resume` does for a paused run. Throws
   * ApprovalError (no such run or task, not waiting, a malformed decision).
   */
  approve(runId: string, taskId: string, decision: Decision, by?: DecisionSource): void;
  /** The journaled runs, newest first (empty without a store). */
  runs(limit?: number): RunSummary[];
  /** Cancels runs still going and frees provider connections. */
  close(): Promise<void>;
}
