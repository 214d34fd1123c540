import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createMachine, fromPromise, SimulatedClock } from 'xstate';
import { canonicalJson } from '../../machines/canonical.js';
import type { BusTool, RunEvent, ToolBatchInput, ToolBusReply, ToolExecInput, ToolResult } from '../../machines/protocol.js';
import { toolBusMachine } from '../../machines/toolBus.machine.js';
import type { ToolBusContext, ToolBusInput } from '../../machines/toolBus.machine.js';

const tool = (name: string, server: string, shareable: boolean, readOnly: boolean, batch = false): BusTool => ({ name, server, shareable, readOnly, batch });

const TOOLS: BusTool[] = [
  tool('read_file', 'local', true, true),
  tool('write_file', 'local', false, false),
  /** Read-only but not shareable (open world): never shared, never cached. */
  tool('fetch', 'web', false, true),
  tool('web.get', 'web', true, true),
  tool('db.get', 'db', true, true, true),
  tool('db.scan', 'db', false, true, true),
];

/** An execution the test finishes by hand. */
interface Running {
  kind: 'tool' | 'batch';
  input: ToolExecInput | ToolBatchInput;
  server: string;
  signal: AbortSignal;
  settled: boolean;
  resolve: (output: unknown) => void;
  reject: (error: unknown) => void;
}

/** A SimulatedClock that knows how many timers are armed (to see deadlines cancelled). */
class CountingClock extends SimulatedClock {
  readonly armed = new Set<number>();
  override setTimeout(fn: (...args: any[]) => void, timeout: number): number {
    const id: number = super.setTimeout(() => {
      this.armed.delete(id);
      fn();
    }, timeout);
    this.armed.add(id);
    return id;
  }
  override clearTimeout(id: number): void {
    this.armed.delete(id);
    super.clearTimeout(id);
  }
}

/** Lets promise settlements reach the bus (microtasks only: no timers). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/** A bus whose executors wait for the test, plus an agent that collects TOOL.RESULTs. */
function harness(opts: { tools?: BusTool[]; input?: Omit<ToolBusInput, 'tools'>; realExecutors?: boolean } = {}) {
  const tools = opts.tools ?? TOOLS;
  const serverOf = new Map(tools.map((t) => [t.name, t.server]));
  const clock = new CountingClock();
  const running: Running[] = [];
  const reports: RunEvent[] = [];
  const results = new Map<string, ToolBusReply[]>();
  /** Most executors ever active at once per server, as the executors themselves saw it. */
  const peak = new Map<string, number>();
  const agent = createActor(
    createMachine({
      on: {
        '*': {
          actions: ({ event }) => {
            const reply = event as ToolBusReply;
            results.set(reply.callId, [...(results.get(reply.callId) ?? []), reply]);
          },
        },
      },
    }),
  ).start();
  const active = (server: string) => running.filter((r) => r.server === server && !r.settled).length;
  const track = (kind: Running['kind'], input: ToolExecInput | ToolBatchInput, signal: AbortSignal) =>
    new Promise<never>((resolve, reject) => {
      const server = serverOf.get(input.name) ?? '?';
      const r: Running = {
        kind,
        input,
        server,
        signal,
        settled: false,
        resolve: (o) => {
          r.settled = true;
          (resolve as (o: unknown) => void)(o);
        },
        reject: (e) => {
          r.settled = true;
          reject(e);
        },
      };
      signal.addEventListener('abort', () => void (r.settled = true));
      running.push(r);
      peak.set(server, Math.max(peak.get(server) ?? 0, active(server)));
    });
  const executeTool = fromPromise<string, ToolExecInput>(({ input, signal }) => track('tool', input, signal));
  const executeBatch = fromPromise<ToolResult[], ToolBatchInput>(({ input, signal }) => track('batch', input, signal));
  const report = (_: unknown, e: RunEvent) => void reports.push(e);
  const machine = opts.realExecutors
    ? toolBusMachine.provide({ actions: { report } })
    : toolBusMachine.provide({ actors: { executeTool, executeBatch }, actions: { report } });
  const bus = createActor(machine, { clock, input: { tools, ...opts.input } }).start();
  let nextCall = 0;
  return {
    clock,
    bus,
    running,
    reports,
    results,
    peak,
    /** Sends a call; returns its callId. */
    call(name: string, args: unknown, taskId = 't1'): string {
      const callId = `c${nextCall++}`;
      bus.send({ type: 'TOOL.CALL', callId, taskId, name, args, replyTo: agent });
      return callId;
    },
    /** The one reply of `callId` (fails if it got none or several). */
    reply(callId: string): ToolBusReply {
      const got = results.get(callId) ?? [];
      expect(got, `replies to ${callId}`).toHaveLength(1);
      return got[0];
    },
    args: () => running.map((r) => ('args' in r.input ? r.input.args : r.input.calls)),
    context: (): ToolBusContext => bus.getSnapshot().context,
    /** The top state, ready or collecting (each has an idle and a transient routing child). */
    state: () => {
      const value = bus.getSnapshot().value;
      return typeof value === 'string' ? value : Object.keys(value)[0];
    },
  };
}

