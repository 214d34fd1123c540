/**
 * The tool bus of one run (systemId `toolBus`): every agent's tool calls go through it. It runs
 * each call as an `executeTool` child actor and answers the caller with TOOL.RESULT. When a tool
 * is shareable (read-only, closed-world, trusted: decided by src from the config and the server's
 * annotations) and an identical call is already running, the new caller joins that execution
 * instead of starting another one.
 *
 * There is no cache of finished results here: once an execution ends, an identical call runs
 * again. Failures of a tool are answers (`isError: true`), never failures of the bus.
 */
import { enqueueActions, fromPromise, setup, stopChild } from 'xstate';
import type { AnyActorRef, DoneActorEvent, ErrorActorEvent } from 'xstate';
import { nowOf } from './clock.js';
import { canonicalJson, toolCallKey } from './canonical.js';
import type { RunEvent, ToolBusEvent, ToolBusReply, ToolExecInput } from './protocol.js';

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/** The tools of the run, as the spawner knows them. */
export interface ToolBusInput {
  tools: { name: string; shareable: boolean }[];
}

/** Plain counters, for the run report. `requested - executed - deduplicated` calls named an unknown tool. */
export interface ToolBusStats {
  /** TOOL.CALLs received. */
  requested: number;
  /** Executions started. */
  executed: number;
  /** Calls that joined an identical execution already in flight. */
  deduplicated: number;
  /** Executions that ended with an error. */
  failed: number;
}

/** A caller waiting for the result of an execution. */
export interface ToolCallWaiter {
  callId: string;
  taskId: string;
  replyTo: AnyActorRef;
}

/** One running `executeTool` child and everyone waiting for it. */
export interface ToolExecution {
  name: string;
  /** The toolCallKey under which identical calls can join; absent when the call is not shared. */
  shareKey?: string;
  waiters: ToolCallWaiter[];
  startedAt: number;
}

export interface ToolBusContext {
  tools: Record<string, { shareable: boolean }>;
  /** Executions in flight, by the id of their `executeTool` child. */
  executions: Record<string, ToolExecution>;
  /** toolCallKey -> child id, for shareable executions in flight. */
  sharedInFlight: Record<string, string>;
  /** Source of unique child ids (`tool:<n>`). */
  nextExecution: number;
  stats: ToolBusStats;
}

type ToolCall = Extract<ToolBusEvent, { type: 'TOOL.CALL' }>;

// ---------------------------------------------------------------------------------------------
// Pure helpers
// ---------------------------------------------------------------------------------------------

function isKnownTool(context: ToolBusContext, name: string): boolean {
  return Object.hasOwn(context.tools, name);
}

/**
 * The key under which `call` may share an execution, or undefined when it may not: the tool is
 * not shareable, or its arguments have no JSON spelling (a cycle, a BigInt), in which case it
 * simply runs on its own.
 */
function shareKeyOf(context: ToolBusContext, call: ToolCall): string | undefined {
  if (!isKnownTool(context, call.name) || !context.tools[call.name].shareable) return undefined;
  try {
    return toolCallKey(call.name, call.args);
  } catch {
    return undefined;
  }
}

/** The child id of an identical shareable execution in flight, if any. */
function joinableExecution(context: ToolBusContext, call: ToolCall): string | undefined {
  const key = shareKeyOf(context, call);
  return key !== undefined && Object.hasOwn(context.sharedInFlight, key) ? context.sharedInFlight[key] : undefined;
}

/** An executor should resolve with a string; anything else is written as JSON rather than lost. */
function resultText(output: unknown): string {
  if (typeof output === 'string') return output;
  try {
    return canonicalJson(output);
  } catch {
    return String(output);
  }
}

/** The message of whatever an executor rejected with (an Error, an ErrorInfo, a string...). */
function errorText(error: unknown): string {
  if (typeof error === 'string') return error;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message === 'string' && message !== '') return message;
  return `tool failed: ${resultText(error)}`;
}

function withoutKey<T>(record: Record<string, T>, key: string | undefined): Record<string, T> {
  if (key === undefined || !Object.hasOwn(record, key)) return record;
  const { [key]: _dropped, ...rest } = record;
  return rest;
}

