/**
 * Starts one run (new, resumed or retried) whose plan is valid and whose lock is taken, in this
 * order:
 *
 * 1. at once, in run(): the run's secrets into the redactor, its journal, its span, its event
 *    sink, and the heartbeat of its lock;
 * 2. on the next microtask (so listeners attached right after run() see every event): the
 *    plan's MCP servers connect and its hooks module loads (a task naming a tool its server does
 *    not have fails the run before anything is sent), the plan resolves into the supervisor's
 *    input, the transport is picked (here or on the workers) and the machines get their effects;
 * 3. `run:started`, the supervisor starts, and its output, priced, is the run's result.
 */
import { createActor, toPromise, type Actor } from 'xstate';
import type { RunEvent } from '../../machines/protocol.js';
import { supervisorMachine } from '../../machines/supervisor/machine.js';
import type { TimedClock } from '../../machines/clock.js';
import { restoreOf, RunJournal } from '../durable.js';
import { settingSecrets } from '../planSecrets.js';
import { loadHookModule, type BeforeDispatch, type BeforeToolCall } from '../hooks.js';
import { Keyring } from '../keys.js';
import { PlanValidationError, type Plan } from '../plan/index.js';
import { PlanExpander } from '../planner.js';
import type { ProviderRegistry } from '../providers/registry.js';
import { resolveRun, samplingOf } from '../resolve.js';
import type { LockOwner, Store, StoreError } from '../store/index.js';
import type { RunEvents, RunHandle, SwarmOptions } from '../swarm.js';
import { defaultTracer, RunTracer } from '../telemetry.js';
import type { ToolDefinition } from '../tools/local.js';
import { RunTools } from '../tools/registry.js';
import { createEmitter, type Emitter } from '../util/emitter.js';
import type { Remote } from '../distributed/lazy.js';
import { functionActor } from '../fn/call.js';
import { approveLive, ApprovalError, decisionOf, pendingDecisions, watchDecisions } from './approvals.js';
import { provideEffects } from './effects.js';
import { dispatchHook, toolHook } from './hookActors.js';
import type { JournaledState } from './journaled.js';
import { keepLock, releaseLock, runningHere } from './lock.js';
import { publicResult } from './result.js';
import { startedEvent } from './started.js';
import { localTransport, remoteTransport, type CallTransport } from './transport.js';
import { EventLog, iterationOf } from './eventStream.js';

/** What the runs of one swarm share, made once by createSwarm. */
export interface SwarmShared {
  options: SwarmOptions;
  env: Record<string, string | undefined>;
  clock: TimedClock;
  /** The in-process tools, by name. */
  tools: Map<string, ToolDefinition>;
  registry: ProviderRegistry;
  /** A distributed swarm's connection to the call queue. */
  remote: Remote | undefined;
  /** The journal, opened on first use; undefined with `store: false`. */
  storeOf: () => Store | undefined;
  /** The journals of the runs going on: a store that fails fails them all. */
  journals: Set<{ failWith(e: StoreError): void }>;
  owner: LockOwner;
  /** The runs going on (close() cancels them). */
  live: Set<RunHandle>;
}

export interface RunStart {
  plan: Plan;
  runId: string;
  seed: number;
  /** A resume or a retry: what the journal holds of the run. */
  restore: JournaledState | undefined;
  deltas: boolean;
  /** Where the plan file is (a map's items file is read relative to it). */
  baseDir?: string;
  /** Approvals that wait keep the run going (it does not pause): see RunOptions.holdApprovals. */
  holdApprovals?: boolean;
}