/** No batch window: every call is dispatched as it arrives (what the old bus did). */
const NOW = { batchWindowMs: 0 };

describe('toolBusMachine: sharing', () => {
  it('runs two identical shareable calls in flight once and answers both', async () => {
    const h = harness({ input: NOW });
    const a = h.call('read_file', { path: 'a.ts' }, 't1');
    const b = h.call('read_file', { path: 'a.ts' }, 't2');
    expect(h.running).toHaveLength(1);
    expect(h.running[0].input).toEqual({ name: 'read_file', args: { path: 'a.ts' }, callId: a });
    h.clock.increment(25);
    h.running[0].resolve('contents of a.ts');
    await settle();
    expect(h.reply(a)).toEqual({ type: 'TOOL.RESULT', callId: a, content: 'contents of a.ts', isError: false });
    expect(h.reply(b)).toEqual({ type: 'TOOL.RESULT', callId: b, content: 'contents of a.ts', isError: false });
    expect(h.context().stats.byTool.read_file).toEqual({ requested: 2, executed: 1, deduplicated: 1, cached: 0, failed: 0, timedOut: 0 });
    expect(h.reports).toEqual([
      { type: 'tool:called', taskId: 't1', name: 'read_file', shared: false, callId: a },
      { type: 'tool:called', taskId: 't2', name: 'read_file', shared: true, callId: b },
      { type: 'tool:result', name: 'read_file', isError: false, durationMs: 25 },
    ]);
  });

  it('shares whatever the order of the argument keys, at any depth', () => {
    const h = harness({ input: NOW });
    h.call('read_file', { path: 'a.ts', range: { start: 1, end: 9 } });
    h.call('read_file', { range: { end: 9, start: 1 }, path: 'a.ts' });
    expect(h.running).toHaveLength(1);
    expect(h.context().stats.deduplicated).toBe(1);
  });

  it('runs calls with different arguments separately', () => {
    const h = harness({ input: NOW });
    h.call('read_file', { path: 'a.ts' });
    h.call('read_file', { path: 'b.ts' });
    expect(h.args()).toEqual([{ path: 'a.ts' }, { path: 'b.ts' }]);
  });

  it('never shares or caches a tool that is not shareable, even a read-only one', async () => {
    const h = harness({ input: NOW });
    const a = h.call('fetch', { url: 'x' });
    const b = h.call('fetch', { url: 'x' });
    expect(h.running).toHaveLength(2);
    h.running[1].resolve('second');
    h.running[0].resolve('first');
    await settle();
    expect(h.reply(a).content).toBe('first');
    expect(h.reply(b).content).toBe('second');
    h.call('fetch', { url: 'x' });
    expect(h.running).toHaveLength(3);
    expect(h.context().stats.byTool.fetch).toMatchObject({ requested: 3, executed: 3, deduplicated: 0, cached: 0 });
    expect(h.reports.filter((r) => r.type === 'tool:called').every((r) => r.type === 'tool:called' && !r.shared && !r.cached)).toBe(true);
  });

  it('runs a shareable call whose arguments have no JSON spelling on its own instead of failing', async () => {
    const h = harness({ input: NOW });
    const cyclic: Record<string, unknown> = { path: 'a.ts' };
    cyclic.self = cyclic;
    const a = h.call('read_file', cyclic);
    const b = h.call('read_file', cyclic);
    expect(h.running).toHaveLength(2);
    expect(h.bus.getSnapshot().status).toBe('active');
    h.running[0].resolve('x');
    h.running[1].resolve('y');
    await settle();
    expect(h.reply(a).content).toBe('x');
    expect(h.reply(b).content).toBe('y');
  });

  it('with share: false, neither deduplicates nor caches', async () => {
    const h = harness({ input: { ...NOW, share: false } });
    const a = h.call('read_file', { path: 'a.ts' });
    const b = h.call('read_file', { path: 'a.ts' });
    expect(h.running).toHaveLength(2);
    h.running[0].resolve('1');
    h.running[1].resolve('2');
    await settle();
    expect([h.reply(a).content, h.reply(b).content]).toEqual(['1', '2']);
    h.call('read_file', { path: 'a.ts' });
    expect(h.running).toHaveLength(3);
    expect(h.context().stats).toMatchObject({ requested: 3, executed: 3, deduplicated: 0, cached: 0 });
  });
});

