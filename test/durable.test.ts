/**
 * The stored plan (src/durable.ts redactPlan): its inline secrets replaced by fingerprints, the
 * caller's plan untouched, and only what can hold a secret copied (a big plan's tasks are not
 * cloned for the journal). The run's result is redacted once, for its caller and the journal.
 */
import { describe, expect, it, vi } from 'vitest';
import { hasRedactions, inlineSecretPaths, redactPlan, settingSecrets, unredactPlan } from '../src/planSecrets.js';
import { fingerprint, Redactor } from '../src/keys.js';
import { createScriptedProvider, createSwarm, MemoryStore } from '../src/index.js';

function plan() {
  return {
    providers: {
      a: { type: 'anthropic', keys: ['sk-inline-secret-1', { env: 'KEY_B' }] },
      ['__proto__']: { type: 'openai', keys: ['sk-inline-secret-2'] },
      sim: { type: 'sim' },
    },
    models: { m: { provider: 'a', model: 'claude-haiku-4-5' } },
    tools: { servers: { fs: { command: 'x', env: { TOKEN: 'tok-secret', HOME: { env: 'HOME' } }, headers: { auth: 'Bearer hdr-secret' } } } },
    tasks: Array.from({ length: 3 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `p${i}`, deps: [] as string[] })),
  };
}

describe('redactPlan', () => {
  it('replaces every inline secret by its fingerprint, and leaves the caller plan as it was', () => {
    const original = plan();
    const before = JSON.stringify(original);
    const stored = redactPlan(original);
    expect(JSON.stringify(original)).toBe(before);
    const text = JSON.stringify(stored);
    for (const secret of ['sk-inline-secret-1', 'sk-inline-secret-2', 'tok-secret', 'hdr-secret']) expect(text).not.toContain(secret);
    expect(stored.providers.a.keys).toEqual([`[redacted ${fingerprint('sk-inline-secret-1')}]`, { env: 'KEY_B' }]);
    expect(Object.getOwnPropertyDescriptor(stored.providers, '__proto__')?.value).toEqual({ type: 'openai', keys: [`[redacted ${fingerprint('sk-inline-secret-2')}]`] });
    expect(stored.tools.servers.fs.env).toEqual({ TOKEN: `[redacted ${fingerprint('tok-secret')}]`, HOME: { env: 'HOME' } });
    expect(hasRedactions(stored)).toBe(true);
    expect(inlineSecretPaths(stored)).toEqual(inlineSecretPaths(original));
    // And back, from the plan given again.
    expect(unredactPlan(stored, original)).toEqual(original);
  });

  it('copies only the parts that can hold a secret: the tasks and models are the caller plan own', () => {
    const original = plan();
    const stored = redactPlan(original);
    expect(stored.tasks).toBe(original.tasks);
    expect(stored.models).toBe(original.models);
    expect(stored.providers.sim).toBe(original.providers.sim);
    expect(stored.providers.a).not.toBe(original.providers.a);
    expect(stored.tools.servers.fs).not.toBe(original.tools.servers.fs);
  });
});

describe('an MCP server URL in the stored plan', () => {
  const TOKEN = 'url-query-token-0123';
  const withUrls = () => ({
    ...plan(),
    tools: {
      servers: {
        tokened: { url: `https://mcp.example.com/v1/mcp?api_key=${TOKEN}&region=eu` },
        plain: { url: 'https://plain.example.com/mcp' },
        fromEnv: { url: { env: 'DOCS_URL' } },
      },
    },
  });

  it('keeps a URL with a query value as its fingerprint and the URL without it; a plain or env URL as it is', () => {
    const original = withUrls();
    const url = original.tools.servers.tokened.url;
    const stored = redactPlan(original);
    expect(original.tools.servers.tokened.url).toBe(url);
    expect(stored.tools.servers.tokened.url).toBe(`[redacted ${fingerprint(url)}] https://mcp.example.com/v1/mcp?api_key=...&region=...`);
    expect(JSON.stringify(stored)).not.toContain(TOKEN);
    expect(stored.tools.servers.plain.url).toBe('https://plain.example.com/mcp');
    expect(stored.tools.servers.fromEnv.url).toEqual({ env: 'DOCS_URL' });
    expect(redactPlan(stored)).toEqual(stored);
    expect(hasRedactions(stored)).toBe(true);
    // A distributed run refuses it as it refuses an inline header: it would travel through Redis.
    expect(inlineSecretPaths(original)).toContain('tools.servers.tokened.url');
    expect(inlineSecretPaths(stored)).toEqual(inlineSecretPaths(original));
    expect(inlineSecretPaths(original).filter((p) => p.endsWith('.url'))).toEqual(['tools.servers.tokened.url']);
    expect(unredactPlan(stored, original)).toEqual(original);
  });

  it('a resume given another URL (another token) is refused, naming where', () => {
    const stored = redactPlan(withUrls());
    const changed = withUrls();
    changed.tools.servers.tokened.url = 'https://mcp.example.com/v1/mcp?api_key=another-token&region=eu';
    expect(() => unredactPlan(stored, changed)).toThrow(/at: tools\.servers\.tokened\.url$/);
  });

  it("the run's redactor knows a URL's credentials, and a URL from the environment whole", () => {
    const envUrl = 'https://user-name-token@env.example.com/mcp?key=env-query-secret';
    const secrets = settingSecrets(withUrls(), { DOCS_URL: envUrl }).filter((s) => s.path.endsWith('.url'));
    expect(secrets).toEqual(
      expect.arrayContaining([
        { path: 'tools.servers.tokened.url', value: TOKEN },
        { path: 'tools.servers.fromEnv.url', value: 'env-query-secret' },
        { path: 'tools.servers.fromEnv.url', value: 'user-name-token' },
        { path: 'tools.servers.fromEnv.url', value: envUrl },
      ]),
    );
    expect(secrets.some((s) => s.path === 'tools.servers.plain.url')).toBe(false);
    expect(secrets.some((s) => s.value === `https://mcp.example.com/v1/mcp?api_key=${TOKEN}&region=eu`)).toBe(false);
  });
});

describe("the run's result in the journal", () => {
  it('is the result the caller gets, redacted once (not walked again to be stored)', async () => {
    const SECRET = 'sk-inline-result-secret-77';
    const store = new MemoryStore();
    const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => `the key is ${SECRET}` }) }, store });
    const walks = vi.spyOn(Redactor.prototype, 'redactDeep');
    try {
      const handle = swarm.run({
        providers: { p: { type: 'sim', keys: [SECRET] } },
        models: { m: { provider: 'p', model: 'instant' } },
        tasks: [{ id: 'a', model: 'm', prompt: 'x' }, { id: 'b', model: 'm', prompt: 'y', deps: ['a'] }],
      });
      const result = await handle.result;
      expect(JSON.stringify(result)).not.toContain(SECRET);
      expect(store.getRun(handle.id)?.result).toEqual(JSON.parse(JSON.stringify(result)));
      const resultWalks = walks.mock.calls.filter(([value]) => typeof value === 'object' && value !== null && 'totals' in value);
      expect(resultWalks).toHaveLength(1);
    } finally {
      walks.mockRestore();
      await swarm.close();
    }
  });
});
