/**
 * A small actor system for testing agents against the real infrastructure: one key pool
 * (`pool:p`), one breaker (`breaker:p/m`), the tool bus (`toolBus`), and the agents a test starts.
 * Only the effects are scripted: the model call (the agent's `callModel` action) and the tool executor (`executeTool`).
 *
 * Time is a SimulatedClock. Scripted promises settle in microtasks, so a test awaits
 * `settle()` (one macrotask turn: no simulated time passes) or `advance(ms)` (simulated time,
 * every timer fired at its own deadline) between steps.
 *
 * @example
 * const h = createAgentHarness({ model: () => textReply('hi') });
 * const id = h.start(agentInput());
 * await h.settle();
 * h.output(id)?.status; // 'completed'
 */
import { createActor, enqueueActions, fromPromise, setup, SimulatedClock } from 'xstate';
import type { AnyActorRef, DoneActorEvent, ErrorActorEvent } from 'xstate';
import { agentMachine, modelCallActions, type AgentContext, type AgentInput } from '../../machines/agent/index.js';
import { breakerMachine, type BreakerContext, type BreakerOptions } from '../../machines/breaker.machine.js';
import { keyMachine, type KeyContext } from '../../machines/key.machine.js';
import { poolMachine, type PoolContext, type PoolInput } from '../../machines/pool.machine.js';
import type {
  AttemptReport,
  ContentBlock,
  ErrorCode,
  ErrorInfo,
  ModelCallInput,
  ModelCallOutput,
  RunEvent,
  ToolExecInput,
  Usage,
} from '../../machines/protocol.js';
import { toolBusMachine } from '../../machines/toolBus.machine.js';
import { ledgerMachine, type LedgerBudgets, type LedgerContext } from '../../machines/ledger.machine.js';
import { clampDelay } from '../../machines/clock.js';

// ---------------------------------------------------------------------------------------------
// Scripted replies
// ---------------------------------------------------------------------------------------------

/** What a scripted model call does: answer, fail, never answer, or answer when a promise says. */
export type ModelReply = ModelCallOutput | { error: ErrorInfo } | 'hang' | Promise<ModelCallOutput>;

/** Decides the reply of a model call; `n` counts the earlier calls of the same task attempt. */
export type ModelScript = (call: ModelCallInput, n: number) => ModelReply;

/** One model call the agent made, with the AbortSignal it was given and when it started. */
export interface ModelCall {
  input: ModelCallInput;
  signal: AbortSignal;
  at: number;
}

export const usage = (inputTokens: number, outputTokens: number, cacheReadTokens = 0): Usage => ({
  inputTokens,
  outputTokens,
  cacheWriteTokens: 0,
  cacheReadTokens,
});

export function textReply(text: string, used: Usage = usage(10, 5)): ModelCallOutput {
  return { content: [{ type: 'text', text }], stopReason: 'end_turn', usage: used };
}

/** A reply asking for tools, in this order. */
export function toolReply(calls: { id: string; name: string; input?: unknown }[], used: Usage = usage(10, 5)): ModelCallOutput {
  const content: ContentBlock[] = [{ type: 'text', text: 'Let me check.' }];
  for (const c of calls) content.push({ type: 'tool_use', id: c.id, name: c.name, input: c.input ?? {} });
  return { content, stopReason: 'tool_use', usage: used };
}

/** The codes src/providers/errors.ts treats as retryable by default. */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['rate_limited', 'overloaded', 'server_error', 'timeout', 'network', 'auth']);

/** A rejected model call, as src would classify it. */
export function modelError(code: ErrorCode, facts: Partial<ErrorInfo> = {}): { error: ErrorInfo } {
  return { error: { code, message: `scripted ${code}`, retryable: RETRYABLE.has(code), ...facts } };
}