describe('toolBusMachine: batch window', () => {
  it('starts calls that arrive within the window together when it closes, and a later call in the next window', () => {
    const h = harness();
    h.call('read_file', { path: 'a' });
    expect(h.state()).toBe('collecting');
    h.clock.increment(5);
    h.call('fetch', { url: 'b' });
    h.clock.increment(4);
    expect(h.running).toHaveLength(0);
    h.clock.increment(1);
    expect(h.args()).toEqual([{ path: 'a' }, { url: 'b' }]);
    expect(h.state()).toBe('ready');
    h.clock.increment(1);
    h.call('read_file', { path: 'c' });
    expect(h.state()).toBe('collecting');
    h.clock.increment(9);
    expect(h.running).toHaveLength(2);
    h.clock.increment(1);
    expect(h.args()).toEqual([{ path: 'a' }, { url: 'b' }, { path: 'c' }]);
  });

  it('runs a batch tool window by window: one executeBatch per window', () => {
    const h = harness();
    h.call('db.get', { k: 1 });
    h.clock.increment(3);
    h.call('db.get', { k: 2 });
    h.clock.increment(7);
    h.call('db.get', { k: 3 });
    h.clock.increment(10);
    expect(h.running.map((r) => [r.kind, r.input])).toEqual([
      ['batch', { name: 'db.get', calls: [{ k: 1 }, { k: 2 }] }],
      ['batch', { name: 'db.get', calls: [{ k: 3 }] }],
    ]);
  });

  it('flushes early when the window holds batchSize unique calls; a joined call does not count', () => {
    const h = harness({ input: { batchSize: 3 } });
    h.call('read_file', { p: 1 });
    h.call('read_file', { p: 1 });
    h.call('read_file', { p: 2 });
    expect(h.running).toHaveLength(0);
    expect(h.state()).toBe('collecting');
    h.call('read_file', { p: 3 });
    expect(h.args()).toEqual([{ p: 1 }, { p: 2 }, { p: 3 }]);
    expect(h.state()).toBe('ready');
    h.call('read_file', { p: 4 });
    expect(h.state()).toBe('collecting');
    h.clock.increment(10);
    expect(h.running).toHaveLength(4);
  });

  it('lets a call join an identical call still waiting in the window', async () => {
    const h = harness();
    const a = h.call('read_file', { p: 1 }, 't1');
    h.clock.increment(2);
    const b = h.call('read_file', { p: 1 }, 't2');
    h.clock.increment(8);
    expect(h.running).toHaveLength(1);
    h.running[0].resolve('one');
    await settle();
    expect([h.reply(a).content, h.reply(b).content]).toEqual(['one', 'one']);
    expect(h.reports[1]).toEqual({ type: 'tool:called', taskId: 't2', name: 'read_file', shared: true, callId: b });
  });
});

describe('toolBusMachine: batch executor', () => {
  it('gets the unique calls in order and answers each waiter with its own call`s result', async () => {
    const h = harness();
    const a = h.call('db.get', { k: 1 });
    const b = h.call('db.get', { k: 2 });
    const c = h.call('db.get', { k: 1 });
    const d = h.call('db.get', { k: 3 });
    const e = h.call('read_file', { p: 1 });
    h.clock.increment(10);
    expect(h.running.map((r) => r.input)).toEqual([
      { name: 'db.get', calls: [{ k: 1 }, { k: 2 }, { k: 3 }] },
      { name: 'read_file', args: { p: 1 }, callId: e },
    ]);
    h.clock.increment(4);
    h.running[0].resolve([
      { content: 'v1', isError: false },
      { content: 'no k2', isError: true },
      { content: 'v3', isError: false },
    ]);
    await settle();
    expect([a, b, c, d].map((id) => h.reply(id))).toEqual([
      { type: 'TOOL.RESULT', callId: a, content: 'v1', isError: false },
      { type: 'TOOL.RESULT', callId: b, content: 'no k2', isError: true },
      { type: 'TOOL.RESULT', callId: c, content: 'v1', isError: false },
      { type: 'TOOL.RESULT', callId: d, content: 'v3', isError: false },
    ]);
    expect(h.results.has(e)).toBe(false);
    expect(h.reports.at(-1)).toEqual({ type: 'tool:result', name: 'db.get', isError: true, durationMs: 4, batch: 3 });
    expect(h.context().stats.byTool['db.get']).toEqual({ requested: 4, executed: 3, deduplicated: 1, cached: 0, failed: 1, timedOut: 0 });
    // Successful entries of a batch are cached like any other result; the failed one is not.
    h.call('db.get', { k: 1 });
    h.call('db.get', { k: 2 });
    h.clock.increment(10);
    expect(h.running.at(-1)?.input).toEqual({ name: 'db.get', calls: [{ k: 2 }] });
  });

  it('sends every call of a non-shareable batch tool, duplicates included', () => {
    const h = harness();
    h.call('db.scan', { t: 'x' });
    h.call('db.scan', { t: 'x' });
    h.clock.increment(10);
    expect(h.running.map((r) => r.input)).toEqual([{ name: 'db.scan', calls: [{ t: 'x' }, { t: 'x' }] }]);
  });

  it('fails only the calls a miscounting batch left without a result, and all of them on a rejection', async () => {
    const h = harness();
    const a = h.call('db.get', { k: 1 });
    const b = h.call('db.get', { k: 2 });
    h.clock.increment(10);
    h.running[0].resolve([{ content: 'v1', isError: false }]);
    await settle();
    expect(h.reply(a)).toMatchObject({ content: 'v1', isError: false });
    expect(h.reply(b)).toMatchObject({ content: 'batch executor of "db.get" returned 1 results for 2 calls', isError: true });
    const c = h.call('db.scan', { t: 1 });
    const d = h.call('db.scan', { t: 2 });
    h.clock.increment(10);
    h.running[1].reject(new Error('db down'));
    await settle();
    expect([h.reply(c), h.reply(d)].map((r) => [r.content, r.isError])).toEqual([
      ['db down', true],
      ['db down', true],
    ]);
  });

  it('without a provided batch executor, answers with "no batch executor provided"', async () => {
    const h = harness({ realExecutors: true });
    const a = h.call('db.get', { k: 1 });
    h.clock.increment(10);
    await settle();
    expect(h.reply(a)).toMatchObject({ content: 'no batch executor provided', isError: true });
    expect(h.bus.getSnapshot().status).toBe('active');
  });
});

