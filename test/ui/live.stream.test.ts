/**
 * The live page's event stream as clients use it, on real runs: a reader gets the final view
 * before the stream ends, clients that stop reading cost the process a bounded number of bytes
 * and are dropped, past a number of clients the next one gets 503, and readers still get every
 * event.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSwarm, startLiveUi, type TimedRunEvent } from '../../src/index.js';
import { until } from '../helpers/cli.js';
import { idleClient } from './rawHttp.js';

interface Sse {
  type: string;
  data: unknown;
  bytes: number;
}

/** Reads an SSE response to its end, keeping every message and its size on the wire. */
async function readToEnd(res: Response, onMessage: (m: Sse) => void = () => undefined): Promise<Sse[]> {
  const decoder = new TextDecoder();
  const all: Sse[] = [];
  let buffer = '';
  for await (const chunk of res.body!) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1];
      const message = { type, data: data === undefined ? undefined : JSON.parse(data), bytes: Buffer.byteLength(block) + 2 };
      all.push(message);
      onMessage(message);
    }
  }
  return all;
}

/** Tasks a view shows completed. */
const countDone = (m: Sse) => ((m.data as { html: string }).html.match(/class="dag-node s-completed"/g) ?? []).length;

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** A run held at a tool call until `release()`, then `bulk` tasks of `length` tokens each. */
function heldRun(bulk: number, length: number) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const swarm = createSwarm({
    tools: [{ name: 'gate', description: 'Waits for the test', inputSchema: { type: 'object' }, handler: async () => (await released, 'open') }],
  });
  const run = swarm.run({
    providers: { sim: { type: 'sim', keys: ['sim-live-stream'] } },
    models: { m: { provider: 'sim', model: 'sim-small', maxTokens: 4096 } },
    defaults: { maxInFlight: 64 },
    tasks: [
      { id: 'held', model: 'm', tools: ['gate'], prompt: 'wait [[sim:tool gate {}]]' },
      ...Array.from({ length: bulk }, (_, i) => ({ id: `bulk.${i}`, model: 'm', deps: ['held'], prompt: `part ${i} [[sim:length ${length}]]` })),
    ],
  });
  const events: TimedRunEvent[] = [];
  run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
  const atGate = new Promise<void>((resolve) => run.events.on('tool:called', () => resolve()));
  cleanup.push(async () => {
    release();
    await run.result.catch(() => undefined);
    await swarm.close();
  });
  return { run, events, release, atGate };
}