export function startRun(swarm: SwarmShared, { plan, runId, seed, restore, deltas, baseDir, holdApprovals }: RunStart): RunHandle {
  const { options, env, clock, owner } = swarm;
  const events = createEmitter<RunEvents>();
  // Kept from the first event, whoever iterates: an iterator made late still reads it all.
  const log = new EventLog<RunEvent>(runId);
  const durable = swarm.storeOf();
  runningHere.add(runId);
  // Every secret of the run, known before anything can echo one: the tool servers' settings now,
  // the provider keys as resolveRun adds them (before the first event).
  const keyring = new Keyring();
  for (const { path, value } of settingSecrets(plan, env)) keyring.redactor.addSetting(value, path);
  const redact = <T>(value: T): T => keyring.redactor.redactDeep(value);
  const journal = durable ? new RunJournal(durable, runId, redact) : undefined;
  const journalRef = journal ? { failWith: (e: StoreError) => journal.fail(e) } : undefined;
  if (journalRef) swarm.journals.add(journalRef);
  // Made here, synchronously in run(): the caller's active span becomes the run span's parent.
  const tracing = new RunTracer(options.tracer === false ? undefined : (options.tracer ?? defaultTracer()), runId, plan, {
    ...(options.tracing?.meter !== undefined ? { meter: options.tracing.meter } : {}),
    captureContent: options.tracing?.captureContent === true,
    redact,
    env,
    ...(options.providers ? { sources: options.providers } : {}),
  });
  let actor: Actor<typeof supervisorMachine> | undefined;
  // Decisions another process writes to the journal reach a live run while its approvals wait.
  const decisions = durable ? watchDecisions(durable, runId, () => actor) : undefined;
  const report = eventSink(events, log, clock, redact, journal, tracing, decisions);
  let cancelled: string | undefined;
  // Sent on the next microtask, not here: a cancel comes from inside another actor's action (a
  // listener of an agent's event, a journal write that fails in a report), and a send from there
  // makes the supervisor run its whole transition nested in that action. Until it arrives, no
  // call leaves after a journal failure (RunJournal.beforeCall throws).
  let cancelSent = false;
  const sendCancel = () => {
    if (cancelSent || cancelled === undefined || actor?.getSnapshot().status !== 'active') return;
    cancelSent = true;
    actor.send({ type: 'CANCEL', reason: cancelled });
  };
  const cancel = (reason: string) => {
    if (cancelled !== undefined) return;
    cancelled = reason;
    queueMicrotask(sendCancel);
  };
  const stopBeating = durable ? keepLock(durable, runId, owner, () => cancel("lost the run's lock to another process")) : undefined;
  // A journal that cannot write stops the run: nothing more is sent that it could not record.
  if (journal) journal.onFailure = (error) => cancel(`the run's journal cannot be written: ${error.message}`);
  let transport: CallTransport | undefined;

  /** Whether the supervisor started: a new run refused before that is journaled as failed. */
  let started = false;
  /** Why `result` rejects, for the iterators (which end last, once the lock is released). */
  let failure: { error: unknown } | undefined;
  const result = (async () => {
    await Promise.resolve();
    const runTools = await RunTools.open(plan, [...swarm.tools.values()], env);
    try {
      const hooks = await hooksOf(plan, options);
      const problems = runTools.problems(plan);
      if (problems.length > 0) throw new PlanValidationError(problems);
      const busTools = runTools.busTools();
      tracing.toolServers(busTools);
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
        ...(hooks.dispatch.length > 0 ? { hooked: true } : {}),
        ...(hooks.tool.length > 0 ? { toolHooked: true } : {}),
      });
      const expander = new PlanExpander(
        plan,
        { toolTokens: (names) => runTools.specTokens(names), toolNames: busTools.map((t) => t.name), ...(baseDir !== undefined ? { baseDir } : {}) },
        journal ? (planner, specs) => journal.acceptSubtasks(planner, specs) : undefined,
      );
      if (holdApprovals) input.holdApprovals = true;
      if (restore) {
        input.decisions = pendingDecisions(restore.rows);
        input.restore = restoreOf(restore.rows, restore.attempts, restore.spent.byTask, expander, new Set(plan.tasks.map((t) => t.id)), restore.retryBases);
        if (input.budgets) input.budgets.spent = { runUsd: restore.spent.total, byTask: restore.spent.byTask, byModel: restore.spent.byModel };
      }
      // A distributed run makes no call here: no adapters (and no embedded simulator) in the coordinator.
      const keyIdsOf = new Map(input.providers.map((p) => [p.name, p.keys.map((k) => k.keyId)]));
      transport = swarm.remote
        ? remoteTransport(swarm.remote, runId, { providers: plan.providers, tools: plan.tools })
        : localTransport(swarm.registry.forPlan(plan, (name) => keyIdsOf.get(name)!.map((id) => keyring.get(id).secret).filter((x) => x !== '')), keyring, runTools);
      // As the ledger last announced it (after every event it handles): what a hook is told.
      let budgetLeftUsd: number | undefined;
      const machine = provideEffects(report, {
        keyring,
        transport,
        runTools,
        beforeDispatch: dispatchHook(hooks.dispatch, plan, () => budgetLeftUsd),
        beforeToolCall: toolHook(hooks.tool),
        expander,
        journal,
        readOnly: new Set(busTools.filter((t) => t.readOnly).map((t) => t.name)),
        deltas,
        tracing,
        sampling: (name) => samplingOf(name === undefined ? undefined : plan.models[name]),
        onBalance: (balance) => (budgetLeftUsd = balance.budgetLeftUsd),
        callFunction: functionActor({ runId, functions: options.functions ?? {}, redact: (text) => keyring.redact(text), ...(journal ? { beforeCall: () => journal.flush() } : {}) }),
      });
      actor = createActor(machine, { input, clock, systemId: 'supervisor', ...(options.inspect ? { inspect: options.inspect } : {}) });
      report(null, startedEvent(runId, plan, input, restore?.retried));
      started = true;
      actor.start();
      sendCancel();
      const out = redact(publicResult(await toPromise(actor), plan));
      if (journal?.failure) throw journal.failure;
      journal?.finish(out.status, out, true);
      if (journal?.failure) throw journal.failure;
      return out;
    } finally {
      await runTools.close();
    }
  })()
    .catch((error: unknown) => {
      // Errors reach the caller's output: a tool server's or a provider's words may hold a secret.
      if (error instanceof Error) error.message = keyring.redact(error.message);
      tracing?.close(clock.now(), error);
      // A new run refused before anything ran (a tool server that does not connect, a tool it
      // lacks): failed, with why, not left `running` (listed as interrupted, resumable for nothing).
      // A resume refused so keeps its journal as it was: its work so far is still worth resuming.
      if (!started && !restore) journal?.refusedAtStart(error);
      failure = { error };
      throw error;
    })
    .finally(() => {
      tracing?.close(clock.now());
      swarm.live.delete(handle);
      runningHere.delete(runId);
      transport?.end();
      stopBeating?.();
      decisions?.stop();
      if (journalRef) swarm.journals.delete(journalRef);
      releaseLock(durable, runId, owner);
      if (failure) log.fail(failure.error);
      else log.end();
    });

  const handle: RunHandle = {
    id: runId,
    events,
    result,
    get actor() {
      return actor;
    },
    cancel: (reason) => cancel(reason ?? 'cancelled by the caller'),
    approve: (taskId, decision, by = 'code') => {
      if (!actor) throw new ApprovalError('NOT_WAITING', `task "${taskId}" of run ${runId} is not waiting for approval (the run has not started)`);
      approveLive(actor, runId, taskId, decisionOf(decision, by, Date.now(), `approve("${taskId}")`));
    },
    ...iterationOf(log),
  };
  swarm.live.add(handle);
  return handle;
}

