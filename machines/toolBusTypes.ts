/**
 * The tool bus's types and its small pure pieces: what it is spawned with, its counters, the
 * records the book keeps per tool, server, unique call and execution, the verdict on a call, and
 * the FIFO the servers queue executions in. The book itself is in toolBusBook.ts.
 */
import type { AnyActorRef } from 'xstate';
import type { BusTool, RunEvent, ToolBusEvent, ToolBusReply } from './protocol.js';

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/** What the bus is spawned with. */
export interface ToolBusInput {
  tools: BusTool[];
  /** How long the batch window stays open after its first call. Default 10; 0 flushes every call at once. */
  batchWindowMs?: number;
  /** Unique calls that flush the window early. Default 16. */
  batchSize?: number;
  /** How long a successful result of a shareable, read-only tool is reused. Default 300000; 0 disables the cache. */
  cacheTtlMs?: number;
  /** Deadline of each execution. Default 60000; 0 (or Infinity) means none. */
  callTimeoutMs?: number;
  /** Executions running at once on one server. Default 8. */
  serverConcurrency?: number;
  /** Default true; false turns off dedup and the cache (the benchmark's baseline). */
  share?: boolean;
}

export type ToolBusConfig = Required<Omit<ToolBusInput, 'tools'>>;

/** Counters of one tool. Once everything has finished, `requested = executed + deduplicated + cached`. */
export interface ToolCounters {
  /** TOOL.CALLs received. */
  requested: number;
  /** Calls that ran (alone, or as one entry of a batch). */
  executed: number;
  /** Calls that joined an identical call in flight (or waiting in the window or for a slot). */
  deduplicated: number;
  /** Calls answered from the cache. */
  cached: number;
  /** Executed calls whose result was an error (timeouts not included). */
  failed: number;
  /** Executed calls that passed their deadline. */
  timedOut: number;
}

/** Totals over all tools, plus each tool's counters. */
export interface ToolBusStats extends ToolCounters {
  /** Calls naming no tool of the run (counted in `requested` only here, in no tool). */
  unknown: number;
  /** Executor children started: a batch is one. */
  executions: number;
  byTool: Record<string, ToolCounters>;
}

/** A caller waiting for a result. */
export interface ToolCallWaiter {
  callId: string;
  taskId: string;
  replyTo: AnyActorRef;
}

export type ToolCall = Extract<ToolBusEvent, { type: 'TOOL.CALL' }>;

export interface ServerBook {
  readonly name: string;
  running: number;
  readonly queue: Fifo<Execution>;
  /** Bumped by every dispatch and end of a non-read-only call. */
  epoch: number;
  /** toolCallKey -> result, in insertion order, which is also expiry order (one TTL for all). */
  cache: Map<string, { content: string; expiresAt: number }>;
}

export interface ToolEntry {
  readonly tool: BusTool;
  readonly server: ServerBook;
  readonly counters: ToolCounters;
}

/** One distinct call and everyone waiting for it. */
export interface UniqueCall {
  readonly tool: ToolEntry;
  readonly args: unknown;
  /** Under which identical calls join it; absent when it may not be shared. */
  readonly key: string | undefined;
  readonly waiters: ToolCallWaiter[];
  execution?: Execution;
}

/** One executor child: a single call (`executeTool`) or a batch of one tool's calls (`executeBatch`). */
export interface Execution {
  /** The child's id, `tool:<n>`. */
  readonly id: string;
  readonly tool: ToolEntry;
  readonly batch: boolean;
  readonly calls: UniqueCall[];
  running: boolean;
  startedAt: number;
  /** Its server's epoch when it started. */
  epoch: number;
}

/** How the bus decides to answer a call. */
export type CallVerdict =
  | { kind: 'unknown' }
  | { kind: 'cached'; tool: ToolEntry; content: string }
  | { kind: 'join'; tool: ToolEntry; call: UniqueCall }
  | { kind: 'new'; tool: ToolEntry; key: string | undefined };

/** How an execution ended. */
export type ExecutionOutcome = { kind: 'done'; output: unknown } | { kind: 'error'; error: unknown } | { kind: 'timeout' } | { kind: 'cancelled' };

/** What the machine must do after an execution ended. */
export interface Finished {
  replies: { replyTo: AnyActorRef; reply: ToolBusReply }[];
  report: Extract<RunEvent, { type: 'tool:result' }>;
  /** Executions of the same server that got the freed slot. */
  started: Execution[];
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** A FIFO with O(1) amortized push and shift. */
export class Fifo<T> {
  private items: T[] = [];
  private head = 0;
  get size(): number {
    return this.items.length - this.head;
  }
  push(item: T): void {
    this.items.push(item);
  }
  /** The items still in it, oldest first. */
  *values(): IterableIterator<T> {
    for (let i = this.head; i < this.items.length; i++) yield this.items[i]!;
  }
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head++];
    if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

export const zeroCounters = (): ToolCounters => ({ requested: 0, executed: 0, deduplicated: 0, cached: 0, failed: 0, timedOut: 0 });

/** The defaults of {@link ToolBusInput}. */
export function resolveConfig(input: ToolBusInput): ToolBusConfig {
  return {
    batchWindowMs: input.batchWindowMs ?? 10,
    batchSize: Math.max(1, input.batchSize ?? 16),
    cacheTtlMs: input.cacheTtlMs ?? 300_000,
    callTimeoutMs: input.callTimeoutMs ?? 60_000,
    serverConcurrency: Math.max(1, input.serverConcurrency ?? 8),
    share: input.share ?? true,
  };
}
