/**
 * The tool bus's bookkeeping: the tools and their servers, the batch window, the per-server
 * FIFOs of executions waiting for a slot, the executions running, the in-flight index that lets
 * identical calls join, the result cache and the counters. Pure logic with no I/O, mutable on
 * purpose: the bus keeps one instance in its context by reference, so a call costs O(1)
 * amortized (plus the size of its arguments, for its key) and never copies a table.
 *
 * Cache consistency rests on a per-server epoch: every dispatch and every end of a call to a
 * tool that is not read-only bumps it and drops the server's cache. A read is cached only if its
 * server's epoch did not move while it ran, and new calls join only a read started in the
 * current epoch, so nobody is handed a result that may predate a write they could have seen.
 */
import type { AnyActorRef } from 'xstate';
import { canonicalJson, toolCallKey } from './canonical.js';
import type { BusTool, RunEvent, ToolBatchInput, ToolBusEvent, ToolBusReply, ToolExecInput, ToolResult } from './protocol.js';

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

type ToolCall = Extract<ToolBusEvent, { type: 'TOOL.CALL' }>;

interface ServerBook {
  readonly name: string;
  running: number;
  readonly queue: Fifo<Execution>;
  /** Bumped by every dispatch and end of a non-read-only call. */
  epoch: number;
  /** toolCallKey -> result, in insertion order, which is also expiry order (one TTL for all). */
  cache: Map<string, { content: string; expiresAt: number }>;
}

interface ToolEntry {
  readonly tool: BusTool;
  readonly server: ServerBook;
  readonly counters: ToolCounters;
}

/** One distinct call and everyone waiting for it. */
interface UniqueCall {
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
class Fifo<T> {
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

const zeroCounters = (): ToolCounters => ({ requested: 0, executed: 0, deduplicated: 0, cached: 0, failed: 0, timedOut: 0 });

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

/** An executor should resolve with a string; anything else is written as JSON rather than lost. */
export function resultText(output: unknown): string {
  if (typeof output === 'string') return output;
  try {
    return canonicalJson(output);
  } catch {
    return String(output);
  }
}

/** The message of whatever an executor rejected with (an Error, an ErrorInfo, a string...). */
export function errorText(error: unknown): string {
  if (typeof error === 'string') return error;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message === 'string' && message !== '') return message;
  return `tool failed: ${resultText(error)}`;
}

/** The results of an execution, one per unique call, in order. */
function resultsOf(execution: Execution, outcome: ExecutionOutcome, timeoutMs: number): ToolResult[] {
  const { calls, tool } = execution;
  const name = tool.tool.name;
  if (outcome.kind === 'timeout') return calls.map(() => ({ content: `tool "${name}" timed out after ${timeoutMs} ms`, isError: true }));
  if (outcome.kind === 'cancelled') return calls.map(() => ({ content: `tool "${name}" was stopped: the tasks that called it ended`, isError: true }));
  if (outcome.kind === 'error') return calls.map(() => ({ content: errorText(outcome.error), isError: true }));
  if (!execution.batch) return [{ content: resultText(outcome.output), isError: false }];
  // A batch executor that miscounts fails only the calls it left without a result.
  const list = Array.isArray(outcome.output) ? (outcome.output as unknown[]) : [];
  return calls.map((_, i) => {
    const r = list[i] as Partial<ToolResult> | string | undefined;
    if (typeof r === 'string') return { content: r, isError: false };
    if (r !== null && typeof r === 'object' && typeof r.content === 'string') return { content: r.content, isError: r.isError === true };
    return { content: `batch executor of "${name}" returned ${list.length} results for ${calls.length} calls`, isError: true };
  });
}

// ---------------------------------------------------------------------------------------------
// The book
// ---------------------------------------------------------------------------------------------

export class ToolBook {
  readonly config: ToolBusConfig;
  readonly stats: ToolBusStats;
  private readonly tools = new Map<string, ToolEntry>();
  private readonly servers = new Map<string, ServerBook>();
  /** Unique calls of the open batch window, in arrival order. */
  private pending: UniqueCall[] = [];
  /** Shareable unique calls not yet answered (in the window, queued or running), by key. */
  private readonly inFlight = new Map<string, UniqueCall>();
  private readonly running = new Map<string, Execution>();
  private nextExecution = 0;
  /** The verdict on the call being handled: guards and then its action ask for it. */
  private memo: { event: ToolCall; verdict: CallVerdict } | undefined;