describe('toolBusMachine: cache', () => {
  it('answers an identical call from the cache within the TTL and runs it again from the TTL on', async () => {
    const h = harness({ input: { ...NOW, cacheTtlMs: 1000 } });
    const a = h.call('read_file', { p: 1 });
    h.running[0].resolve('v1');
    await settle();
    expect(h.reply(a).content).toBe('v1');
    h.clock.increment(999);
    const b = h.call('read_file', { p: 1 }, 't2');
    expect(h.reply(b)).toEqual({ type: 'TOOL.RESULT', callId: b, content: 'v1', isError: false });
    expect(h.running).toHaveLength(1);
    expect(h.reports.at(-1)).toEqual({ type: 'tool:called', taskId: 't2', name: 'read_file', shared: false, cached: true, callId: b });
    h.clock.increment(1);
    const c = h.call('read_file', { p: 1 });
    expect(h.results.has(c)).toBe(false);
    expect(h.running).toHaveLength(2);
    expect(h.context().stats.byTool.read_file).toMatchObject({ requested: 3, executed: 2, cached: 1 });
  });

  it('does not cache a failed result', async () => {
    const h = harness({ input: NOW });
    h.call('read_file', { p: 1 });
    h.running[0].reject(new Error('EAGAIN'));
    await settle();
    h.call('read_file', { p: 1 });
    expect(h.running).toHaveLength(2);
  });

  it('answers from the cache at once, even inside an open window', async () => {
    const h = harness();
    h.call('read_file', { p: 1 });
    h.clock.increment(10);
    h.running[0].resolve('v1');
    await settle();
    h.call('fetch', { url: 'x' });
    const b = h.call('read_file', { p: 1 });
    expect(h.state()).toBe('collecting');
    expect(h.reply(b).content).toBe('v1');
  });

  it('with cacheTtlMs 0, runs every call again', async () => {
    const h = harness({ input: { ...NOW, cacheTtlMs: 0 } });
    h.call('read_file', { p: 1 });
    h.running[0].resolve('v1');
    await settle();
    h.call('read_file', { p: 1 });
    expect(h.running).toHaveLength(2);
  });

  it('clears a server`s cache when a call to one of its tools that is not read-only is dispatched, and only that server`s', async () => {
    const h = harness({ input: NOW });
    h.call('read_file', { p: 1 });
    h.call('web.get', { u: 1 });
    h.running[0].resolve('v1');
    h.running[1].resolve('w1');
    await settle();
    expect(h.context().book.sizes().cached).toBe(2);
    h.call('write_file', { p: 1, text: 'new' });
    expect(h.context().book.sizes().cached).toBe(1);
    h.call('read_file', { p: 1 });
    const w = h.call('web.get', { u: 1 });
    expect(h.reply(w).content).toBe('w1');
    expect(h.running.map((r) => r.input.name)).toEqual(['read_file', 'web.get', 'write_file', 'read_file']);
  });

  it('delivers but does not cache a read that was in flight when a write started, nor lets new calls join it', async () => {
    const h = harness({ input: NOW });
    const early = h.call('read_file', { p: 1 });
    h.call('write_file', { p: 1, text: 'new' });
    const after = h.call('read_file', { p: 1 });
    // The early read may have seen the file before the write: a new call runs on its own.
    expect(h.running.map((r) => r.input.name)).toEqual(['read_file', 'write_file', 'read_file']);
    h.running[0].resolve('old');
    await settle();
    expect(h.reply(early).content).toBe('old');
    expect(h.context().book.sizes().cached).toBe(0);
    h.running[1].resolve('written');
    h.running[2].resolve('new');
    await settle();
    expect(h.reply(after).content).toBe('new');
    // The second read overlapped the write too: also not cached.
    expect(h.context().book.sizes().cached).toBe(0);
    const last = h.call('read_file', { p: 1 });
    h.running[3].resolve('new');
    await settle();
    expect(h.reply(last).content).toBe('new');
    expect(h.context().book.sizes().cached).toBe(1);
  });
});

