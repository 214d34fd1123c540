/**
 * The live inspector: a real run sends the Stately inspector's messages over a WebSocket for
 * every kind of machine in the system, each message stays small however big the run's state is,
 * and stopping never hangs, with or without a relay listening.
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocketServer } from 'ws';
import { attachInspector, boundedJson, boundedSnapshot } from '../src/cli/inspect.js';
import { createSwarm, type ToolDefinition } from '../src/index.js';

interface Message {
  type: string;
  sessionId: string;
  name?: string;
  definition?: string;
  snapshot?: { status?: string; context?: unknown; value?: unknown };
  event?: { type: string };
}

/** A relay stand-in: a WebSocket server on 127.0.0.1 (a free port) keeping every message. */
async function receiver() {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const raw: string[] = [];
  let closes = 0;
  wss.on('connection', (socket) => {
    socket.on('message', (data) => raw.push(data.toString()));
    socket.on('close', () => closes++);
  });
  const { port } = wss.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}`,
    raw,
    messages: () => raw.map((m) => JSON.parse(m) as Message),
    closes: () => closes,
    close: () => new Promise<void>((resolve) => wss.close(() => resolve())),
  };
}

const lookup: ToolDefinition<{ sku: string }> = {
  name: 'lookup',
  description: 'A product by SKU',
  inputSchema: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
  annotations: { readOnlyHint: true },
  handler: ({ sku }) => ({ sku, name: `product ${sku}` }),
};

/**
 * Two keys with limits, a tool call, a dependency whose output is long (a big context), and one
 * 500 (a healthy breaker hears nothing: a failure makes it count, and the retry's success resets it).
 */
const plan = {
  providers: { sim: { type: 'sim', keys: ['k-1', 'k-2'], limits: { rpm: 600, concurrency: 2 } } },
  models: { m: { provider: 'sim', model: 'sim-small', maxTokens: 3000 } },
  tasks: [
    { id: 'fetch', model: 'm', tools: ['lookup'], prompt: 'Look it up. [[sim:tool lookup {"sku":"A-1"}]]' },
    { id: 'long', model: 'm', prompt: 'Write at length. [[sim:length 2500]] [[sim:error 500 1]]' },
    { id: 'sum', model: 'm', deps: ['fetch', 'long'], prompt: 'Summarize. [[sim:length 20]]' },
  ],
};

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

describe('attachInspector', () => {
  it('sends actor, event and snapshot messages for the supervisor, agents, pool, keys, breaker and tool bus', async () => {
    const relay = await receiver();
    cleanup.push(relay.close);
    const connected: string[] = [];
    const inspector = attachInspector({ url: relay.url, onConnect: (url) => connected.push(url) });
    const swarm = createSwarm({ tools: [lookup], inspect: inspector.inspect });
    const result = await swarm.run(plan).result;
    await swarm.close();
    await inspector.stop();
    expect(result.status).toBe('completed');
    expect(connected).toEqual([relay.url]); // the CLI prints it: "inspect: connected to <url>"

    const messages = relay.messages();
    // Which machine each session runs: its definition's root id (the supervisor, agent, ...).
    const kindOf = new Map<string, string>();
    for (const m of messages.filter((x) => x.type === '@xstate.actor')) {
      const id = m.definition ? (JSON.parse(m.definition) as { id?: string }).id : undefined;
      if (id) kindOf.set(m.sessionId, id);
    }
    const seen = (type: string) => new Set(messages.filter((m) => m.type === type).map((m) => kindOf.get(m.sessionId)));
    for (const kind of ['supervisor', 'agent', 'pool', 'key', 'breaker', 'toolBus']) {
      expect(seen('@xstate.actor'), `@xstate.actor of ${kind}`).toContain(kind);
      expect(seen('@xstate.snapshot'), `@xstate.snapshot of ${kind}`).toContain(kind);
      expect(seen('@xstate.event'), `@xstate.event of ${kind}`).toContain(kind);
    }
    // The traffic the machines exchange is there: leases, breaker reports, tool calls.
    const eventTypes = new Set(messages.filter((m) => m.type === '@xstate.event').map((m) => m.event?.type));
    for (const type of ['LEASE.REQUEST', 'LEASE.GRANTED', 'BREAKER.REPORT', 'TOOL.CALL', 'TOOL.RESULT']) expect(eventTypes).toContain(type);
    // The supervisor's last snapshot is the finished run, its task table as the table's toJSON says.
    const last = messages.filter((m) => m.type === '@xstate.snapshot' && kindOf.get(m.sessionId) === 'supervisor').at(-1)!;
    expect(last.snapshot?.status).toBe('done');
    expect((last.snapshot?.context as { table: unknown }).table).toEqual({ tasks: 3, counts: expect.objectContaining({ completed: 3 }), ready: 0 });
    // Bounded: the 10 000-character output never travels whole, in a context, an event or an output.
    const longest = Math.max(...relay.raw.filter((m) => !m.includes('"@xstate.actor"')).map((m) => m.length));
    expect(longest).toBeLessThan(40_000);
    expect(relay.raw.some((m) => m.includes('(+'))).toBe(true);
    expect(inspector.stats.sent).toBe(relay.raw.length);
    expect(inspector.stats.dropped).toBe(0);
    await vi.waitFor(() => expect(relay.closes()).toBe(1), { timeout: 30_000 });
  });

  it('stop() resolves at once and the process is free when nothing listens at the URL', async () => {
    // A port that was free a moment ago: the connection is refused.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    const errors: Error[] = [];
    const inspector = attachInspector({ url: `ws://127.0.0.1:${port}`, onError: (e) => errors.push(e) });
    const swarm = createSwarm({ inspect: inspector.inspect });
    const result = await swarm.run({ ...plan, tasks: [plan.tasks[1]!] }).result;
    await swarm.close();
    // Given ten minutes, stop() must not use them: nothing is connected, so it resolves at once
    // (the test's own timeout is the bound; nothing here reads the clock).
    await inspector.stop(600_000);
    expect(result.status).toBe('completed');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toMatch(/^inspector: no connection to ws:\/\/127\.0\.0\.1:\d+/);
    expect(inspector.stats.sent).toBe(0);
    expect(inspector.stats.dropped).toBeGreaterThan(0);
  });

  it('a run that ends before the connection opens still delivers its events: stop() waits for it', async () => {
    const relay = await receiver();
    cleanup.push(relay.close);
    const inspector = attachInspector({ url: relay.url });
    inspector.inspect({ type: '@xstate.event', actorRef: { sessionId: 'x.0' }, rootId: 'x.0', event: { type: 'PING' } } as never);
    await inspector.stop(2000);
    expect(inspector.stats).toEqual({ sent: 1, dropped: 0 });
    await vi.waitFor(() => expect(relay.messages().map((m) => m.event?.type)).toEqual(['PING']), { timeout: 30_000 });
  });
});

