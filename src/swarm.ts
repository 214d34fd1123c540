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
import { nanoid } from 'nanoid';
import type { CacheWarmEvent } from '../machines/protocol.js';
import type { PlanExpansion, PlanExpansionInput } from '../machines/supervisor.machine.js';
import { PlanExpander } from './planner.js';
import { createActor, fromPromise, toPromise, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { agentMachine } from '../machines/agent.machine.js';
import { realClock, type TimedClock } from '../machines/clock.js';
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
import { Keyring } from './keys.js';
import { parsePlan, PlanValidationError, type Plan } from './plan/index.js';
import { ProviderError, asProviderError } from './providers/errors.js';
import { ProviderRegistry } from './providers/registry.js';
import { fromWire, toolNaming, toWire } from './providers/toolNames.js';
import type { Provider, ToolSpec } from './providers/types.js';
import { resolveRun, targetOfModel, type BreakerOptions } from './resolve.js';
import { decisionOf, loadHookModule, toolDecisionOf, type BeforeDispatch, type BeforeToolCall, type Hooks } from './hooks.js';
import type { ToolDefinition } from './tools/local.js';
import { RunTools } from './tools/registry.js';

/** The public event stream of a run: one entry per RunEvent type. */
/** A run event as the stream carries it: stamped with the time (ms, the swarm's clock). */
export type TimedRunEvent = RunEvent & { at: number };
export type RunEvents = { [K in RunEvent['type']]: Extract<RunEvent, { type: K }> & { at: number } };

export interface SwarmOptions {
  /**
   * Provider adapters, by the plan's provider name or by provider type. A plan provider with
   * none here uses the built-in adapter for its type: Anthropic Messages, OpenAI-compatible Chat
   * Completions, or (`sim`) a simulated provider server started on 127.0.0.1.
   */
  providers?: Record<string, Provider>;
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
}

export interface RunHandle {
  readonly id: string;
  /**
   * Typed events: `run.events.on('task:completed', (e) => ...)`, or `'*'` for all. The run starts
   * on the next microtask: subscribe in the same synchronous block as `run()` to see every event.
   */
  readonly events: Emitter<RunEvents>;
  /**
   * The run's result. It resolves for every ending, cancelled and partial included; it rejects
   * only when the run cannot start (an MCP server that does not connect, a tool it lacks).
   */
  readonly result: Promise<RunResult>;
  /** Cancels the run: nothing new starts, agents in flight are aborted, results so far are kept. */
  cancel(reason?: string): void;
  /** The supervisor actor, for inspection and tests (undefined until the run has started). */
  readonly actor: Actor<typeof supervisorMachine> | undefined;
}

export interface Swarm {
  /** Validates the plan (throws PlanValidationError listing every problem) and starts it. */
  run(plan: unknown): RunHandle;
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

  return {
    run(raw) {
      const plan = parsePlan(raw, { env, tools: tools.keys() });
      const runId = nanoid(12);
      const events = createEmitter<RunEvents>();
      const report = (_: unknown, event: RunEvent) => {
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

      // Started on the next microtask at the earliest, so listeners attached right after run()
      // see every event, `run:started` included. MCP servers connect first: a task naming a tool
      // its server does not have fails the run before anything is sent.
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
          const keyring = new Keyring();
          const input = resolveRun(plan, {
            runId,
            keyring,
            env,
            busTools: runTools.busTools(),
            toolTokens: (names) => runTools.specTokens(names),
            seed: options.seed ?? 0,
            backoff: options.backoff ?? { baseMs: 500, maxMs: 30_000 },
            ...(options.breaker ? { breaker: options.breaker } : {}),
            ...(options.shareTools === false ? { shareTools: false } : {}),
            ...(hooks.length > 0 ? { hooked: true } : {}),
            ...(toolHooks.length > 0 ? { toolHooked: true } : {}),
          });
          const keyIdsOf = new Map(input.providers.map((p) => [p.name, p.keys.map((k) => k.keyId)]));
          const adapters = registry.forPlan(plan, (name) => keyIdsOf.get(name)!.map((id) => keyring.get(id).secret).filter((x) => x !== ''));
          const budgetLeft = () => {
            const book = actor?.system.get('ledger')?.getSnapshot().context.book as { run(): { limitUsd?: number; spentUsd: number; reservedUsd: number } } | undefined;
            const run = book?.run();
            return run?.limitUsd === undefined ? undefined : run.limitUsd - run.spentUsd - run.reservedUsd;
          };
          const beforeDispatch = dispatchHook(hooks, plan, budgetLeft);
          const expander = new PlanExpander(plan, { toolTokens: (names) => runTools.specTokens(names), toolNames: runTools.busTools().map((t) => t.name) });
          const machine = provideEffects(report, { keyring, adapters, runTools, beforeDispatch, beforeToolCall: toolHook(toolHooks), expander });
          actor = createActor(machine, { input, clock, systemId: 'supervisor', ...(options.inspect ? { inspect: options.inspect } : {}) });
          report(null, {
            type: 'run:started',
            runId,
            tasks: input.tasks.length,
            models: Object.fromEntries(
              Object.entries(plan.models).map(([name, m]) => {
                const price = priceOf(m.model, m.price);
                return [name, { provider: m.provider, model: m.model, ...(price ? { price } : {}) }];
              }),
            ),
            keys: Object.fromEntries(input.providers.flatMap((p) => p.keys.map((k) => [k.keyId, k.limits]))),
            maxInFlight: input.maxInFlight,
          });
          actor.start();
          if (cancelled !== undefined) actor.send({ type: 'CANCEL', reason: cancelled });
          return priced(await toPromise(actor), plan);
        } finally {
          await runTools.close();
        }
      })().finally(() => live.delete(handle));

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
    },

    async close() {
      for (const run of live) run.cancel('swarm closed');
      await Promise.allSettled([...live].map((r) => r.result));
      await registry.close();
      await Promise.allSettled(Object.values(options.providers ?? {}).map((p) => p.close?.()));
    },
  };
}