  /** `now` reads the actor system's clock (guards have no `self`). */
  constructor(
    input: ToolBusInput,
    private readonly now: () => number,
  ) {
    this.config = resolveConfig(input);
    const byTool: [string, ToolCounters][] = [];
    for (const tool of input.tools) {
      let server = this.servers.get(tool.server);
      if (!server) {
        server = { name: tool.server, running: 0, queue: new Fifo(), epoch: 0, cache: new Map() };
        this.servers.set(tool.server, server);
      }
      const counters = zeroCounters();
      this.tools.set(tool.name, { tool, server, counters });
      byTool.push([tool.name, counters]);
    }
    // fromEntries, not assignment: a tool may be named `__proto__`.
    this.stats = { ...zeroCounters(), unknown: 0, executions: 0, byTool: Object.fromEntries(byTool) };
  }

  /** The names of the tools, for error messages. */
  toolNames(): string[] {
    return [...this.tools.keys()];
  }

  /** Sizes, for tests and the inspector. */
  sizes(): { pending: number; queued: number; running: number; inFlight: number; cached: number } {
    let queued = 0;
    let cached = 0;
    for (const s of this.servers.values()) {
      queued += s.queue.size;
      cached += s.cache.size;
    }
    return { pending: this.pending.length, queued, running: this.running.size, inFlight: this.inFlight.size, cached };
  }

  /** Executions running on `server` now. */
  runningOn(server: string): number {
    return this.servers.get(server)?.running ?? 0;
  }

  isRunning(id: string): boolean {
    return this.running.has(id);
  }

  /** Whether adding one more unique call closes the window now. */
  fillsWindow(): boolean {
    return this.config.batchWindowMs <= 0 || this.pending.length + 1 >= this.config.batchSize;
  }

  /** How the bus will answer `event` (memoized until {@link take}). */
  classify(event: ToolCall): CallVerdict {
    if (this.memo?.event === event) return this.memo.verdict;
    const verdict = this.decide(event);
    this.memo = { event, verdict };
    return verdict;
  }

  /** The verdict on `event`, for the action that acts on it: counted as requested. */
  take(event: ToolCall): CallVerdict {
    const verdict = this.classify(event);
    this.memo = undefined;
    this.stats.requested++;
    if (verdict.kind === 'unknown') this.stats.unknown++;
    else verdict.tool.counters.requested++;
    return verdict;
  }

  /** Answers from the cache: the content. */
  answerCached(event: ToolCall): string {
    const verdict = this.take(event);
    if (verdict.kind !== 'cached') throw new Error('toolBus: answerCached without a cache hit');
    this.count(verdict.tool, 'cached');
    return verdict.content;
  }

  join(event: ToolCall): void {
    const verdict = this.take(event);
    if (verdict.kind !== 'join') throw new Error('toolBus: join without a call in flight');
    verdict.call.waiters.push({ callId: event.callId, taskId: event.taskId, replyTo: event.replyTo });
    this.count(verdict.tool, 'deduplicated');
  }

  /** Puts a new unique call in the batch window. */
  add(event: ToolCall): void {
    const verdict = this.take(event);
    if (verdict.kind !== 'new') throw new Error('toolBus: add of a call that is not new');
    const call: UniqueCall = {
      tool: verdict.tool,
      args: event.args,
      key: verdict.key,
      waiters: [{ callId: event.callId, taskId: event.taskId, replyTo: event.replyTo }],
    };
    this.pending.push(call);
    if (call.key !== undefined) this.inFlight.set(call.key, call);
  }