describe('toolBusMachine: concurrency per server', () => {
  it('never runs more than serverConcurrency executions on one server, and starts the rest in arrival order', async () => {
    const h = harness({ input: { ...NOW, serverConcurrency: 2 } });
    const ids = [1, 2, 3, 4, 5].map((p) => h.call('read_file', { p }));
    h.call('web.get', { u: 1 });
    expect(h.args()).toEqual([{ p: 1 }, { p: 2 }, { u: 1 }]);
    expect(h.context().book.sizes()).toMatchObject({ queued: 3, running: 3 });
    h.running[1].resolve('2');
    await settle();
    expect(h.args().at(-1)).toEqual({ p: 3 });
    h.running[0].reject(new Error('1'));
    await settle();
    expect(h.args().at(-1)).toEqual({ p: 4 });
    h.running[3].resolve('3');
    await settle();
    expect(h.args().at(-1)).toEqual({ p: 5 });
    for (const r of h.running) if (!r.settled) r.resolve('x');
    await settle();
    expect(ids.map((id) => h.reply(id).content)).toEqual(['1', '2', '3', 'x', 'x']);
    expect(h.peak.get('local')).toBe(2);
    expect(h.context().book.sizes()).toMatchObject({ queued: 0, running: 0 });
  });

  it('counts a batch as one execution of its server', () => {
    const h = harness({ input: { serverConcurrency: 1 } });
    h.call('db.get', { k: 1 });
    h.call('db.get', { k: 2 });
    h.call('db.scan', { t: 1 });
    h.clock.increment(10);
    expect(h.running.map((r) => r.input)).toEqual([{ name: 'db.get', calls: [{ k: 1 }, { k: 2 }] }]);
    expect(h.context().book.runningOn('db')).toBe(1);
  });
});

describe('toolBusMachine: timeouts', () => {
  it('at exactly callTimeoutMs stops the executor, answers every waiter with the timeout, and frees the slot', async () => {
    const h = harness({ input: { ...NOW, serverConcurrency: 1 } });
    const a = h.call('read_file', { p: 1 });
    const b = h.call('read_file', { p: 1 });
    const c = h.call('read_file', { p: 2 });
    expect(h.running).toHaveLength(1);
    h.clock.increment(59_999);
    expect(h.results.size).toBe(0);
    expect(h.running[0].signal.aborted).toBe(false);
    h.clock.increment(1);
    const timedOut = { content: 'tool "read_file" timed out after 60000 ms', isError: true };
    expect(h.reply(a)).toMatchObject(timedOut);
    expect(h.reply(b)).toMatchObject(timedOut);
    expect(h.running[0].signal.aborted).toBe(true);
    expect(h.bus.getSnapshot().children['tool:0']).toBeUndefined();
    expect(h.reports).toContainEqual({ type: 'tool:result', name: 'read_file', isError: true, durationMs: 60_000, timedOut: true });
    // The slot went to the queued call.
    expect(h.args()).toEqual([{ p: 1 }, { p: 2 }]);
    // A late answer of the stopped executor changes nothing; a timeout is not cached.
    h.running[0].resolve('late');
    h.running[1].resolve('two');
    await settle();
    expect(h.results.get(a)).toHaveLength(1);
    expect(h.reply(c).content).toBe('two');
    h.call('read_file', { p: 1 });
    expect(h.running).toHaveLength(3);
    expect(h.context().stats).toMatchObject({ timedOut: 1, failed: 0 });
  });

  it('cancels the deadline of an execution that ends in time', async () => {
    const h = harness({ input: { ...NOW, callTimeoutMs: 100 } });
    const a = h.call('fetch', { url: 'x' });
    expect(h.clock.armed.size).toBe(1);
    h.clock.increment(99);
    h.running[0].resolve('ok');
    await settle();
    expect(h.clock.armed.size).toBe(0);
    h.clock.increment(1000);
    expect(h.results.get(a)).toEqual([{ type: 'TOOL.RESULT', callId: a, content: 'ok', isError: false }]);
    expect(h.context().stats.timedOut).toBe(0);
  });

  it('times out a batch as a whole', async () => {
    const h = harness({ input: { callTimeoutMs: 50 } });
    const a = h.call('db.get', { k: 1 });
    const b = h.call('db.get', { k: 2 });
    h.clock.increment(10);
    h.clock.increment(50);
    expect([h.reply(a), h.reply(b)].map((r) => r.content)).toEqual(['tool "db.get" timed out after 50 ms', 'tool "db.get" timed out after 50 ms']);
    expect(h.running[0].signal.aborted).toBe(true);
    expect(h.reports.at(-1)).toEqual({ type: 'tool:result', name: 'db.get', isError: true, durationMs: 50, timedOut: true, batch: 2 });
    expect(h.context().stats.byTool['db.get'].timedOut).toBe(2);
  });
});

