/** The plan's tools and compaction sections: MCP servers, shareable tools, defaults and checks. */
import { describe, expect, it } from 'vitest';
import { formatIssue, validatePlan } from '../../src/plan/index.js';

const base = () => ({
  providers: { p: { type: 'sim' } },
  models: { fast: { provider: 'p', model: 'm' } },
  tasks: [{ id: 'a', model: 'fast', prompt: 'x', tools: ['fs.read_text_file', 'lookup'] }] as Record<string, unknown>[],
  tools: { servers: { fs: { command: 'node', args: ['server.js'] } } } as Record<string, unknown>,
});
const problems = (plan: unknown, tools: string[] = ['lookup']) => {
  const r = validatePlan(plan, { env: { SET: 'v' }, tools });
  return r.ok ? [] : r.issues.map(formatIssue);
};

describe('plan tools and compaction', () => {
  it('accepts <server>.<tool> of a declared server and applies the defaults', () => {
    const r = validatePlan(base(), { env: {}, tools: ['lookup'] });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.plan.tools).toMatchObject({ shareable: [], batchWindowMs: 10, batchSize: 16, cacheTtlMs: 300000, callTimeoutMs: 60000, serverConcurrency: 8 });
    expect(r.plan.tools.servers.fs).toEqual({ command: 'node', args: ['server.js'], trusted: false });
    expect(r.plan.compaction).toEqual({ keepLast: 4 });
  });

  it('names an undeclared server, an unknown local tool, a bad server name and a missing env var', () => {
    const plan = base();
    plan.tasks[0]!.tools = ['git.log', 'nope'];
    plan.tools = { servers: { 'my.fs': { command: 'x' }, web: { url: 'http://127.0.0.1:1/mcp', headers: { authorization: { env: 'UNSET_TOKEN' } } } } };
    expect(problems(plan)).toEqual(
      expect.arrayContaining([
        'tasks[0].tools[0]: unknown MCP server "git" (declare it under tools.servers)',
        expect.stringMatching(/^tasks\[0\]\.tools\[1\]: unknown tool "nope"/),
        expect.stringMatching(/^tools\.servers\["?my\.fs"?\]: a server name may use only/),
        'tools.servers.web.headers.authorization.env: environment variable UNSET_TOKEN is not set',
      ]),
    );
  });

  it('takes a server URL from the environment: set, non-empty and an http(s) URL, never shown', () => {
    const plan = base();
    plan.tools = { servers: { fs: { command: 'node' }, docs: { url: { env: 'DOCS_URL' } } } };
    const check = (env: Record<string, string>) => {
      const r = validatePlan(plan, { env, tools: ['lookup'] });
      return r.ok ? r.plan.tools.servers.docs : r.issues.map(formatIssue);
    };
    expect(check({ DOCS_URL: 'https://mcp.example.com/mcp?api_key=secret-in-url' })).toEqual({ url: { env: 'DOCS_URL' }, trusted: false });
    expect(check({})).toEqual(['tools.servers.docs.url.env: environment variable DOCS_URL is not set']);
    expect(check({ DOCS_URL: '' })).toEqual(['tools.servers.docs.url.env: environment variable DOCS_URL is not set']);
    expect(check({ DOCS_URL: 'ftp://files.example.com/secret-in-url' })).toEqual(['tools.servers.docs.url.env: environment variable DOCS_URL does not hold an http(s) URL']);
    plan.tools = { servers: { docs: { url: { env: 'not a name' } }, web: { url: 'ftp://x' } } };
    expect(problems(plan)).toEqual(
      expect.arrayContaining(['tools.servers.docs.url.env: must be an environment variable name', 'tools.servers.web.url: must be an http(s) URL']),
    );
  });

  it('refuses a user name or password in a server URL or a provider baseURL (fetch refuses them; the key would not be sent), never showing it', () => {
    const plan = base();
    plan.tools = { servers: { fs: { command: 'node' }, web: { url: 'http://bot:pa55-secret@127.0.0.1:1/mcp' }, docs: { url: { env: 'DOCS_URL' } } } };
    (plan.providers as Record<string, unknown>).q = { type: 'anthropic', baseURL: 'https://me:pa55-secret@proxy.example.com', keys: [{ env: 'SET' }] };
    const r = validatePlan(plan, { env: { SET: 'v', DOCS_URL: 'https://token-secret@mcp.example.com/mcp' }, tools: ['lookup'] });
    const found = r.ok ? [] : r.issues.map(formatIssue);
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^tools\.servers\.web\.url: must not carry a user name or password \(fetch refuses such a URL\): send them in a header/),
        expect.stringMatching(/^tools\.servers\.docs\.url\.env: environment variable DOCS_URL: must not carry a user name or password/),
        expect.stringMatching(/^providers\.q\.baseURL: must not carry a user name or password/),
      ]),
    );
    expect(found.join('\n')).not.toMatch(/secret/);
  });

  it('checks the compaction model and a task budget', () => {
    const plan = { ...base(), compaction: { model: 'ghost' } };
    plan.tasks[0]!.maxInputTokens = 0;
    expect(problems(plan)).toEqual(expect.arrayContaining([expect.stringMatching(/^compaction\.model: unknown model "ghost"/), expect.stringMatching(/^tasks\[0\]\.maxInputTokens: /)]));
  });

  it('rejects an MCP server that is neither stdio nor http', () => {
    const plan = base();
    plan.tools = { servers: { fs: { socket: '/tmp/x' } } };
    expect(problems(plan).join('\n')).toMatch(/tools\.servers\.fs: an MCP server is/);
  });
});