  /**
   * Closes the window: each batch tool's calls become one execution, every other call its own,
   * queued on their servers in order. Returns the executions that start now.
   */
  flush(): Execution[] {
    const pending = this.pending;
    this.pending = [];
    const batches = new Map<ToolEntry, Execution>();
    const servers = new Set<ServerBook>();
    for (const call of pending) {
      let execution = call.tool.tool.batch ? batches.get(call.tool) : undefined;
      if (!execution) {
        execution = { id: `tool:${this.nextExecution++}`, tool: call.tool, batch: call.tool.tool.batch, calls: [], running: false, startedAt: 0, epoch: 0 };
        if (execution.batch) batches.set(call.tool, execution);
        call.tool.server.queue.push(execution);
        servers.add(call.tool.server);
      }
      execution.calls.push(call);
      call.execution = execution;
    }
    const started: Execution[] = [];
    for (const server of servers) this.drain(server, started);
    return started;
  }

  /** What the executor child of `execution` is given. */
  inputOf(execution: Execution): ToolExecInput | ToolBatchInput {
    const name = execution.tool.tool.name;
    if (execution.batch) return { name, calls: execution.calls.map((c) => c.args) };
    const call = execution.calls[0];
    // A call nobody shares is one task's own: its side effects are journaled under that task.
    return execution.tool.tool.shareable ? { name, args: call.args } : { name, args: call.args, taskId: call.waiters[0].taskId };
  }

  /** Ends a running execution; undefined when `id` is not running (stale or unknown). */
  finish(id: string, outcome: ExecutionOutcome): Finished | undefined {
    const execution = this.running.get(id);
    if (!execution) return undefined;
    this.running.delete(id);
    execution.running = false;
    const { tool } = execution;
    const server = tool.server;
    server.running--;
    const now = this.now();
    const results = resultsOf(execution, outcome, this.config.callTimeoutMs);
    // Cached only if no write began or ended on the server while it ran.
    const cacheable = this.cacheable(tool) && execution.epoch === server.epoch;
    const replies: Finished['replies'] = [];
    execution.calls.forEach((call, i) => {
      const result = results[i];
      if (outcome.kind === 'timeout') this.count(tool, 'timedOut');
      else if (result.isError && outcome.kind !== 'cancelled') this.count(tool, 'failed');
      if (call.key !== undefined) {
        if (this.inFlight.get(call.key) === call) this.inFlight.delete(call.key);
        if (cacheable && !result.isError) {
          this.sweep(server, now);
          server.cache.delete(call.key);
          server.cache.set(call.key, { content: result.content, expiresAt: now + this.config.cacheTtlMs });
        }
      }
      for (const w of call.waiters) {
        replies.push({ replyTo: w.replyTo, reply: { type: 'TOOL.RESULT', callId: w.callId, content: result.content, isError: result.isError } });
      }
    });
    // A write that ended (or gave up) may have changed what any earlier read saw.
    if (!tool.tool.readOnly) this.invalidate(server);
    const report: Finished['report'] = {
      type: 'tool:result',
      name: tool.tool.name,
      isError: outcome.kind !== 'done' || results.some((r) => r.isError),
      durationMs: now - execution.startedAt,
    };
    if (outcome.kind === 'timeout') report.timedOut = true;
    if (outcome.kind === 'cancelled') report.cancelled = true;
    if (execution.batch) report.batch = execution.calls.length;
    const started: Execution[] = [];
    this.drain(server, started);
    return { replies, report, started };
  }