describe('toolBusMachine: failures', () => {
  it('answers every waiter with the error when the executor throws, and keeps working', async () => {
    const h = harness({ input: NOW });
    const a = h.call('read_file', { path: 'missing.ts' });
    const b = h.call('read_file', { path: 'missing.ts' });
    h.running[0].reject(new Error('ENOENT: missing.ts'));
    await settle();
    expect(h.reply(a)).toEqual({ type: 'TOOL.RESULT', callId: a, content: 'ENOENT: missing.ts', isError: true });
    expect(h.reply(b)).toEqual({ type: 'TOOL.RESULT', callId: b, content: 'ENOENT: missing.ts', isError: true });
    expect(h.bus.getSnapshot().status).toBe('active');
    expect(h.context().stats).toMatchObject({ requested: 2, executed: 1, deduplicated: 1, failed: 1 });
    expect(h.reports.at(-1)).toMatchObject({ type: 'tool:result', name: 'read_file', isError: true });

    const c = h.call('read_file', { path: 'missing.ts' });
    h.running[1].resolve('found now');
    await settle();
    expect(h.reply(c)).toMatchObject({ content: 'found now', isError: false });
  });

  it('turns any rejection value into a message', async () => {
    const h = harness({ input: NOW });
    const a = h.call('write_file', 1);
    const b = h.call('write_file', 2);
    const c = h.call('write_file', 3);
    h.running[0].reject({ code: 'tool_error', message: 'server said no', retryable: false });
    h.running[1].reject('plain string');
    h.running[2].reject({ status: 500 });
    await settle();
    expect(h.reply(a).content).toBe('server said no');
    expect(h.reply(b).content).toBe('plain string');
    expect(h.reply(c).content).toBe('tool failed: {"status":500}');
  });

  it('writes a non-string output as canonical JSON', async () => {
    const h = harness({ input: NOW });
    const a = h.call('read_file', {});
    h.running[0].resolve({ b: 1, a: [true] });
    await settle();
    expect(h.reply(a).content).toBe('{"a":[true],"b":1}');
  });

  it('answers an unknown tool at once with an error naming it', () => {
    const h = harness();
    const a = h.call('rm_rf', { path: '/' });
    expect(h.running).toHaveLength(0);
    expect(h.state()).toBe('ready');
    const reply = h.reply(a);
    expect(reply.isError).toBe(true);
    expect(reply.content).toMatch(/^unknown tool "rm_rf"/);
    expect(reply.content).toContain('read_file, write_file');
    expect(h.context().stats).toMatchObject({ requested: 1, unknown: 1, executed: 0, deduplicated: 0, failed: 0 });
  });

  it('does not mistake Object.prototype names for tools', () => {
    const h = harness();
    const a = h.call('constructor', {});
    const b = h.call('__proto__', {});
    expect(h.reply(a).isError).toBe(true);
    expect(h.reply(b).isError).toBe(true);
    expect(h.running).toHaveLength(0);
  });

  it('without a provided executor, answers with "no tool executor provided"', async () => {
    const h = harness({ realExecutors: true, input: NOW });
    const a = h.call('read_file', {});
    await settle();
    expect(h.reply(a)).toMatchObject({ content: 'no tool executor provided', isError: true });
    expect(h.bus.getSnapshot().status).toBe('active');
  });

  it('stays active on done/error events of children it does not know', () => {
    const h = harness();
    h.bus.send({ type: 'xstate.error.actor.stranger', error: new Error('x'), actorId: 'stranger' });
    h.bus.send({ type: 'xstate.done.actor.stranger', output: 'x', actorId: 'stranger' });
    h.bus.send({ type: 'toolBus.deadline', executionId: 'stranger' });
    expect(h.bus.getSnapshot().status).toBe('active');
    expect(h.reports).toEqual([]);
  });
});

