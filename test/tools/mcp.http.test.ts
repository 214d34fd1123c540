import { afterEach, describe, expect, it, vi } from 'vitest';
import { connectMcpServer, type McpToolSource } from '../../src/tools/index.js';
import { startHttpFixture, type HttpFixture } from './fixtures/httpServer.js';

let fixtures: HttpFixture[] = [];
let sources: McpToolSource[] = [];
async function serve(opts: { paged?: boolean } = {}): Promise<HttpFixture> {
  const fixture = await startHttpFixture(opts);
  fixtures.push(fixture);
  return fixture;
}
async function connect(...args: Parameters<typeof connectMcpServer>): Promise<McpToolSource> {
  const source = await connectMcpServer(...args);
  sources.push(source);
  return source;
}
const signal = () => new AbortController().signal;

afterEach(async () => {
  await Promise.all(sources.map((s) => s.close()));
  await Promise.all(fixtures.map((f) => f.close()));
  sources = [];
  fixtures = [];
});

describe('a project-own MCP server over Streamable HTTP', () => {
  it('lists its tools with their annotations', async () => {
    const { url } = await serve();
    const http = await connect('calc', { url });
    expect(http.list().map((t) => t.name)).toEqual(['calc.add', 'calc.slow', 'calc.fail']);
    expect(http.list()[0]).toMatchObject({ tool: 'add', server: 'calc', annotations: { readOnlyHint: true, openWorldHint: false } });
    expect(http.list()[1].annotations).toBeUndefined();
  });

  it('calls add and gets the sum', async () => {
    const { url } = await serve();
    const http = await connect('calc', { url });
    expect(await http.call('add', { a: 2, b: 3 }, { signal: signal() })).toEqual({ content: '5', isError: false });
  });

  it('turns a tool that throws into an error result with its message', async () => {
    const { url } = await serve();
    const http = await connect('calc', { url });
    expect(await http.call('fail', {}, { signal: signal() })).toEqual({ content: 'the fail tool failed, as designed', isError: true });
  });

  it('times out a slow call, and the server sees the request cancelled', async () => {
    const fixture = await serve();
    const http = await connect('calc', { url: fixture.url });
    const result = await http.call('slow', { ms: 10_000 }, { signal: signal(), timeoutMs: 150 });
    expect(result).toEqual({ content: 'tool calc.slow timed out after 150 ms', isError: true });
    await vi.waitFor(() => expect(fixture.seen.slowCancelled).toBe(1), { timeout: 30_000 });
    expect(fixture.seen.slowFinished).toBe(0);
  });

  it('rejects with an AbortError on abort, and the server sees the request cancelled', async () => {
    const fixture = await serve();
    const http = await connect('calc', { url: fixture.url });
    const controller = new AbortController();
    const call = http.call('slow', { ms: 10_000 }, { signal: controller.signal });
    await vi.waitFor(() => expect(fixture.seen.slowStarted).toBe(1), { timeout: 30_000 });
    controller.abort();
    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
    await vi.waitFor(() => expect(fixture.seen.slowCancelled).toBe(1), { timeout: 30_000 });
  });

  it('an abort while waiting for a slot leaves the line without reaching the server', async () => {
    const fixture = await serve();
    const http = await connect('calc', { url: fixture.url }, { concurrency: 1 });
    const first = http.call('slow', { ms: 300 }, { signal: signal() });
    const controller = new AbortController();
    const second = http.call('slow', { ms: 300 }, { signal: controller.signal });
    expect(http.stats.queued).toBe(1);
    controller.abort();
    await expect(second).rejects.toMatchObject({ name: 'AbortError' });
    expect(http.stats.queued).toBe(0);
    expect((await first).content).toBe('slept 300 ms');
    expect(fixture.seen.slowStarted).toBe(1);
  });

  it('never has more than `concurrency` calls running on the server', async () => {
    const fixture = await serve();
    const http = await connect('calc', { url: fixture.url }, { concurrency: 3 });
    const results = await Promise.all(Array.from({ length: 9 }, (_, i) => http.call('slow', { ms: 50 + i }, { signal: signal() })));
    expect(results.map((r) => r.content)).toEqual(Array.from({ length: 9 }, (_, i) => `slept ${50 + i} ms`));
    expect(fixture.seen.maxActive).toBe(3);
    expect(http.stats.maxInFlight).toBe(3);
  });

  it('sends the configured headers with every request', async () => {
    const fixture = await serve();
    const http = await connect('calc', { url: fixture.url, headers: { Authorization: 'Bearer test-token' } });
    await http.call('add', { a: 1, b: 1 }, { signal: signal() });
    expect(fixture.seen.authorization.length).toBeGreaterThanOrEqual(3);
    expect(new Set(fixture.seen.authorization)).toEqual(new Set(['Bearer test-token']));
  });

  it('follows tools/list pagination cursors to the last page', async () => {
    const { url } = await serve({ paged: true });
    const paged = await connect('paged', { url });
    expect(paged.list().map((t) => t.name)).toEqual(['paged.t0', 'paged.t1', 'paged.t2', 'paged.t3', 'paged.t4']);
    expect((await paged.call('t4', {}, { signal: signal() })).content).toBe('called t4');
  });

  it('close ends the session on the server, and later calls get an error result', async () => {
    const fixture = await serve();
    const http = await connect('calc', { url: fixture.url });
    await http.close();
    expect(fixture.seen.sessionsClosed).toBe(1);
    expect(http.state).toBe('closed');
    expect(await http.call('add', { a: 1, b: 2 }, { signal: signal() })).toEqual({ content: 'tool calc.add failed: server "calc" is closed', isError: true });
  });
});