describe('boundedJson', () => {
  const small = { depth: 3, items: 3, chars: 5, nodes: 100 };

  it('honours toJSON, and reports a toJSON that throws instead of throwing', () => {
    class Table {
      toJSON() {
        return { rows: 2 };
      }
    }
    const broken = { toJSON: () => { throw new Error('nope'); } };
    expect(boundedJson({ t: new Table(), b: broken }, small)).toEqual({ t: { rows: 2 }, b: '[unserializable: nope]' });
  });

  it('cuts long strings, arrays and objects, and says how much it left out', () => {
    const out = boundedJson({ s: 'abcdefgh', a: [1, 2, 3, 4, 5], o: { a: 1, b: 2, c: 3, d: 4 } }, small);
    expect(out).toEqual({ s: 'abcde… (+3 chars)', a: [1, 2, 3, '… (+2 items)'], o: { a: 1, b: 2, c: 3, '…': '+1 entries' } });
  });

  it('names cycles, deep nesting, functions, Maps, Sets, BigInts and errors', () => {
    const five = { ...small, items: 5 };
    const cyclic: Record<string, unknown> = { name: 'me' };
    cyclic.self = cyclic;
    expect(boundedJson(cyclic, small)).toEqual({ name: 'me', self: '[circular]' });
    expect(boundedJson({ a: { b: { c: { d: 1 } } } }, small)).toEqual({ a: { b: { c: '[Object]' } } });
    expect(boundedJson([function go() {}, 10n, new Map([[1, 'x']]), new Set(['y']), new TypeError('bad')], five)).toEqual([
      '[function go]',
      '10',
      { 1: 'x' },
      ['y'],
      { name: 'TypeError', message: 'bad' },
    ]);
  });

  it('stops at the node budget however wide the value is', () => {
    const wide = Array.from({ length: 50 }, (_, i) => Array.from({ length: 50 }, (_, j) => i * j));
    const text = JSON.stringify(boundedJson(wide, { depth: 5, items: 50, chars: 10, nodes: 100 }));
    expect(text.length).toBeLessThan(1000);
    expect(text).toContain('…');
  });

  it('a snapshot keeps status, value, context and its children by id', () => {
    const snapshot = { status: 'active', value: { running: 'idle' }, context: { n: 1 }, children: { 'pool:sim': {}, toolBus: {} }, machine: { huge: true } };
    expect(boundedSnapshot(snapshot)).toEqual({ status: 'active', value: { running: 'idle' }, context: { n: 1 }, children: ['pool:sim', 'toolBus'] });
  });
});