describe('toolBusMachine: bookkeeping', () => {
  it('stops each finished executor and forgets its entry', async () => {
    const h = harness({ input: NOW });
    h.call('read_file', { path: 'a.ts' });
    h.call('write_file', {});
    expect(Object.keys(h.bus.getSnapshot().children).sort()).toEqual(['tool:0', 'tool:1']);
    h.running[0].resolve('a');
    h.running[1].reject(new Error('b'));
    await settle();
    expect(h.bus.getSnapshot().children).toEqual({});
    expect(h.context().book.sizes()).toEqual({ pending: 0, queued: 0, running: 0, inFlight: 0, cached: 0 });
  });

  it('routes a call with pure guards: asked twice from one snapshot, they agree and the book is unchanged', async () => {
    const h = harness({ input: { ...NOW, cacheTtlMs: 1000 } });
    h.call('read_file', { p: 1 });
    h.running[0].resolve('v1');
    await settle();
    h.call('read_file', { p: 2 }); // running: a call in flight a guard could join
    // The cached result of p:1 has just expired and nothing has swept it yet: a guard that
    // classified the call itself would drop it from the cache.
    h.clock.increment(1000);
    const { context } = h.bus.getSnapshot();
    const state = () => JSON.stringify([context.book.sizes(), context.stats]);
    const before = state();
    const guards = toolBusMachine.implementations.guards as Record<string, (args: { context: ToolBusContext; event: unknown }, params: unknown) => boolean>;
    const routing = ['isUnknownTool', 'isCached', 'joinsCallInFlight', 'fillsWindow'];
    const ask = (name: string, args: unknown) => {
      const event = { type: 'TOOL.CALL', callId: 'probe', taskId: 't2', name, args, replyTo: h.bus };
      return routing.map((guard) => guards[guard]({ context, event }, undefined));
    };
    for (const [name, args] of [['read_file', { p: 1 }], ['read_file', { p: 2 }], ['nope', {}]] as const) {
      const first = ask(name, args);
      expect(ask(name, args), `${name} ${JSON.stringify(args)}`).toEqual(first);
      expect(state(), `${name} ${JSON.stringify(args)}`).toBe(before);
    }
    // The real call still takes its usual route: expired, so it runs again; the p:2 call is joined.
    h.call('read_file', { p: 1 });
    const joined = h.call('read_file', { p: 2 }, 't2');
    expect(h.running).toHaveLength(3);
    h.running[1].resolve('v2');
    await settle();
    expect(h.reply(joined).content).toBe('v2');
  });

  it('keeps counters that add up, per tool and in total', async () => {
    const h = harness({ input: { serverConcurrency: 1, callTimeoutMs: 100 } });
    h.call('read_file', { p: 1 });
    h.call('read_file', { p: 1 });
    h.call('read_file', { p: 2 });
    h.call('fetch', { u: 1 });
    h.call('nope', {});
    h.clock.increment(10);
    h.running[0].resolve('1');
    h.running[1].reject(new Error('x'));
    await settle();
    h.call('read_file', { p: 1 });
    h.clock.increment(100); // read_file p:2 passes its deadline
    await settle();
    const { stats } = h.context();
    expect(stats.byTool.read_file).toEqual({ requested: 4, executed: 2, deduplicated: 1, cached: 1, failed: 0, timedOut: 1 });
    expect(stats.byTool.fetch).toEqual({ requested: 1, executed: 1, deduplicated: 0, cached: 0, failed: 1, timedOut: 0 });
    expect(stats).toMatchObject({ requested: 6, unknown: 1, executed: 3, deduplicated: 1, cached: 1, failed: 1, timedOut: 1, executions: 3 });
    expect(stats.requested).toBe(stats.unknown + stats.executed + stats.deduplicated + stats.cached);
  });
});