/** An AgentInput for provider `p`, model `m`, with small defaults a test overrides. */
export function agentInput(overrides: Partial<AgentInput> = {}): AgentInput {
  return {
    taskId: 't1',
    attempt: 1,
    provider: 'p',
    model: 'm',
    maxTokens: 100,
    priority: 0,
    prompt: 'Say hello.',
    tools: [],
    maxTurns: 4,
    retries: 2,
    timeoutMs: 60_000,
    backoff: { baseMs: 100, maxMs: 10_000 },
    seed: 42,
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------

export interface AgentHarnessOptions {
  model: ModelScript;
  /** Keys of provider `p`. Default: one key `A` without limits. */
  keys?: PoolInput['keys'];
  /** Options of the breaker of route `p/m` (and of the other routes'). */
  breaker?: BreakerOptions;
  /** Models of provider `p` beside `m` that have a breaker (`breaker:p/<model>`), for fallbacks. */
  models?: string[];
  /** Tools the bus knows. Default: `search`, `fail` and `rm`, none shareable. */
  tools?: { name: string; shareable: boolean }[];
  /** The bus's batch window (ms). Default 0: calls go out at once. */
  batchWindowMs?: number;
  /** The bus's executor. Default: resolves with `<name> ok`. */
  executeTool?: (input: ToolExecInput) => Promise<string>;
  /** The run's budgets: a ledger (systemId `ledger`) is spawned with them (agents need `budgeted` and a price to use it). */
  budgets?: LedgerBudgets;
}

export type TimedRunEvent = RunEvent & { at: number };

type SpawnAgent = { type: 'SPAWN'; id: string; input: AgentInput };

/** The id of an agent actor in the harness, as the supervisor names them. */
export const agentActorId = (input: Pick<AgentInput, 'taskId' | 'attempt'>) => `agent:${input.taskId}:${input.attempt}`;

const DEFAULT_TOOLS = [
  { name: 'search', shareable: false },
  { name: 'fail', shareable: false },
  { name: 'rm', shareable: false },
];

/** Settles every promise and message already under way; no simulated time passes. */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

export function createAgentHarness(options: AgentHarnessOptions) {
  const clock = new SimulatedClock();
  const calls: ModelCall[] = [];
  const toolCalls: ToolExecInput[] = [];
  const reports: TimedRunEvent[] = [];
  const outputs = new Map<string, AttemptReport>();
  const crashes = new Map<string, unknown>();
  const keys = options.keys ?? [{ keyId: 'A', limits: {} }];
  const report = (_: unknown, event: RunEvent) => void reports.push({ ...event, at: clock.now() });

  const callModel = modelCallActions((input, { signal }) => {
    const n = calls.filter((c) => c.input.taskId === input.taskId && c.input.attempt === input.attempt).length;
    calls.push({ input, signal, at: clock.now() });
    const reply = options.model(input, n);
    if (reply === 'hang') return new Promise<never>(() => {});
    if ('error' in reply) return Promise.reject(reply.error);
    return Promise.resolve(reply);
  });
  const executeTool = fromPromise<string, ToolExecInput>(({ input }) => {
    toolCalls.push(input);
    return options.executeTool ? options.executeTool(input) : Promise.resolve(`${input.name} ok`);
  });

  const root = setup({
    types: {} as { events: SpawnAgent | DoneActorEvent<AttemptReport, string> | ErrorActorEvent<unknown, string> },
    actors: {
      pool: poolMachine.provide({ actions: { report }, actors: { key: keyMachine.provide({ actions: { report } }) } }),
      breaker: breakerMachine.provide({ actions: { report } }),
      toolBus: toolBusMachine.provide({ actions: { report }, actors: { executeTool } }),
      agent: agentMachine.provide({ actions: { report, ...callModel } }),
      ledger: ledgerMachine.provide({ actions: { report } }),
    },
  }).createMachine({
    entry: enqueueActions(({ enqueue }) => {
      enqueue.spawnChild('pool', { id: 'pool:p', systemId: 'pool:p', input: { provider: 'p', keys } });
      for (const model of ['m', ...(options.models ?? [])]) {
        enqueue.spawnChild('breaker', { id: `breaker:p/${model}`, systemId: `breaker:p/${model}`, input: { route: `p/${model}`, ...options.breaker } });
      }
      if (options.budgets) enqueue.spawnChild('ledger', { id: 'ledger', systemId: 'ledger', input: { budgets: options.budgets } });
      enqueue.spawnChild('toolBus', {
        id: 'toolBus',
        systemId: 'toolBus',
        input: {
          tools: (options.tools ?? DEFAULT_TOOLS).map((t) => ({ ...t, server: 'local', readOnly: t.shareable, batch: false })),
          batchWindowMs: options.batchWindowMs ?? 0,
        },
      });
    }),
    on: {
      SPAWN: {
        actions: enqueueActions(({ event, enqueue }) => {
          enqueue.spawnChild('agent', { id: event.id, input: event.input });
          // The agent's deadline, as its group keeps it in a run (machines/supervisor/group.machine.ts).
          enqueue.sendTo(event.id, { type: 'AGENT.TIMEOUT' }, { id: `deadline:${event.id}`, delay: clampDelay(event.input.timeoutMs, 1) });
        }),
      },
      'xstate.done.actor.*': {
        actions: enqueueActions(({ event, enqueue }) => {
          outputs.set(childIdOf(event.type), event.output);
          enqueue.cancel(`deadline:${childIdOf(event.type)}`);
        }),
      },
      'xstate.error.actor.*': {
        actions: enqueueActions(({ event, enqueue }) => {
          crashes.set(childIdOf(event.type), event.error);
          enqueue.cancel(`deadline:${childIdOf(event.type)}`);
        }),
      },
    },
  });
  const actor = createActor(root, { clock }).start();

  const child = (id: string) => actor.getSnapshot().children[id] as AnyActorRef | undefined;
  const snapshotOf = <C>(systemId: string) => {
    const ref = actor.system.get(systemId) as AnyActorRef | undefined;
    if (!ref) throw new Error(`no actor ${systemId} in the harness`);
    return ref.getSnapshot() as { value: unknown; context: C };
  };

  /** Moves simulated time forward by `ms`, firing each timer at its own deadline and settling after each. */
  async function advance(ms: number): Promise<void> {
    const target = clock.now() + ms;
    const timers = (clock as unknown as { timeouts: Map<number, { start: number; timeout: number }> }).timeouts;
    await settle();
    for (let guard = 0; ; guard++) {
      if (guard > 100_000) throw new Error('advance: timers keep firing at the same instant');
      let next = Infinity;
      for (const t of timers.values()) next = Math.min(next, t.start + t.timeout);
      if (next > target) break;
      clock.set(Math.max(clock.now(), next));
      await settle();
    }
    if (target > clock.now()) clock.set(target);
    await settle();
  }

  return {
    clock,
    root: actor,
    /** Model calls, in the order they started. */
    calls,
    /** Model calls of one task attempt. */
    callsOf: (taskId: string, attempt = 1) => calls.filter((c) => c.input.taskId === taskId && c.input.attempt === attempt),
    /** Executions the bus started, in order. */
    toolCalls,
    /** Every run event any machine reported, with the simulated time. */
    reports,
    reportsOf: <T extends RunEvent['type']>(type: T) => reports.filter((e): e is Extract<TimedRunEvent, { type: T }> => e.type === type),
    /** Spawns an agent and sends it START; returns its actor id. */
    start(input: AgentInput): string {
      const id = agentActorId(input);
      actor.send({ type: 'SPAWN', id, input });
      return id;
    },
    cancel: (id: string, reason?: string) => child(id)?.send(reason === undefined ? { type: 'CANCEL' } : { type: 'CANCEL', reason }),
    /** The agent's AttemptReport, once it reached a final state. */
    output: (id: string) => outputs.get(id),
    crashes,
    /** The agent's state value and context (also after it finished). */
    agent(id: string) {
      const ref = child(id);
      if (!ref) throw new Error(`no agent ${id} in the harness`);
      return ref.getSnapshot() as { value: unknown; status: string; context: AgentContext };
    },
    /** A key's state and book; undefined once the key stopped (revoked is final). */
    key: (keyId: string) => (actor.system.get(`key:${keyId}`) ? snapshotOf<KeyContext>(`key:${keyId}`) : undefined),
    pool: () => snapshotOf<PoolContext>('pool:p'),
    breaker: (model = 'm') => snapshotOf<BreakerContext>(`breaker:p/${model}`),
    /** The ledger's accounts (with `budgets`). */
    ledger: () => snapshotOf<LedgerContext>('ledger').context.book.summary(),
    /** Leases out: as the pool counts them, and per live key. */
    leasesOut(): Record<string, number> {
      const out: Record<string, number> = { pool: snapshotOf<PoolContext>('pool:p').context.book.byLease.size };
      for (const { keyId } of keys) if (actor.system.get(`key:${keyId}`)) out[keyId] = snapshotOf<KeyContext>(`key:${keyId}`).context.leasesOut;
      return out;
    },
    settle,
    advance,
  };
}

export type AgentHarness = ReturnType<typeof createAgentHarness>;

function childIdOf(eventType: string): string {
  return eventType.replace(/^xstate\.(done|error)\.actor\./, '');
}
