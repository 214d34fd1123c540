/**
 * The tool bus of one run (systemId `toolBus`): every agent's tool calls go through it, and each
 * caller gets exactly one TOOL.RESULT per TOOL.CALL.
 *
 *   ready ──call (window not full)──▶ collecting ──batchWindow passed / batchSize reached──▶ ready
 *                                                     (flush: the window's calls start)
 *
 * Each of the two has an `idle` child and a transient `routing` child: a TOOL.CALL is classified
 * once, by the `classifyCall` action, and `routing`'s `always` guards only read that verdict, so
 * guards stay pure (the `after` timer belongs to `collecting` itself: routing does not restart it).
 *
 * On the way in, a call is answered at once when its tool is unknown or a fresh cached result
 * exists; it joins an identical shareable call already waiting or running; otherwise it waits in
 * the batch window. A flush runs each batch tool's calls as ONE `executeBatch` child and every
 * other call as its own `executeTool` child, queued per server and started while the server has
 * fewer than `serverConcurrency` running. Each execution has a deadline (`callTimeout`): past it
 * the child is stopped (its AbortSignal fires) and its callers get a timeout error. Failures of a
 * tool are answers (`isError: true`), never failures of the bus.
 *
 * The bookkeeping (window, queues, cache, epochs, counters) lives in a mutable {@link ToolBook}
 * held by reference in context: see toolBusBook.ts.
 */
import { enqueueActions, fromPromise, sendTo, setup, stopChild } from 'xstate';
import type { DoneActorEvent, ErrorActorEvent } from 'xstate';
import { nowOf } from './clock.js';
import { childIdOf, enqueueReport } from './kit.js';
import type { RunEvent, ToolBatchInput, ToolBusEvent, ToolBusReply, ToolBusStatsReply, ToolExecInput, ToolResult } from './protocol.js';
import { ToolBook } from './toolBusBook.js';
import type { Execution, ExecutionOutcome, ToolBusInput, ToolBusStats } from './toolBusBook.js';

export { ToolBook, resolveConfig } from './toolBusBook.js';
export type { ToolBusConfig, ToolBusInput, ToolBusStats, ToolCallWaiter, ToolCounters } from './toolBusBook.js';

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

export interface ToolBusContext {
  /** All the bookkeeping, mutated in place (never copied per event). */
  book: ToolBook;
  /** The book's counters (the same object, updated in place), for the run report. */
  stats: ToolBusStats;
}

/** Raised (delayed by `callTimeout`) when an execution starts; cancelled when it ends in time. */
export type ToolBusDeadline = { type: 'toolBus.deadline'; executionId: string };

type BusEvent = ToolBusEvent | ToolBusDeadline | DoneActorEvent<unknown, string> | ErrorActorEvent<unknown, string>;
type ToolCall = Extract<ToolBusEvent, { type: 'TOOL.CALL' }>;

// ---------------------------------------------------------------------------------------------
// Pure helpers
// ---------------------------------------------------------------------------------------------


/** The id of an execution's delayed deadline event. */
const deadlineId = (executionId: string) => `deadline:${executionId}`;

const calledEvent = (event: ToolCall, shared: boolean, cached?: boolean): RunEvent =>
  cached
    ? { type: 'tool:called', taskId: event.taskId, name: event.name, shared, cached, callId: event.callId }
    : { type: 'tool:called', taskId: event.taskId, name: event.name, shared, callId: event.callId };

/** The named actions enqueued from inside others: setup() cannot type those, so the cast lives here. */
type Named =
  | { type: 'startExecution'; params: { execution: Execution } }
  | { type: 'finishExecution'; params: { id: string; outcome: ExecutionOutcome } };
const enqueueNamed = (enqueue: unknown, action: Named) => (enqueue as (action: Named) => void)(action);

// ---------------------------------------------------------------------------------------------
// The machine
// ---------------------------------------------------------------------------------------------

/**
 * One bus per run. src provides the executors:
 * `toolBusMachine.provide({ actors: { executeTool: fromPromise(...), executeBatch: fromPromise(...) } })`;
 * both must honour their `signal` (the bus stops a child that passed its deadline).
 *
 * @example
 * bus.send({ type: 'TOOL.CALL', callId: 'c1', taskId: 't1', name: 'fs.read_file', args: { path: 'a.ts' }, replyTo: agentRef });
 * // after the batch window, agentRef receives { type: 'TOOL.RESULT', callId: 'c1', content: '...', isError: false }
 */