/** The caller's hooks, then the plan's `hooks.module` (loaded now: a module that fails is a plan error). */
async function hooksOf(plan: Plan, options: SwarmOptions): Promise<{ dispatch: BeforeDispatch[]; tool: BeforeToolCall[] }> {
  const planHooks = plan.hooks
    ? await loadHookModule(plan.hooks.module, process.cwd()).catch((error: unknown) => {
        throw new PlanValidationError([{ path: 'hooks.module', message: (error as Error).message }]);
      })
    : undefined;
  return {
    dispatch: [options.hooks?.beforeDispatch, planHooks?.beforeDispatch].filter((h): h is BeforeDispatch => h !== undefined),
    tool: [options.hooks?.beforeToolCall, planHooks?.beforeToolCall].filter((h): h is BeforeToolCall => h !== undefined),
  };
}

/**
 * Where the machines' `report` goes: redacted, into the journal, the spans, the handle's log (for
 * its iterators) and the listeners. Streamed text (`task:delta`) is for this life's listeners and
 * iterators only: the output is journaled whole.
 */
function eventSink(
  events: Emitter<RunEvents>,
  log: EventLog<RunEvent>,
  clock: TimedClock,
  redact: <T>(value: T) => T,
  journal: RunJournal | undefined,
  tracing: RunTracer | undefined,
  decisions: { wake(): void } | undefined,
) {
  return (_: unknown, raw: RunEvent) => {
    const event = redact(raw);
    if (event.type === 'approval:requested') decisions?.wake();
    if (event.type !== 'task:delta') journal?.record(event);
    const at = clock.now();
    if (tracing?.active) tracing.record(event, at);
    log.push(event, at);
    // Nobody listening: no stamped copy to make (the hot path of a big run).
    if (!events.all.has(event.type) && !events.all.has('*')) return;
    try {
      events.emit(event.type, { ...event, at } as never);
    } catch {
      // A listener that throws must not take the run down with it.
    }
  };
}
