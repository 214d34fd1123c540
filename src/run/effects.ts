/**
 * The machines with one run's effects (`machine.provide(...)`): a model call (the agent's
 * callModel/abortCall actions) and tool calls
 * through the run's CallTransport (here or on the workers), the hooks, the planner's expansion,
 * and every report into the event stream. What a call needs whichever transport makes it is done
 * here: the journal before it, tool names to and from the wire, deltas, redaction of what comes
 * back, and the output checks of a final answer.
 */
import { fromPromise } from 'xstate';
import type { CacheWarmEvent, ModelCallInput, ModelCallOutput, RunEvent, ToolBatchInput, ToolExecInput, ToolResult } from '../../machines/protocol.js';
import type { PlanExpansion, PlanExpansionInput } from '../../machines/supervisor/machine.js';
import { supervisorMachine } from '../../machines/supervisor/machine.js';
import { agentMachine, modelCallActions } from '../../machines/agent/index.js';
import { groupMachine } from '../../machines/supervisor/group.machine.js';
import { fnStepMachine } from '../../machines/kinds/fn.js';
import type { functionActor } from '../fn/call.js';
import { keyMachine } from '../../machines/key.machine.js';
import { poolMachine } from '../../machines/pool.machine.js';
import { breakerMachine } from '../../machines/breaker.machine.js';
import { toolBusMachine } from '../../machines/toolBus.machine.js';
import { ledgerMachine, type LedgerBalance } from '../../machines/ledger.machine.js';
import { nowOf } from '../../machines/clock.js';
import { errorText } from '../../machines/toolBusResults.js';
import { textOf } from '../../machines/tokens.js';
import type { RunJournal } from '../durable.js';
import type { Keyring } from '../keys.js';
import type { PlanExpander } from '../planner.js';
import { checkOutput } from '../plan/structured.js';
import { ProviderError, asProviderError } from '../providers/errors.js';
import { checkReply } from '../providers/replyCheck.js';
import { fromWire, toolNaming, toWire } from '../providers/toolNames.js';
import type { Sampling } from '../resolve.js';
import type { RunTools } from '../tools/registry.js';
import { DeltaStream } from './deltas.js';
import type { RunTracer } from '../telemetry.js';
import type { SentSettings } from '../telemetryChat.js';
import type { dispatchHook, toolHook } from './hookActors.js';
import type { CallTransport } from './transport.js';

export interface RunEffects {
  keyring: Keyring;
  /** Where the calls are made (here, or on the workers). */
  transport: CallTransport;
  /** The tools' specs, as the models see them. */
  runTools: RunTools;
  beforeDispatch: ReturnType<typeof dispatchHook>;
  beforeToolCall: ReturnType<typeof toolHook>;
  expander: PlanExpander;
  journal: RunJournal | undefined;
  /** Tools whose calls have no side effect (their results are not journaled). */
  readOnly: ReadonlySet<string>;
  /** Turns stream their text as `task:delta` events. */
  deltas: boolean;
  /** The sampling settings of a plan model, by its name. */
  sampling: (modelName: string | undefined) => Sampling;
  /** The ledger's announcement of the run budget's balance (the dispatch hooks are told it). */
  onBalance: (balance: LedgerBalance) => void;
  /** Function steps' calls (src/fn/call.ts). */
  callFunction: ReturnType<typeof functionActor>;
  /** The run's spans: a model call hands over its settings and content, a failed tool what it threw. */
  tracing?: RunTracer;
}

