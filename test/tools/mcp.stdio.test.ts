import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectMcpServer, type McpToolSource } from '../../src/tools/index.js';

const EVERYTHING = { command: process.execPath, args: ['node_modules/@modelcontextprotocol/server-everything/dist/index.js', 'stdio'] };
const MEMORY = 'node_modules/@modelcontextprotocol/server-memory/dist/index.js';

const sources: McpToolSource[] = [];
async function connect(...args: Parameters<typeof connectMcpServer>): Promise<McpToolSource> {
  const source = await connectMcpServer(...args);
  sources.push(source);
  return source;
}
const signal = () => new AbortController().signal;

afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.close()));
});

describe('server-everything over stdio', () => {
  it('lists tools qualified by the server name, with schema, title and annotations', async () => {
    const everything = await connect('everything', EVERYTHING);
    const tools = everything.list();
    const echo = tools.find((t) => t.name === 'everything.echo')!;
    expect(echo).toMatchObject({
      tool: 'echo',
      server: 'everything',
      description: 'Echoes back the input string',
      inputSchema: { type: 'object', required: ['message'] },
      annotations: { readOnlyHint: true, openWorldHint: false, destructiveHint: false, idempotentHint: true, title: 'Echo Tool' },
    });
    expect(tools.map((t) => t.name)).toContain('everything.get-sum');
    // Tools that only run as MCP tasks cannot be called directly: they are not offered.
    expect(tools.map((t) => t.tool)).not.toContain('simulate-research-query');
    expect(everything.state).toBe('ready');
  });

  it('calls echo and gets its text back', async () => {
    const everything = await connect('everything', EVERYTHING);
    expect(await everything.call('echo', { message: 'hello' }, { signal: signal() })).toEqual({ content: 'Echo: hello', isError: false });
  });

  it('passes an error result of the server on as isError, with its message', async () => {
    const everything = await connect('everything', EVERYTHING);
    const invalid = await everything.call('echo', {}, { signal: signal() });
    expect(invalid.isError).toBe(true);
    expect(invalid.content).toMatch(/message/);
    const unknown = await everything.call('no-such-tool', {}, { signal: signal() });
    expect(unknown).toMatchObject({ isError: true, content: expect.stringMatching(/no-such-tool not found/) });
  });

  it('summarizes non-text content: an image becomes [image mime, bytes]', async () => {
    const everything = await connect('everything', EVERYTHING);
    const result = await everything.call('get-tiny-image', {}, { signal: signal() });
    expect(result.isError).toBe(false);
    expect(result.content).toMatch(/^Here's the image you requested:\n\[image image\/png, \d+ bytes\]\nThe image above is the MCP logo\.$/);
  });

  it('answers 20 concurrent calls on one connection, each with its own result', async () => {
    const everything = await connect('everything', EVERYTHING);
    const messages = Array.from({ length: 20 }, (_, i) => `message ${i}`);
    const results = await Promise.all(messages.map((message) => everything.call('echo', { message }, { signal: signal() })));
    expect(results.map((r) => r.content)).toEqual(messages.map((m) => `Echo: ${m}`));
    // The default concurrency of 8 was used in full, never exceeded.
    expect(everything.stats.maxInFlight).toBe(8);
    expect(everything.stats).toMatchObject({ inFlight: 0, queued: 0 });
  });

  it('keeps at most `concurrency` calls in flight; the rest wait in line', async () => {
    const everything = await connect('everything', EVERYTHING, { concurrency: 2 });
    const started = performance.now();
    const calls = Array.from({ length: 6 }, () => everything.call('trigger-long-running-operation', { duration: 0.2, steps: 1 }, { signal: signal() }));
    expect(everything.stats.queued).toBe(4);
    let mostInFlight = 0;
    const sampler = setInterval(() => (mostInFlight = Math.max(mostInFlight, everything.stats.inFlight)), 5);
    const results = await Promise.all(calls);
    clearInterval(sampler);
    expect(results.every((r) => !r.isError && r.content.startsWith('Long running operation completed'))).toBe(true);
    expect(mostInFlight).toBe(2);
    expect(everything.stats.maxInFlight).toBe(2);
    // Three waves of 200 ms: the calls did queue rather than run all at once.
    expect(performance.now() - started).toBeGreaterThanOrEqual(590);
  });

  it('times out a slow call with an error result naming the tool', async () => {
    const everything = await connect('everything', EVERYTHING);
    // The operation takes 1 s; the result saying "timed out" shows the deadline ended it (no
    // wall-clock bound: a loaded machine may take longer than 1 s either way).
    const result = await everything.call('trigger-long-running-operation', { duration: 1, steps: 1 }, { signal: signal(), timeoutMs: 100 });
    expect(result).toEqual({ content: 'tool everything.trigger-long-running-operation timed out after 100 ms', isError: true });
    // The connection is still good after the cancelled request.
    expect((await everything.call('echo', { message: 'after' }, { signal: signal() })).content).toBe('Echo: after');
  });

  it('rejects with an AbortError when the caller aborts, before or during the call', async () => {
    const everything = await connect('everything', EVERYTHING);
    const before = new AbortController();
    before.abort();
    await expect(everything.call('echo', { message: 'x' }, { signal: before.signal })).rejects.toMatchObject({ name: 'AbortError' });

    const during = new AbortController();
    const call = everything.call('trigger-long-running-operation', { duration: 1, steps: 1 }, { signal: during.signal });
    setTimeout(() => during.abort(), 50);
    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
    expect(everything.stats.inFlight).toBe(0);
  });

  it('gives the server the safe default environment plus config.env, never the rest of process.env', async () => {
    process.env.SWARMSTATE_TEST_SECRET = 'sk-should-not-leak';
    try {
      const everything = await connect('everything', { ...EVERYTHING, env: { SWARMSTATE_TEST_VISIBLE: 'yes' } });
      const result = await everything.call('get-env', {}, { signal: signal() });
      const env = JSON.parse(result.content) as Record<string, string>;
      expect(env.SWARMSTATE_TEST_VISIBLE).toBe('yes');
      expect(env.PATH).toBe(process.env.PATH);
      expect(env.SWARMSTATE_TEST_SECRET).toBeUndefined();
      expect(result.content).not.toContain('sk-should-not-leak');
    } finally {
      delete process.env.SWARMSTATE_TEST_SECRET;
    }
  });

  it('fails to connect with a message naming the server, its command and its stderr', async () => {
    await expect(connectMcpServer('ghost', { command: 'swarmstate-no-such-command-xyz' })).rejects.toThrow(/MCP server "ghost".*swarmstate-no-such-command-xyz/);
    await expect(
      connectMcpServer('dies', { command: process.execPath, args: ['-e', 'console.error("boom: missing config"); process.exit(1)'] }),
    ).rejects.toThrow(/could not connect to MCP server "dies"[\s\S]*boom: missing config/);
  });

  it('refuses a server name with a dot, which would make `<server>.<tool>` ambiguous', async () => {
    await expect(connectMcpServer('a.b', EVERYTHING)).rejects.toThrow(/without dots/);
  });
});

describe('server-memory over stdio', () => {
  it('reads back entities it was asked to create (a write then a read)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'swarmstate-memory-'));
    try {
      const memory = await connect('memory', { command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') } });
      const create = memory.list().find((t) => t.name === 'memory.create_entities')!;
      expect(create.annotations?.readOnlyHint).toBe(false);
      const write = await memory.call(
        'create_entities',
        { entities: [{ name: 'swarmstate', entityType: 'project', observations: ['runs agents over a DAG'] }] },
        { signal: signal() },
      );
      expect(write.isError).toBe(false);
      const read = await memory.call('open_nodes', { names: ['swarmstate'] }, { signal: signal() });
      expect(read.isError).toBe(false);
      expect(JSON.parse(read.content)).toMatchObject({
        entities: [{ name: 'swarmstate', entityType: 'project', observations: ['runs agents over a DAG'] }],
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