describe('the live page event stream', () => {
  it('sends the final view (done, with the result) to a reader before the stream ends', async () => {
    const { run, events, release, atGate } = heldRun(3, 8);
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    await atGate;
    const reading = fetch(ui.url.replace('/?', '/events?')).then(readToEnd);
    // The reader is connected: the server counts it.
    while (ui.stats().clients < 1) await new Promise((r) => setImmediate(r));
    release();
    const result = await run.result;
    expect(result.status).toBe('completed');
    // As `run --ui` does: the page closes as soon as the run has ended.
    await ui.close();
    const got = await reading;
    expect(got.filter((m) => m.type === 'run').map((m) => (m.data as TimedRunEvent).type)).toEqual(events.map((e) => e.type));
    const last = got.at(-1)!;
    expect(last.type).toBe('view');
    const view = last.data as { html: string; events: number; done: boolean };
    expect(view.done).toBe(true);
    expect(view.events).toBe(events.length);
    expect(view.html).toMatch(/class="dag-node s-completed"[^>]* data-task="bulk\.2"/);
  });

  it('replays a run several times its queue bound to a page opened after it ended, then the final view', async () => {
    const { run, events, release } = heldRun(120, 1500);
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    release();
    expect((await run.result).status).toBe('completed');
    const reading = fetch(ui.url.replace('/?', '/events?')).then((res) => readToEnd(res));
    await until(() => ui.stats().clients === 1, 'the reader connected');
    await ui.close();
    const got = await reading;
    expect(got.filter((m) => m.type === 'run').map((m) => (m.data as TimedRunEvent).type)).toEqual(events.map((e) => e.type));
    // More than the 256 KiB a client may have queued: the replay went out as the reader drained.
    expect(got.reduce((n, m) => n + (m.type === 'run' ? m.bytes : 0), 0)).toBeGreaterThan(2 * 256 * 1024);
    expect(got.at(-1)!.type).toBe('view');
    expect((got.at(-1)!.data as { done: boolean }).done).toBe(true);
  });

  it('bounds what clients that do not read cost, drops them, refuses past its cap with 503, and readers get every event', async () => {
    // Each task waits at the gate until the test opens it: the run goes one task at a time, as
    // slowly as the test wants, so the views keep coming (one per 400 ms at most) while it looks.
    const waiting: (() => void)[] = [];
    let credits = 0;
    const openOne = () => {
      const next = waiting.shift();
      if (next) next();
      else credits += 1;
    };
    const swarm = createSwarm({
      tools: [
        {
          name: 'gate',
          description: 'Waits for the test',
          inputSchema: { type: 'object', properties: { i: { type: 'number' } } },
          handler: async () => {
            if (credits > 0) credits -= 1;
            else await new Promise<void>((resolve) => waiting.push(resolve));
            return 'open';
          },
        },
      ],
    });
    const bulk = 80;
    const run = swarm.run({
      providers: { sim: { type: 'sim', keys: ['sim-live-stream'] } },
      models: { m: { provider: 'sim', model: 'sim-small', maxTokens: 4096 } },
      defaults: { maxInFlight: bulk },
      tools: { serverConcurrency: bulk },
      tasks: Array.from({ length: bulk }, (_, i) => ({ id: `bulk.${i}`, model: 'm', tools: ['gate'], prompt: `part ${i} [[sim:tool gate {"i":${i}}]] [[sim:length 1500]]` })),
    });
    cleanup.push(async () => {
      for (let i = 0; i < bulk; i++) openOne();
      await run.result.catch(() => undefined);
      await swarm.close();
    });
    const events: TimedRunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    let maxBuffered = 0;
    let maxClients = 0;
    const sample = () => {
      const s = ui.stats();
      maxBuffered = Math.max(maxBuffered, s.bufferedBytes);
      maxClients = Math.max(maxClients, s.clients);
    };
    run.events.on('*', sample);
    // Every task at the gate: the run is still, and sends nothing until the test opens one.
    await until(() => waiting.length === bulk, 'every task at the gate');

    const got: Sse[] = [];
    const reading = fetch(ui.url.replace('/?', '/events?')).then((res) => readToEnd(res, (m) => (got.push(m), sample())));
    await until(() => got.some((m) => m.type === 'view'), 'the reader has its first view');
    const { port, search } = new URL(ui.url);
    const idle = Array.from({ length: 60 }, () => idleClient(Number(port), `/events${search}`));
    cleanup.push(async () => idle.forEach((c) => c.socket.destroy()));
    const statuses = await Promise.all(idle.map((c) => c.status));
    expect(statuses.filter((s) => s === 200).length).toBe(31);
    expect(statuses.filter((s) => s === 503).length).toBe(29);

    // One task at a time, each time until the reader has the view that shows it done, until the
    // server has dropped every client that does not read.
    let opened = 0;
    while (ui.stats().dropped < 31 && opened < bulk) {
      openOne();
      opened += 1;
      await until(() => got.some((m) => m.type === 'view' && countDone(m) >= opened), `the view with ${opened} tasks done`);
    }
    expect(ui.stats()).toMatchObject({ clients: 1, refused: 29, dropped: 31 });
    expect(opened).toBeLessThan(bulk);
    // From their side: once they read again, they find their streams ended.
    for (const c of idle) c.socket.resume();
    await Promise.all(idle.map((c) => c.closed));
    // Their slots are free again.
    const again = idleClient(Number(port), `/events${search}`);
    expect(await again.status).toBe(200);
    again.socket.destroy();

    for (; opened < bulk; opened += 1) openOne();
    expect((await run.result).status).toBe('completed');
    await ui.close();
    await reading;
    expect(got.filter((m) => m.type === 'run').length).toBe(events.length);
    expect((got.at(-1)!.data as { done: boolean }).done).toBe(true);

    expect(maxClients).toBe(32);
    // Each client holds at most 256 KiB and one message over it.
    const biggest = Math.max(...got.map((m) => m.bytes));
    expect(maxBuffered).toBeLessThanOrEqual(32 * (256 * 1024 + biggest));
  });
});