export function provideEffects(report: (_: unknown, event: RunEvent) => void, { keyring, transport, runTools, beforeDispatch, beforeToolCall, expander, journal, readOnly, deltas, sampling, onBalance, callFunction, tracing }: RunEffects) {
  // The model call is two actions of the agent (no actor per call: machines/agent/modelCall.ts).
  const callModel = modelCallActions(async (call: ModelCallInput, { signal, system, self }): Promise<ModelCallOutput> => {
    const facts = { provider: call.provider, model: call.model, keyId: call.keyId };
    let sent: SentSettings | undefined;
    try {
      // The spend of earlier calls is on disk before this one leaves (a resumed budget must not undercount).
      journal?.beforeCall();
      const naming = toolNaming(call.tools);
      const wire = toWire(naming, call.tools.flatMap((name) => runTools.spec(name) ?? []), call.messages);
      const meta = { taskId: call.taskId, attempt: call.attempt, turn: call.turn };
      const output = call.output?.schema ? { output: { name: outputFormatName(call.taskId), schema: call.output.schema } } : {};
      const stream = deltas && !call.summary ? new DeltaStream(keyring.redactor, (text) => report(null, { type: 'task:delta', ...meta, text })) : undefined;
      const settings = { maxTokens: call.maxTokens, ...sampling(call.modelName) };
      sent = settings;
      const reply = await transport.model(
        {
          provider: call.provider,
          model: call.model,
          messages: wire.messages,
          tools: wire.tools,
          ...settings,
          keyId: call.keyId,
          meta,
          ...output,
          ...(call.system !== undefined ? { system: call.system } : {}),
        },
        {
          signal,
          now: () => nowOf(self),
          ...(stream ? { onText: (text: string) => stream.push(text) } : {}),
          // A cache leader's response has begun: its prefix is readable, the tasks held behind it can go.
          ...(call.cacheLead
            ? { onResponseStart: () => system.get('supervisor')?.send({ type: 'CACHE.WARM', taskId: call.taskId, attempt: call.attempt } satisfies CacheWarmEvent) }
            : {}),
        },
      );
      // Whatever made the reply (an adapter, an AI SDK model, a custom provider's code, a worker), it is checked here, once.
      const out = fromWire(naming, checkReply(reply, call.maxTokens, facts));
      stream?.end(textOf(out.content));
      // A reply that echoes a key (a hostile or broken endpoint) does not carry it into the run.
      const redacted = keyring.redactor.redactDeep(out);
      if (tracing?.wantsDetails) tracing.details(call, settings, redacted);
      return withVerdict(call, redacted);
    } catch (error) {
      if (sent && tracing?.wantsDetails) tracing.details(call, sent, undefined);
      const e = asProviderError(error, facts);
      // Servers echo keys back in error bodies: nothing leaves with a secret in it.
      throw new ProviderError(e.code, keyring.redact(e.message), e.toJSON());
    }
  });
  /**
   * The one path every tool outcome takes before it enters a conversation (or the journal):
   * local or MCP, single or batched, live or replayed from the journal. A result is redacted; so
   * is whatever was thrown (an Error, a frozen one, a string, a plain object), as a new Error
   * whose message is its text.
   */
  const redacted = async <T extends string | ToolResult[]>(outcome: Promise<T>): Promise<T> => {
    let value: T;
    try {
      value = await outcome;
    } catch (error) {
      throw new Error(keyring.redact(errorText(error)));
    }
    if (typeof value === 'string') return keyring.redact(value) as T;
    return value.map((r) => ({ ...r, content: keyring.redact(r.content) })) as T;
  };
  /** One tool execution, wherever the transport makes it; what it throws as an Error with its text (the journal keeps that). */
  const execute = (name: string, args: unknown, signal: AbortSignal, idempotencyKey?: string, callId?: string): Promise<string> =>
    transport.tool(name, args, signal, idempotencyKey, callId).catch((error: unknown) => {
      // Its span's exception (redacted there): the bus reports the failure right after.
      tracing?.toolFailed(name, errorText(error));
      throw error instanceof Error ? error : new Error(errorText(error));
    });
  const executeTool = fromPromise<string, ToolExecInput>(({ input: call, signal }) => {
    if (!journal) return redacted(execute(call.name, call.args, signal, undefined, call.callId));
    // A call with a side effect runs once per run: a resumed agent gets the recorded result.
    if (call.taskId !== undefined && !readOnly.has(call.name)) return redacted(journal.sideEffect(call.taskId, call.name, call.args, signal, (idempotencyKey) => execute(call.name, call.args, signal, idempotencyKey, call.callId)));
    journal.flush();
    return redacted(execute(call.name, call.args, signal, undefined, call.callId));
  });
  const executeBatch = fromPromise<ToolResult[], ToolBatchInput>(({ input: batch, signal }) => redacted(transport.batch(batch.name, batch.calls, signal)));
  const expandPlan = fromPromise<PlanExpansion, PlanExpansionInput>(async ({ input }) => expander.expand(input));
  return supervisorMachine.provide({
    actions: { report },
    actors: {
      expandPlan,
      group: groupMachine.provide({
        actors: {
          agent: agentMachine.provide({ actions: { report, ...callModel }, actors: { beforeDispatch, beforeToolCall } }),
          fnStep: fnStepMachine.provide({ actors: { callFunction } }),
        },
      }),
      pool: poolMachine.provide({ actions: { report }, actors: { key: keyMachine.provide({ actions: { report } }) } }),
      breaker: breakerMachine.provide({ actions: { report } }),
      toolBus: toolBusMachine.provide({ actions: { report }, actors: { executeTool, executeBatch } }),
      ledger: ledgerMachine.provide({ actions: { report, balance: (_, balance: LedgerBalance) => onBalance(balance) } }),
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