/**
 * Where a TOOL.CALL goes, the same in `ready` and `collecting`: classified once (classifyCall),
 * then pure guards read the verdict. Only the targets differ: where a call that fills the
 * window goes (`filled`), and where one that waits in it goes (`added`).
 */
function routeCalls(to: { filled: string; added: string }) {
  return {
    initial: 'idle' as const,
    states: {
      idle: { on: { 'TOOL.CALL': { target: 'routing', actions: 'classifyCall' as const } } },
      routing: {
        always: [
          { guard: 'isUnknownTool' as const, target: 'idle', actions: 'rejectUnknownTool' as const },
          { guard: 'isCached' as const, target: 'idle', actions: 'answerFromCache' as const },
          { guard: 'joinsCallInFlight' as const, target: 'idle', actions: 'joinCall' as const },
          { guard: 'fillsWindow' as const, target: to.filled, actions: ['addToWindow' as const, 'flush' as const] },
          { target: to.added, actions: 'addToWindow' as const },
        ],
      },
    },
  };
}

export const toolBusMachine = setup({
  types: {
    input: {} as ToolBusInput,
    context: {} as ToolBusContext,
    events: {} as BusEvent,
  },
  actors: {
    executeTool: fromPromise<string, ToolExecInput>(async () => {
      throw new Error('no tool executor provided');
    }),
    executeBatch: fromPromise<ToolResult[], ToolBatchInput>(async () => {
      throw new Error('no batch executor provided');
    }),
  },
  delays: {
    /** How long the window stays open after its first call. */
    batchWindow: ({ context }) => context.book.config.batchWindowMs,
    /** The deadline of one execution. */
    callTimeout: ({ context }) => context.book.config.callTimeoutMs,
  },
  actions: {
    /** Tell the public event stream what happened; src replaces this no-op. */
    report: (_, _event: RunEvent) => {},
    /** Decides, once, how a call is answered: the routing guards read the book's verdict. */
    classifyCall: enqueueActions(({ context, event }) => {
      if (event.type === 'TOOL.CALL') context.book.classify(event);
    }),
    rejectUnknownTool: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CALL') return;
      context.book.take(event);
      const names = context.book.toolNames();
      const known = names.length === 0 ? 'none' : names.slice(0, 20).join(', ') + (names.length > 20 ? ', ...' : '');
      const content = `unknown tool "${event.name}": this run has these tools: ${known}`;
      enqueue.sendTo(event.replyTo, { type: 'TOOL.RESULT', callId: event.callId, content, isError: true } satisfies ToolBusReply);
      enqueueReport(enqueue, calledEvent(event, false));
      enqueueReport(enqueue, { type: 'tool:result', name: event.name, isError: true });
    }),
    answerFromCache: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CALL') return;
      const content = context.book.answerCached(event);
      enqueue.sendTo(event.replyTo, { type: 'TOOL.RESULT', callId: event.callId, content, isError: false } satisfies ToolBusReply);
      enqueueReport(enqueue, calledEvent(event, false, true));
    }),
    /** Add the caller to the identical call waiting or running. */
    joinCall: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CALL') return;
      context.book.join(event);
      enqueueReport(enqueue, calledEvent(event, true));
    }),
    addToWindow: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CALL') return;
      context.book.add(event);
      enqueueReport(enqueue, calledEvent(event, false));
    }),
    /** Close the window and start what the servers have room for. */
    flush: enqueueActions(({ context, enqueue }) => {
      for (const execution of context.book.flush()) enqueueNamed(enqueue, { type: 'startExecution', params: { execution } });
    }),
    /** Spawns an execution's child and arms its deadline. */
    startExecution: enqueueActions(({ context, enqueue }, { execution }: { execution: Execution }) => {
      const { id } = execution;
      const input = context.book.inputOf(execution);
      if ('calls' in input) enqueue.spawnChild('executeBatch', { id, input });
      else enqueue.spawnChild('executeTool', { id, input });
      const timeout = context.book.config.callTimeoutMs;
      // 0 or Infinity: no deadline (a timer of Infinity would fire at once).
      if (timeout > 0 && Number.isFinite(timeout)) enqueue.raise({ type: 'toolBus.deadline', executionId: id }, { id: deadlineId(id), delay: 'callTimeout' });
    }),
    /** An agent ended with calls out: it leaves them; executions nobody waits for any more stop. */
    withdraw: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'TOOL.CANCEL') return;
      for (const id of context.book.withdraw(event.taskId, event.callIds)) {
        enqueueNamed(enqueue, { type: 'finishExecution', params: { id, outcome: { kind: 'cancelled' } } });
      }
    }),
    /** The counters as they stand, a copy (the bus keeps counting in its own), to whoever asks. */
    tellStats: sendTo(
      ({ event }) => (event as Extract<ToolBusEvent, { type: 'TOOL.STATS.ASK' }>).replyTo,
      ({ context }) => ({ type: 'TOOL.STATS', stats: structuredClone(context.stats) }) satisfies ToolBusStatsReply,
    ),
    /** A child the bus has no record of finished: just make sure it is gone. */
    forgetChild: stopChild((_, params: { id: string }) => params.id),
    /** Answer everyone waiting on an execution that ended, and hand its slot on. */
    finishExecution: enqueueActions(({ context, enqueue }, params: { id: string; outcome: ExecutionOutcome }) => {
      // Stopping a child that passed its deadline aborts its signal: src cancels the request.
      enqueue.stopChild(params.id);
      if (params.outcome.kind !== 'timeout') enqueue.cancel(deadlineId(params.id));
      const finished = context.book.finish(params.id, params.outcome);
      if (!finished) return;
      for (const { replyTo, reply } of finished.replies) enqueue.sendTo(replyTo, reply);
      enqueueReport(enqueue, finished.report);
      for (const execution of finished.started) enqueueNamed(enqueue, { type: 'startExecution', params: { execution } });
    }),
  },
  guards: {
    // Pure: they read the verdict classifyCall stored, and change nothing.
    isUnknownTool: ({ context, event }) => event.type === 'TOOL.CALL' && context.book.verdictOn(event) === 'unknown',
    isCached: ({ context, event }) => event.type === 'TOOL.CALL' && context.book.verdictOn(event) === 'cached',
    joinsCallInFlight: ({ context, event }) => event.type === 'TOOL.CALL' && context.book.verdictOn(event) === 'join',
    fillsWindow: ({ context }) => context.book.fillsWindow(),
    isRunning: ({ context, event }) => context.book.isRunning(event.type === 'toolBus.deadline' ? event.executionId : childIdOf(event)),
  },
}).createMachine({
  id: 'toolBus',
  context: ({ input, self }) => {
    const book = new ToolBook(input, () => nowOf(self));
    return { book, stats: book.stats };
  },
  initial: 'ready',
  on: {
    // Every child of the bus is an executor. The last branch of each handler has no guard on
    // purpose: an unhandled xstate.error.actor.* would put the whole bus in error status.
    'xstate.done.actor.*': [
      {
        guard: 'isRunning',
        actions: { type: 'finishExecution', params: ({ event }) => ({ id: childIdOf(event), outcome: { kind: 'done', output: (event as DoneActorEvent).output } }) },
      },
      { actions: { type: 'forgetChild', params: ({ event }) => ({ id: childIdOf(event) }) } },
    ],
    'xstate.error.actor.*': [
      {
        guard: 'isRunning',
        actions: { type: 'finishExecution', params: ({ event }) => ({ id: childIdOf(event), outcome: { kind: 'error', error: (event as ErrorActorEvent).error } }) },
      },
      { actions: { type: 'forgetChild', params: ({ event }) => ({ id: childIdOf(event) }) } },
    ],
    'TOOL.CANCEL': { actions: 'withdraw' },
    'TOOL.STATS.ASK': { actions: 'tellStats' },
    'toolBus.deadline': {
      guard: 'isRunning',
      actions: { type: 'finishExecution', params: ({ event }) => ({ id: event.executionId, outcome: { kind: 'timeout' } }) },
    },
  },
  states: {
    /** No call waits in the window. */
    ready: {
      // No window (batchWindowMs 0) or a batch of one: straight through; else the window opens.
      ...routeCalls({ filled: 'idle', added: '#toolBus.collecting' }),
    },
    /** The window is open: new calls wait for it to close. */
    collecting: {
      after: { batchWindow: { target: 'ready', actions: 'flush' } },
      ...routeCalls({ filled: '#toolBus.ready', added: 'idle' }),
    },
  },
});