/** The tool:result run event of an execution that just ended (before it is forgotten). */
function toolResultEvent(context: ToolBusContext, id: string, isError: boolean, now: number): RunEvent {
  const execution = context.executions[id];
  return { type: 'tool:result', name: execution.name, isError, durationMs: now - execution.startedAt };
}

/** The id part of `xstate.done.actor.<id>` / `xstate.error.actor.<id>`. */
function childIdOf(event: { type: string; actorId?: string }): string {
  return event.actorId ?? event.type.replace(/^xstate\.(done|error)\.actor\./, '');
}

// ---------------------------------------------------------------------------------------------
// The machine
// ---------------------------------------------------------------------------------------------

/**
 * One bus per run. src provides `executeTool` (MCP client or local function) with
 * `toolBusMachine.provide({ actors: { executeTool: fromPromise(...) } })`.
 *
 * @example
 * bus.send({ type: 'TOOL.CALL', callId: 'c1', taskId: 't1', name: 'read_file', args: { path: 'a.ts' }, replyTo: agentRef });
 * // agentRef receives { type: 'TOOL.RESULT', callId: 'c1', content: '...', isError: false }
 */
export const toolBusMachine = setup({
  types: {
    input: {} as ToolBusInput,
    context: {} as ToolBusContext,
    events: {} as ToolBusEvent | DoneActorEvent<unknown, string> | ErrorActorEvent<unknown, string>,
  },
  actors: {
    executeTool: fromPromise<string, ToolExecInput>(async () => {
      throw new Error('no tool executor provided');
    }),
  },
  actions: {
    /** Tell the public event stream what happened; src replaces this no-op. */
    report: (_, _event: RunEvent) => {},
    rejectUnknownTool: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CALL') return;
      const names = Object.keys(context.tools);
      const known = names.length === 0 ? 'none' : names.slice(0, 20).join(', ') + (names.length > 20 ? ', ...' : '');
      const reply: ToolBusReply = {
        type: 'TOOL.RESULT',
        callId: event.callId,
        content: `unknown tool "${event.name}": this run has these tools: ${known}`,
        isError: true,
      };
      enqueue.sendTo(event.replyTo, reply);
      enqueue.assign({ stats: { ...context.stats, requested: context.stats.requested + 1 } });
    }),
    /** Add the caller to the identical execution in flight. */
    joinExecution: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CALL') return;
      const id = joinableExecution(context, event)!;
      const execution = context.executions[id];
      const waiter: ToolCallWaiter = { callId: event.callId, taskId: event.taskId, replyTo: event.replyTo };
      enqueue.assign({
        executions: { ...context.executions, [id]: { ...execution, waiters: [...execution.waiters, waiter] } },
        stats: { ...context.stats, requested: context.stats.requested + 1, deduplicated: context.stats.deduplicated + 1 },
      });
    }),
    startExecution: enqueueActions(({ context, event, enqueue, self }) => {
      if (event.type !== 'TOOL.CALL') return;
      const id = `tool:${context.nextExecution}`;
      const shareKey = shareKeyOf(context, event);
      const execution: ToolExecution = {
        name: event.name,
        shareKey,
        waiters: [{ callId: event.callId, taskId: event.taskId, replyTo: event.replyTo }],
        startedAt: nowOf(self),
      };
      enqueue.assign({
        executions: { ...context.executions, [id]: execution },
        sharedInFlight: shareKey === undefined ? context.sharedInFlight : { ...context.sharedInFlight, [shareKey]: id },
        nextExecution: context.nextExecution + 1,
        stats: { ...context.stats, requested: context.stats.requested + 1, executed: context.stats.executed + 1 },
      });
      const input: ToolExecInput = { name: event.name, args: event.args };
      enqueue.spawnChild('executeTool', { id, input });
    }),
    /** A child the bus has no record of finished: just make sure it is gone. */
    forgetChild: stopChild((_, params: { id: string }) => params.id),
    /** Answer everyone waiting on a finished execution, then forget it and its child. */
    finishExecution: enqueueActions(({ context, enqueue }, params: { id: string; content: string; isError: boolean }) => {
      enqueue.stopChild(params.id);
      if (!Object.hasOwn(context.executions, params.id)) return;
      const execution = context.executions[params.id];
      for (const waiter of execution.waiters) {
        const reply: ToolBusReply = { type: 'TOOL.RESULT', callId: waiter.callId, content: params.content, isError: params.isError };
        enqueue.sendTo(waiter.replyTo, reply);
      }
      enqueue.assign({
        executions: withoutKey(context.executions, params.id),
        // Only if the key still points at this execution (it always should, but stay exact).
        sharedInFlight:
          execution.shareKey !== undefined && context.sharedInFlight[execution.shareKey] === params.id
            ? withoutKey(context.sharedInFlight, execution.shareKey)
            : context.sharedInFlight,
        stats: params.isError ? { ...context.stats, failed: context.stats.failed + 1 } : context.stats,
      });
    }),
  },
  guards: {
    isExecutionInFlight: ({ context, event }) => Object.hasOwn(context.executions, childIdOf(event)),
    isUnknownTool: ({ context, event }) => event.type === 'TOOL.CALL' && !isKnownTool(context, event.name),
    joinsExecutionInFlight: ({ context, event }) => event.type === 'TOOL.CALL' && joinableExecution(context, event) !== undefined,
  },
}).createMachine({
  id: 'toolBus',
  context: ({ input }) => ({
    tools: Object.fromEntries(input.tools.map((t) => [t.name, { shareable: t.shareable }])),
    executions: {},
    sharedInFlight: {},
    nextExecution: 0,
    stats: { requested: 0, executed: 0, deduplicated: 0, failed: 0 },
  }),
  initial: 'ready',
  states: {
    ready: {
      on: {
        'TOOL.CALL': [
          {
            guard: 'isUnknownTool',
            actions: [
              'rejectUnknownTool',
              { type: 'report', params: ({ event }) => ({ type: 'tool:called', taskId: event.taskId, name: event.name, shared: false }) },
              { type: 'report', params: ({ event }) => ({ type: 'tool:result', name: event.name, isError: true }) },
            ],
          },
          {
            guard: 'joinsExecutionInFlight',
            actions: [
              'joinExecution',
              { type: 'report', params: ({ event }) => ({ type: 'tool:called', taskId: event.taskId, name: event.name, shared: true }) },
            ],
          },
          {
            actions: [
              'startExecution',
              { type: 'report', params: ({ event }) => ({ type: 'tool:called', taskId: event.taskId, name: event.name, shared: false }) },
            ],
          },
        ],
        // Every child of the bus is an executor. The last branch of each handler has no guard on
        // purpose: an unhandled xstate.error.actor.* would put the whole bus in error status.
        'xstate.done.actor.*': [
          {
            guard: 'isExecutionInFlight',
            actions: [
              // Inline only because action params cannot read the clock (`self`).
              enqueueActions(({ context, event, self, enqueue }) =>
                enqueue({ type: 'report', params: toolResultEvent(context, childIdOf(event), false, nowOf(self)) }),
              ),
              {
                type: 'finishExecution',
                params: ({ event }) => ({ id: childIdOf(event), content: resultText((event as DoneActorEvent).output), isError: false }),
              },
            ],
          },
          { actions: { type: 'forgetChild', params: ({ event }) => ({ id: childIdOf(event) }) } },
        ],
        'xstate.error.actor.*': [
          {
            guard: 'isExecutionInFlight',
            actions: [
              // Inline only because action params cannot read the clock (`self`).
              enqueueActions(({ context, event, self, enqueue }) =>
                enqueue({ type: 'report', params: toolResultEvent(context, childIdOf(event), true, nowOf(self)) }),
              ),
              {
                type: 'finishExecution',
                params: ({ event }) => ({ id: childIdOf(event), content: errorText((event as ErrorActorEvent).error), isError: true }),
              },
            ],
          },
          { actions: { type: 'forgetChild', params: ({ event }) => ({ id: childIdOf(event) }) } },
        ],
      },
    },
  },
});