describe('toolBusMachine: properties', () => {
  const PTOOLS: BusTool[] = [
    tool('a.read', 'a', true, true),
    tool('a.write', 'a', false, false),
    tool('a.many', 'a', true, true, true),
    tool('b.read', 'b', true, true),
    tool('b.list', 'b', false, true, true),
  ];
  const NAMES = [...PTOOLS.map((t) => t.name), 'nope'];
  const CONCURRENCY = 2;
  const TIMEOUT = 50;

  type Op =
    | { kind: 'call'; tool: number; arg: number; flip: boolean }
    | { kind: 'finish'; pick: number; how: 'ok' | 'fail' | 'partial' }
    | { kind: 'advance'; ms: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('call' as const), tool: fc.constantFrom(0, 0, 0, 1, 2, 2, 3, 3, 4, 5), arg: fc.nat(1), flip: fc.boolean() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), how: fc.constantFrom('ok' as const, 'ok' as const, 'fail' as const, 'partial' as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(1, 5, 10, TIMEOUT) }) },
  );

  /** What a scripted executor answers for one call: a function of the name and the arguments only. */
  const ok = (name: string, args: unknown) => `${name}(${canonicalJson(args)})`;

  /** Finishes an execution: every result derives from its own call's name and arguments. */
  function finish(r: Running, how: 'ok' | 'fail' | 'partial'): void {
    const { name } = r.input;
    if (!('calls' in r.input)) {
      const args = r.input.args;
      if (how === 'ok') r.resolve(ok(name, args));
      else r.reject(new Error(`boom:${ok(name, args)}`));
      return;
    }
    if (how === 'fail') return r.reject(new Error(`boom:batch:${name}`));
    r.resolve(r.input.calls.map((args, i) => (how === 'partial' && i % 2 === 1 ? { content: `bad:${ok(name, args)}`, isError: true } : { content: ok(name, args), isError: false })));
  }

  it('answers every caller exactly once with the result of its own call, never over serverConcurrency per server', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 60 }), fc.constantFrom(true, true, true, false), async (ops, share) => {
        const h = harness({
          tools: PTOOLS,
          input: { batchWindowMs: 10, batchSize: 3, cacheTtlMs: 200, callTimeoutMs: TIMEOUT, serverConcurrency: CONCURRENCY, share },
        });
        const calls = new Map<string, { name: string; args: unknown }>();
        const open = () => h.running.filter((r) => !r.settled);
        const checkBound = () => {
          for (const s of ['a', 'b']) expect(h.context().book.runningOn(s)).toBeLessThanOrEqual(CONCURRENCY);
        };
        for (const op of ops) {
          if (op.kind === 'call') {
            const name = NAMES[op.tool];
            const args = op.flip ? { opts: { b: op.arg, a: 1 }, n: op.arg } : { n: op.arg, opts: { a: 1, b: op.arg } };
            calls.set(h.call(name, args), { name, args });
          } else if (op.kind === 'finish') {
            const candidates = open();
            if (candidates.length > 0) finish(candidates[op.pick % candidates.length], op.how);
            await settle();
          } else {
            h.clock.increment(op.ms);
          }
          checkBound();
        }
        // Close the window, then let everything finish.
        h.clock.increment(10);
        for (let guard = 0; open().length > 0 && guard < 100; guard++) {
          for (const r of open()) finish(r, 'ok');
          await settle();
          checkBound();
        }

        for (const [id, { name, args }] of calls) {
          const reply = h.reply(id);
          if (name === 'nope') {
            expect(reply).toMatchObject({ isError: true, content: expect.stringMatching(/^unknown tool "nope"/) });
            continue;
          }
          const mine = ok(name, args);
          const allowed = reply.isError
            ? [`boom:${mine}`, `bad:${mine}`, `boom:batch:${name}`, `tool "${name}" timed out after ${TIMEOUT} ms`]
            : [mine];
          expect(allowed).toContain(reply.content);
        }
        for (const [server, most] of h.peak) expect(most, `peak on ${server}`).toBeLessThanOrEqual(CONCURRENCY);

        const { stats, book } = h.context();
        expect(stats.requested).toBe(calls.size);
        expect(stats.requested).toBe(stats.unknown + stats.executed + stats.deduplicated + stats.cached);
        expect(stats.failed + stats.timedOut).toBeLessThanOrEqual(stats.executed);
        expect(stats.executions).toBe(h.running.length);
        if (!share) expect(stats.deduplicated + stats.cached).toBe(0);
        expect(book.sizes()).toMatchObject({ pending: 0, queued: 0, running: 0, inFlight: 0 });
        expect(h.bus.getSnapshot().children).toEqual({});
        expect(h.bus.getSnapshot().status).toBe('active');
      }),
      { seed: 42, numRuns: 200 },
    );
  });
});

describe('toolBusMachine: an agent that ends with calls out (TOOL.CANCEL)', () => {
  it('stops a running call nobody waits for, frees its slot, and never runs a queued one', async () => {
    const h = harness({ input: { ...NOW, serverConcurrency: 1 } });
    const slow = h.call('write_file', { path: 'a' }, 't1');
    const queued = h.call('write_file', { path: 'b' }, 't1');
    const other = h.call('write_file', { path: 'c' }, 't2');
    expect(h.running).toHaveLength(1);
    h.bus.send({ type: 'TOOL.CANCEL', taskId: 't1', callIds: [slow, queued] });
    await settle();
    // The running call's signal was aborted (src cancels the request); t1's queued call never
    // started; t2's call got the freed slot.
    expect(h.running[0]!.signal.aborted).toBe(true);
    expect(h.running).toHaveLength(2);
    expect(h.running[1]!.input).toMatchObject({ args: { path: 'c' } });
    expect(h.results.get(slow)).toBeUndefined();
    expect(h.results.get(queued)).toBeUndefined();
    expect(h.reports).toContainEqual(expect.objectContaining({ type: 'tool:result', name: 'write_file', cancelled: true, isError: true }));
    expect(h.context().stats.failed).toBe(0);
    h.running[1]!.resolve('ok');
    await settle();
    expect(h.reply(other)).toMatchObject({ content: 'ok', isError: false });
  });

  it('keeps a shared call running while another task still waits for it', async () => {
    const h = harness({ input: NOW });
    const a = h.call('read_file', { path: 'x' }, 't1');
    const b = h.call('read_file', { path: 'x' }, 't2');
    h.bus.send({ type: 'TOOL.CANCEL', taskId: 't1', callIds: [a] });
    await settle();
    expect(h.running[0]!.signal.aborted).toBe(false);
    h.running[0]!.resolve('content');
    await settle();
    expect(h.results.get(a)).toBeUndefined();
    expect(h.reply(b)).toMatchObject({ content: 'content' });
  });
});
