import { afterEach, describe, expect, it, vi } from 'vitest';
import { connectMcpServer, type McpToolSource } from '../../src/tools/index.js';

const CRASHY = { command: process.execPath, args: ['test/tools/fixtures/crash-server.mjs'] };
const UNAVAILABLE = 'server "crashy" exited twice; its tools are unavailable for the rest of the run';

let sources: McpToolSource[] = [];
async function connect(...args: Parameters<typeof connectMcpServer>): Promise<McpToolSource> {
  const source = await connectMcpServer(...args);
  sources.push(source);
  return source;
}
const signal = () => new AbortController().signal;
const pidOf = (content: string) => Number(/^pid (\d+)$/.exec(content)![1]);
const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

afterEach(async () => {
  await Promise.all(sources.map((s) => s.close()));
  sources = [];
  vi.restoreAllMocks();
});

describe('a stdio server that crashes', () => {
  it('first crash: calls in flight get an error result, the server restarts, the next call works', async () => {
    const crashy = await connect('crashy', CRASHY);
    const firstPid = pidOf((await crashy.call('work', {}, { signal: signal() })).content);

    const slow = crashy.call('work', { sleepMs: 5000 }, { signal: signal() });
    const crash = crashy.call('work', { crash: true }, { signal: signal() });
    for (const result of await Promise.all([slow, crash])) {
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/^tool crashy\.work failed: server "crashy" exited while it ran; the server is being restarted/);
      // The server's last words are kept for the message.
      expect(result.content).toContain('crashing as asked');
    }
    expect(crashy.stats.crashes).toBe(1);

    const after = await crashy.call('work', {}, { signal: signal() });
    expect(after.isError).toBe(false);
    expect(pidOf(after.content)).not.toBe(firstPid);
    expect(isAlive(firstPid)).toBe(false);
    expect(crashy.state).toBe('ready');
    expect(crashy.list().map((t) => t.name)).toEqual(['crashy.work']);
  });

  it('second crash: every later call fails at once with a message naming the server', async () => {
    const crashy = await connect('crashy', CRASHY);
    await crashy.call('work', { crash: true }, { signal: signal() });
    expect((await crashy.call('work', {}, { signal: signal() })).isError).toBe(false);

    const second = await crashy.call('work', { crash: true }, { signal: signal() });
    expect(second.isError).toBe(true);
    expect(second.content).toContain(`exited while it ran; ${UNAVAILABLE}`);
    expect(crashy.state).toBe('unavailable');

    // "At once": answered without any I/O (no restart, no request), before the next macrotask.
    const calls = Promise.all(Array.from({ length: 5 }, () => crashy.call('work', {}, { signal: signal() })));
    const first = await Promise.race([calls, new Promise<'waited'>((resolve) => setImmediate(() => resolve('waited')))]);
    expect(first).not.toBe('waited');
    const later = await calls;
    expect(later).toEqual(Array.from({ length: 5 }, () => ({ content: `tool crashy.work failed: ${UNAVAILABLE}`, isError: true })));
  });

  it('calls that arrive during the restart wait for it and then run', async () => {
    const crashy = await connect('crashy', CRASHY);
    await crashy.call('work', { crash: true }, { signal: signal() });
    expect(crashy.state).toBe('restarting');
    const results = await Promise.all(Array.from({ length: 3 }, () => crashy.call('work', {}, { signal: signal() })));
    expect(results.every((r) => !r.isError && /^pid \d+$/.test(r.content))).toBe(true);
  });

  it('with restart off, the first crash makes its tools unavailable', async () => {
    const crashy = await connect('crashy', CRASHY, { restart: false });
    await crashy.call('work', { crash: true }, { signal: signal() });
    expect(crashy.state).toBe('unavailable');
    expect(await crashy.call('work', {}, { signal: signal() })).toEqual({
      content: 'tool crashy.work failed: server "crashy" exited; its tools are unavailable for the rest of the run',
      isError: true,
    });
  });

  it('keeps stderr for messages without printing it, unless onStderr asks for it', async () => {
    const printed = vi.spyOn(process.stderr, 'write');
    const seen: string[] = [];
    const quiet = await connect('crashy', CRASHY);
    const loud = await connect('loud', CRASHY, { onStderr: (text) => seen.push(text) });
    await Promise.all([quiet.call('work', { crash: true }, { signal: signal() }), loud.call('work', { crash: true }, { signal: signal() })]);
    expect(quiet.stderrTail()).toContain('crashing as asked');
    expect(seen.join('')).toContain('crashing as asked');
    expect(printed.mock.calls.some(([chunk]) => String(chunk).includes('crashing as asked'))).toBe(false);
  });

  it('close ends the server process', async () => {
    const crashy = await connect('crashy', CRASHY);
    const pid = pidOf((await crashy.call('work', {}, { signal: signal() })).content);
    expect(isAlive(pid)).toBe(true);
    await crashy.close();
    expect(isAlive(pid)).toBe(false);
    expect(crashy.state).toBe('closed');
  });
});
