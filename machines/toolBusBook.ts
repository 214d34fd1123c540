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
import { toolCallKey } from './canonical.js';
import type { ToolBatchInput, ToolExecInput } from './protocol.js';
import { resultsOf } from './toolBusResults.js';
import { Fifo, resolveConfig, zeroCounters } from './toolBusTypes.js';
import type { CallVerdict, Execution, ExecutionOutcome, Finished, ServerBook, ToolBusConfig, ToolBusInput, ToolBusStats, ToolCall, ToolCounters, ToolEntry, UniqueCall } from './toolBusTypes.js';

export { resolveConfig } from './toolBusTypes.js';
export { errorText, resultText } from './toolBusResults.js';
export type * from './toolBusTypes.js';

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
  /** The verdict on the call being handled, set by {@link classify} and used up by {@link take}. */
  private verdict: { event: ToolCall; verdict: CallVerdict } | undefined;

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

  /**
   * Decides how the bus answers `event` and keeps the verdict until {@link take}: the one place a
   * call is classified, called from an action, so the guards that route it only read the verdict
   * ({@link verdictOn}) and evaluating them twice changes nothing. Deciding drops expired cache
   * entries of the tool's server.
   */
  classify(event: ToolCall): CallVerdict {
    const verdict = this.decide(event);
    this.verdict = { event, verdict };
    return verdict;
  }

  /** The kind of the verdict {@link classify} gave `event`; undefined when it was not classified. Reads only. */
  verdictOn(event: ToolCall): CallVerdict['kind'] | undefined {
    return this.verdict?.event === event ? this.verdict.verdict.kind : undefined;
  }

  /** The verdict on `event`, for the action that acts on it: counted as requested. */
  take(event: ToolCall): CallVerdict {
    if (this.verdict?.event !== event) throw new Error(`toolBus: call ${event.callId} was not classified before it was handled`);
    const { verdict } = this.verdict;
    this.verdict = undefined;
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
    const callId = call.waiters[0].callId;
    return execution.tool.tool.shareable ? { name, args: call.args, callId } : { name, args: call.args, taskId: call.waiters[0].taskId, callId };
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
