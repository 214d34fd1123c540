/**
 * The live page's server without a browser (runs everywhere, chromium or not): 127.0.0.1 only,
 * the token on every path, the CSP header, and `/events` replaying the run so far, then the views
 * (the report's own markup) and new events as they happen.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSwarm, startLiveUi, type TimedRunEvent } from '../../src/index.js';

interface Sse {
  type: string;
  data: unknown;
}

/** Reads an SSE response until `until` says so, keeping every message. */
async function readSse(res: Response, until: (all: Sse[]) => boolean): Promise<Sse[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const all: Sse[] = [];
  let buffer = '';
  while (!until(all)) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1];
      all.push({ type, data: data === undefined ? undefined : JSON.parse(data) });
    }
  }
  await reader.cancel();
  return all;
}

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

const plan = {
  providers: { sim: { type: 'sim', keys: ['sim-live-server'] } },
  models: { m: { provider: 'sim', model: 'sim-small', maxTokens: 64 } },
  tasks: [
    { id: 'one', model: 'm', prompt: 'one [[sim:length 8]]' },
    { id: 'two', model: 'm', deps: ['one'], prompt: 'two [[sim:length 8]]' },
  ],
};

describe('startLiveUi', () => {
  it('needs its token, sends a strict CSP, and replays a finished run on /events with its views', async () => {
    const swarm = createSwarm();
    cleanup.push(() => swarm.close());
    const run = swarm.run(plan);
    const events: TimedRunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    const url = new URL(ui.url);
    expect(url.hostname).toBe('127.0.0.1');
    const token = url.searchParams.get('token')!;
    expect(token.length).toBeGreaterThanOrEqual(20);

    for (const path of ['/', '/events', '/?token=', `/?token=${token.slice(1)}`, `/events?token=${token}x`]) {
      const res = await fetch(url.origin + path);
      expect(res.status, path).toBe(403);
      expect(await res.text()).not.toContain(token);
    }
    const result = await run.result;
    expect(result.status).toBe('completed');

    const page = await fetch(ui.url);
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    const nonce = /'nonce-([^']+)'/.exec(csp)![1]!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    const html = await page.text();
    expect(html).toContain(`<script nonce="${nonce}">`);
    expect(html).not.toMatch(/<script(?! nonce=)(?! type="application\/json")/);
    // The only URL in it is the SVG namespace the script creates elements in.
    expect([...new Set(html.match(/https?:\/\/[^'"\s]*/g))]).toEqual(['http://www.w3.org/2000/svg']);

    const stream = await fetch(`${url.origin}/events?token=${token}`);
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    const got = await readSse(stream, (all) => all.some((m) => m.type === 'view'));
    const replayed = got.filter((m) => m.type === 'run').map((m) => (m.data as TimedRunEvent).type);
    expect(replayed).toEqual(events.map((e) => e.type));
    const view = got.find((m) => m.type === 'view')!.data as { html: string; events: number; done: boolean };
    expect(view.events).toBe(events.length);
    expect(view.html).toContain('data-task="one"');
    expect(view.html).toContain('class="dag-edge"');
    expect(view.html).toContain('<svg class="chart" data-machine="agent"');
  });

  it('streams new events to a page that is already open, then the views rendered again', async () => {
    const swarm = createSwarm();
    cleanup.push(() => swarm.close());
    const run = swarm.run(plan);
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    const stream = await fetch(ui.url.replace('/?', '/events?'));
    const got = await readSse(stream, (all) => all.some((m) => m.type === 'view' && (m.data as { done: boolean }).done));
    const types = got.filter((m) => m.type === 'run').map((m) => (m.data as TimedRunEvent).type);
    expect(types).toContain('task:completed');
    expect(types.at(-1)).toBe('run:completed');
    const last = got.filter((m) => m.type === 'view').at(-1)!.data as { html: string };
    expect(last.html).toMatch(/class="dag-node s-completed"[^>]* data-task="two"/);
  });

  it('refuses any host but 127.0.0.1', async () => {
    const swarm = createSwarm();
    cleanup.push(() => swarm.close());
    const run = swarm.run(plan);
    cleanup.push(() => run.result);
    await expect(startLiveUi({ run, host: '0.0.0.0' as '127.0.0.1' })).rejects.toThrow(/host must be 127\.0\.0\.1/);
  });
});

describe('startLiveUi on a run that cannot start', () => {
  it('says the run ended, with the events it had', async () => {
    const swarm = createSwarm();
    cleanup.push(() => swarm.close());
    // An MCP server that exits before it connects: run.result rejects before any task.
    const run = swarm.run({ ...plan, tools: { servers: { gone: { command: process.execPath, args: ['-e', 'process.exit(3)'] } } } });
    const refused = run.result.then(
      () => 'started',
      (e: unknown) => String(e),
    );
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    expect(await refused).toMatch(/could not connect to MCP server "gone"/);
    const stream = await fetch(ui.url.replace('/?', '/events?'));
    const got = await readSse(stream, (all) => all.some((m) => m.type === 'view' && (m.data as { done: boolean }).done));
    expect(got.filter((m) => m.type === 'view').at(-1)!.data).toMatchObject({ done: true });
  });
});