  /**
   * An agent that ended waits no more for these calls: its waiters leave them. A call left with
   * no waiter is dropped from the window or the queue; returns the running executions that no
   * call of which anybody waits for (the machine stops them). O(the bus's calls in flight).
   */
  withdraw(taskId: string, callIds: readonly string[]): string[] {
    const ids = new Set(callIds);
    const leave = (call: UniqueCall): boolean => {
      for (let i = call.waiters.length - 1; i >= 0; i--) {
        const w = call.waiters[i]!;
        if (w.taskId === taskId && ids.has(w.callId)) call.waiters.splice(i, 1);
      }
      const orphan = call.waiters.length === 0;
      if (orphan && call.key !== undefined && this.inFlight.get(call.key) === call) this.inFlight.delete(call.key);
      return orphan;
    };
    this.pending = this.pending.filter((call) => !leave(call));
    for (const server of this.servers.values()) for (const execution of server.queue.values()) for (const call of execution.calls) leave(call);
    const stop: string[] = [];
    for (const execution of this.running.values()) {
      let orphans = 0;
      for (const call of execution.calls) if (leave(call)) orphans++;
      if (orphans === execution.calls.length) stop.push(execution.id);
    }
    return stop;
  }

  // -------------------------------------------------------------------------------------------

  private decide(event: ToolCall): CallVerdict {
    const tool = this.tools.get(event.name);
    if (!tool) return { kind: 'unknown' };
    const key = this.shareKey(tool, event.args);
    if (key === undefined) return { kind: 'new', tool, key };
    if (this.cacheable(tool)) {
      const server = tool.server;
      this.sweep(server, this.now());
      const hit = server.cache.get(key);
      if (hit) return { kind: 'cached', tool, content: hit.content };
    }
    const call = this.inFlight.get(key);
    // Not yet started, or started since the last write on its server: safe to join.
    if (call && (!call.execution?.running || call.execution.epoch === tool.server.epoch)) return { kind: 'join', tool, call };
    return { kind: 'new', tool, key };
  }

  /**
   * The key under which a call may be shared, or undefined: sharing off, tool not shareable, or
   * arguments with no JSON spelling (a cycle, a BigInt), in which case it simply runs on its own.
   */
  private shareKey(tool: ToolEntry, args: unknown): string | undefined {
    if (!this.config.share || !tool.tool.shareable) return undefined;
    try {
      return toolCallKey(tool.tool.name, args);
    } catch {
      return undefined;
    }
  }

  /** A shareable tool that writes is still deduplicated in flight, but its results are never reused later. */
  private cacheable(tool: ToolEntry): boolean {
    return this.config.share && this.config.cacheTtlMs > 0 && tool.tool.shareable && tool.tool.readOnly;
  }

  /** Drops expired entries from the front: each entry is dropped once, so O(1) amortized. */
  private sweep(server: ServerBook, now: number): void {
    for (const [key, entry] of server.cache) {
      if (entry.expiresAt > now) break;
      server.cache.delete(key);
    }
  }

  private invalidate(server: ServerBook): void {
    server.epoch++;
    if (server.cache.size > 0) server.cache = new Map();
  }

  /** Starts queued executions of `server` while it has free slots. */
  private drain(server: ServerBook, started: Execution[]): void {
    while (server.running < this.config.serverConcurrency) {
      const execution = server.queue.shift();
      if (!execution) return;
      // Everyone who asked for it has gone (their agents ended): it does not run.
      if (execution.calls.every((c) => c.waiters.length === 0)) continue;
      if (!execution.tool.tool.readOnly) this.invalidate(server);
      execution.running = true;
      execution.startedAt = this.now();
      execution.epoch = server.epoch;
      server.running++;
      this.running.set(execution.id, execution);
      this.stats.executions++;
      this.stats.executed += execution.calls.length;
      execution.tool.counters.executed += execution.calls.length;
      started.push(execution);
    }
  }

  private count(tool: ToolEntry, counter: keyof ToolCounters): void {
    this.stats[counter]++;
    tool.counters[counter]++;
  }
}
