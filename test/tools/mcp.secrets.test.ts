/**
 * An MCP server's settings are secrets: a real stdio server that prints and echoes the token of
 * its config. What the connection hands back (tool results, error results, the stderr it keeps
 * and passes on, a failed connect's message) names the setting instead of holding the token.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connectMcpServer, type McpToolSource } from '../../src/tools/index.js';

const TOKEN = 'ghp_leakedTokenValue0123456789';
const BEARER = 'sk-header-style-abcdef';
const SHOWN = '[redacted tools.servers.gh.env.GH_TOKEN]';
const leaky = (extra: Record<string, string> = {}) => ({
  command: process.execPath,
  args: ['test/fixtures/mcp/leaky-server.mjs'],
  env: { GH_TOKEN: TOKEN, GH_AUTH: `Bearer ${BEARER}`, LOG_LEVEL: 'debug', ...extra },
});
const signal = () => new AbortController().signal;

let sources: McpToolSource[] = [];
afterEach(async () => {
  await Promise.all(sources.map((s) => s.close()));
  sources = [];
});

describe('the secrets of an MCP server config', () => {
  it('never come back in results, error results, stderr or a crash message', async () => {
    const seen: string[] = [];
    const gh = await connectMcpServer('gh', leaky(), { onStderr: (text) => seen.push(text) });
    sources.push(gh);

    const who = await gh.call('whoami', {}, { signal: signal() });
    expect(who.isError).toBe(false);
    expect(who.content).toContain(`token ${SHOWN}`);
    // The whole value, and the token of "Bearer <token>" alone, as servers echo it.
    expect(who.content).toContain('{"auth":"[redacted tools.servers.gh.env.GH_AUTH]"}; bearer [redacted tools.servers.gh.env.GH_AUTH]');

    const refused = await gh.call('refuse', {}, { signal: signal() });
    expect(refused).toEqual({ isError: true, content: `401 Unauthorized: rejected token ${SHOWN}` });

    const crash = await gh.call('crash', {}, { signal: signal() });
    expect(crash.isError).toBe(true);
    expect(crash.content).toContain(`fatal: rejected token ${SHOWN}`);

    expect(gh.stderrTail()).toContain(`starting: rejected token ${SHOWN}`);
    expect(seen.join('')).toContain(`starting: rejected token ${SHOWN}`);
    const everything = JSON.stringify([who, refused, crash, gh.stderrTail(), seen]);
    expect(everything).not.toContain(TOKEN);
    expect(everything).not.toContain(BEARER);
    // A short setting ("debug") is an ordinary word, not looked for.
    expect(everything).not.toContain('[redacted tools.servers.gh.env.LOG_LEVEL]');
  });

  it('never reach the stderr listener in halves when a secret is split across two chunks', async () => {
    const seen: string[] = [];
    const gh = await connectMcpServer('gh', leaky(), { onStderr: (text) => seen.push(text) });
    sources.push(gh);
    await gh.call('leakHalf', {}, { signal: signal() });
    // The first chunk has been read (what comes before the token is shown either way): only then
    // is the rest written, so the two halves come in two chunks.
    await expect.poll(() => seen.join(''), { timeout: 20_000 }).toContain('split:');
    await gh.call('leakRest', {}, { signal: signal() });
    // The rest of the line arrives after the second call's answer, like any stderr: wait for it.
    await expect.poll(() => seen.join(''), { timeout: 20_000 }).toContain(`split: rejected token ${SHOWN} (end)`);
    const firstHalf = TOKEN.slice(0, Math.floor(TOKEN.length / 2));
    for (const text of seen) expect(text).not.toContain(firstHalf);
    expect(gh.stderrTail()).toContain(`split: rejected token ${SHOWN} (end)`);
  });

  it('never come back in the error of a server that dies before it connects', async () => {
    const error = (await connectMcpServer('gh', leaky({ DIE_AT_START: '1' }), { connectTimeoutMs: 20_000 }).then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(error.message).toMatch(/^could not connect to MCP server "gh"/);
    expect(error.message).toContain(`cannot start: rejected token ${SHOWN}`);
    expect(error.message).not.toContain(TOKEN);
    expect(error.cause).toBeUndefined();
  });

  it("keep a URL's password and query values out of a failed connect's message", async () => {
    const token = 'urlTokenValue0123456789';
    // Nothing listens on port 1: the connect fails at once, and its message names the server's URL.
    const error = (await connectMcpServer('web', { url: `http://user:pa55word-secret@127.0.0.1:1/mcp?api_key=${token}&v=2` }, { connectTimeoutMs: 20_000 }).then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(error.message).toMatch(/^could not connect to MCP server "web" \(http:\/\/127\.0\.0\.1:1\/mcp\?api_key=\.\.\.&v=\.\.\.\)/);
    expect(error.message).not.toContain(token);
    expect(error.message).not.toContain('pa55word-secret');
  });
});