interface RunEffects {
  keyring: Keyring;
  adapters: Map<string, Provider>;
  runTools: RunTools;
  beforeDispatch: ReturnType<typeof dispatchHook>;
  beforeToolCall: ReturnType<typeof toolHook>;
  expander: PlanExpander;
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
function provideEffects(report: (_: unknown, event: RunEvent) => void, { keyring, adapters, runTools, beforeDispatch, beforeToolCall, expander }: RunEffects) {
  const callModel = fromPromise<ModelCallOutput, ModelCallInput>(async ({ input: call, signal, system }) => {
    const facts = { provider: call.provider, model: call.model, keyId: call.keyId };
    try {
      const naming = toolNaming(call.tools);
      const wire = toWire(naming, call.tools.flatMap((name) => runTools.spec(name) ?? []), call.messages);
      const reply = await adapters.get(call.provider)!.call({
        provider: call.provider,
        model: call.model,
        messages: wire.messages,
        tools: wire.tools,
        maxTokens: call.maxTokens,
        key: keyring.get(call.keyId),
        signal,
        meta: { taskId: call.taskId, attempt: call.attempt, turn: call.turn },
        ...(call.system !== undefined ? { system: call.system } : {}),
        // A cache leader's response has begun: its prefix is readable, the tasks held behind it can go.
        ...(call.cacheLead
          ? { onResponseStart: () => system.get('supervisor')?.send({ type: 'CACHE.WARM', taskId: call.taskId, attempt: call.attempt } satisfies CacheWarmEvent) }
          : {}),
      });
      return fromWire(naming, reply);
    } catch (error) {
      const e = asProviderError(error, facts);
      // Servers echo keys back in error bodies: nothing leaves with a secret in it.
      throw new ProviderError(e.code, keyring.redact(e.message), e.toJSON());
    }
  });
  const executeTool = fromPromise<string, ToolExecInput>(({ input: call, signal }) => runTools.execute(call.name, call.args, signal));
  const executeBatch = fromPromise<ToolResult[], ToolBatchInput>(({ input: batch, signal }) => runTools.executeBatch(batch.name, batch.calls, signal));
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
