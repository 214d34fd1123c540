/** Tool bus protocol: agent <-> toolBus (systemId `toolBus`), and what its executors are given. */
import type { AnyActorRef } from 'xstate';
import type { ToolBusStats } from '../toolBusTypes.js';

export type ToolBusEvent =
  | {
      type: 'TOOL.CALL';
      callId: string;
      taskId: string;
      name: string;
      args: unknown;
      replyTo: AnyActorRef;
    }
  /** The agent that made these calls ended before their results came: it waits no more. */
  | { type: 'TOOL.CANCEL'; taskId: string; callIds: string[] }
  /** The bus's counters, asked for once as the run ends (the supervisor): answered with TOOL.STATS. */
  | { type: 'TOOL.STATS.ASK'; replyTo: AnyActorRef };

export type ToolBusReply = { type: 'TOOL.RESULT'; callId: string; content: string; isError: boolean };

/** The answer to TOOL.STATS.ASK: a copy of the counters as they stand (the bus keeps counting in its own). */
export type ToolBusStatsReply = { type: 'TOOL.STATS'; stats: ToolBusStats };

/** What the bus asks of the `executeTool` actor. It resolves with the result text, rejects on error. */
export interface ToolExecInput {
  name: string;
  args: unknown;
  /** The task whose call this is, when it is one task's alone (not shared): side effects are journaled by it. */
  taskId?: string;
  /** The model's id of the call (the first caller's, when identical calls share this execution). */
  callId?: string;
}

/**
 * What the bus asks of the `executeBatch` actor: several calls of one tool that has a batch
 * handler, in one go. It resolves with one result per call, in order.
 */
export interface ToolBatchInput {
  name: string;
  calls: unknown[];
}

/** One call's result, as a batch returns it. */
export interface ToolResult {
  content: string;
  isError: boolean;
}

/** What the bus knows of each tool it serves. */
export interface BusTool {
  /** As the model calls it: `<server>.<tool>` for MCP tools, the plain name for local ones. */
  name: string;
  /** Its server (`local` for in-process tools): cache invalidation and concurrency are per server. */
  server: string;
  /** Identical concurrent calls may share one execution, and results may be cached. */
  shareable: boolean;
  /** A call to a tool that is not read-only clears its server's cache. */
  readOnly: boolean;
  /** It has a batch handler (`executeBatch`). */
  batch: boolean;
}
