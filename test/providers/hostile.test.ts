/**
 * The real adapters, over real HTTP, against a server that misbehaves (test/helpers/hostile.ts).
 * Bounds are asserted by behaviour: the call fails with the bound's error, the server sees the
 * client leave long before its answer ends, the deadline's error arrives while bytes still flow.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderError } from '../../src/providers/errors.js';
import { createOpenAIProvider } from '../../src/providers/openai.js';
import { replyLimits } from '../../src/providers/replyLimits.js';
import type { Provider, ProviderRequest } from '../../src/providers/types.js';
import { type HostileServer, startHostile } from '../helpers/hostile.js';
import { makeRequest, SECRET } from './server.js';

let server: HostileServer;
const providers: Record<'anthropic' | 'openai', { streamed: Provider; plain: Provider }> = {} as never;

beforeAll(async () => {
  server = await startHostile({ mode: 'unknown-events' });
  providers.anthropic = {
    streamed: createAnthropicProvider({ baseURL: server.url }),
    plain: createAnthropicProvider({ baseURL: server.url, stream: false }),
  };
  providers.openai = {
    streamed: createOpenAIProvider({ baseURL: `${server.url}/v1` }),
    plain: createOpenAIProvider({ baseURL: `${server.url}/v1`, stream: false }),
  };
});

afterAll(async () => {
  for (const p of Object.values(providers)) {
    await p.streamed.close?.();
    await p.plain.close?.();
  }
  await server.close();
});

async function failure(provider: Provider, overrides: Partial<ProviderRequest> = {}): Promise<ProviderError> {
  const error = await provider.call(makeRequest(overrides)).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

/** The number the next request's response will have in `server.responses` (1-based). */
const nextResponse = () => server.responses.length + 1;

describe.each(['anthropic', 'openai'] as const)('%s adapter against a hostile server', (protocol) => {
  const streamed = () => providers[protocol].streamed;

  it('ignores events of unknown types whose data is not JSON', async () => {
    server.setMode({ mode: 'unknown-events' });
    const out = await streamed().call(makeRequest());
    expect(out.content).toEqual([{ type: 'text', text: 'hello' }]);
    expect(out.stopReason).toBe('end_turn');
  });

  it('still fails a needed event whose data is broken JSON', async () => {
    server.setMode({ mode: 'bad-json' });
    const error = await failure(streamed());
    expect(error.code).toBe('server_error');
    expect(error.message).toContain('malformed response');
    expect(error.retryable).toBe(true);
  });

  it('fails a line that never ends at the line bound, and leaves the connection', async () => {
    server.setMode({ mode: 'endless', shape: 'line', pace: 'flood' });
    const n = nextResponse();
    // maxTokens high enough that the byte bound (about 49 MiB) is not reached first.
    const error = await failure(streamed(), { maxTokens: 100_000 });
    expect(error.code).toBe('server_error');
    expect(error.message).toContain('an SSE line is longer than 8388608 characters');
    expect((await server.closed(n)).abandoned).toBe(true);
  });

  it('fails a stream past the byte bound its maxTokens allow', async () => {
    server.setMode({ mode: 'endless', shape: 'line', pace: 'flood' });
    const n = nextResponse();
    const error = await failure(streamed(), { maxTokens: 64 });
    expect(error.code).toBe('server_error');
    expect(error.message).toContain(`the streamed reply is larger than 1.03 MiB (the bound for maxTokens 64`);
    expect(error.message).toContain('raise maxTokens');
    const response = await server.closed(n);
    expect(response.abandoned).toBe(true);
    expect(response.bytes).toBeGreaterThan(replyLimits(64).bytes);
  });

  it('fails a 100 MB reply at the text bound and stops reading it', async () => {
    server.setMode({ mode: 'huge' });
    const n = nextResponse();
    const error = await failure(streamed(), { maxTokens: 64 });
    expect(error.code).toBe('server_error');
    expect(error.message).toContain(`the reply's text and tool arguments pass ${replyLimits(64).text} characters`);
    const response = await server.closed(n);
    expect(response.abandoned).toBe(true);
    expect(response.bytes).toBeLessThan(100_000_000);
  });

  it('fails a 100 MB plain JSON reply at the body limit, saying so', async () => {
    server.setMode({ mode: 'huge' });
    const n = nextResponse();
    const error = await failure(providers[protocol].plain);
    expect(error.code).toBe('server_error');
    expect(error.message).toContain('the body is larger than 16 MiB (the limit of a plain reply)');
    const response = await server.closed(n);
    expect(response.abandoned).toBe(true);
    expect(response.bytes).toBeLessThan(100_000_000);
  });

  it("ends with the deadline's error while the server keeps sending", async () => {
    server.setMode({ mode: 'endless', shape: 'pings', pace: 'trickle' });
    const n = nextResponse();
    const error = await failure(streamed(), { maxTokens: 100_000, signal: AbortSignal.timeout(300) });
    expect(error.code).toBe('cancelled');
    const response = await server.closed(n);
    expect(response.abandoned).toBe(true);
    expect(response.bytes).toBeGreaterThan(0);
  });

  it('rejects a tool call index of 2e8 without building anything of that size', async () => {
    server.setMode({ mode: 'sparse-tool-index' });
    // Rejected at the first delta: the old sparse array blocked the event loop for seconds here.
    const error = await failure(streamed());
    expect(error.code).toBe('server_error');
    expect(error.message).toMatch(/(tool call|content block) index 200000000 is not an integer from 0 to 1023 \(at most 1024 in one reply\)/);
  });

  it('keeps sparse small indexes in index order', async () => {
    server.setMode({ mode: 'sparse-tool-index', indexes: [7, 2, 900] });
    const out = await streamed().call(makeRequest());
    expect(out.stopReason).toBe('tool_use');
    expect(out.content.map((b) => (b.type === 'tool_use' ? b.input : b))).toEqual([{ path: 'f2' }, { path: 'f7' }, { path: 'f900' }]);
  });

  it('bounds the number of tool calls in one reply', async () => {
    server.setMode({ mode: 'sparse-tool-index', indexes: Array.from({ length: 1025 }, (_, i) => i) });
    const error = await failure(streamed());
    expect(error.code).toBe('server_error');
    expect(error.message).toContain('index 1024 is not an integer from 0 to 1023');
  });

  it('echo mode: a key echoed in an error body is redacted from the error', async () => {
    server.setMode({ mode: 'echo', status: 401 });
    const error = await failure(streamed());
    expect(error.code).toBe('auth');
    expect(error.message).toContain('[redacted]');
    expect(JSON.stringify(error.toJSON())).not.toContain(SECRET);
  });

  it('echo mode: a successful reply carries the key back, streamed or not', async () => {
    server.setMode({ mode: 'echo' });
    for (const provider of [streamed(), providers[protocol].plain]) {
      const out = await provider.call(makeRequest());
      expect(out.content).toEqual([{ type: 'text', text: `your key is ${SECRET}` }]);
    }
  });
});

describe('replyLimits', () => {
  it('grows with maxTokens from a floor, up to absolute caps', () => {
    expect(replyLimits(64)).toEqual({ bytes: 1024 * 1024 + 64 * 512, text: 64 * 1024 + 64 * 64, blocks: 1024, line: 8 * 1024 * 1024 });
    expect(replyLimits(10_000_000)).toMatchObject({ bytes: 64 * 1024 * 1024, text: 16 * 1024 * 1024 });
    expect(replyLimits(Number.NaN)).toMatchObject({ bytes: 1024 * 1024, text: 64 * 1024 });
  });
});
