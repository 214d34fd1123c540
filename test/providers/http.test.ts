/**
 * Transport failures through the adapters over real sockets: abort, timeouts, resets, truncation,
 * and the per-origin keep-alive pool.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderError } from '../../src/providers/errors.js';
import { createOpenAIProvider } from '../../src/providers/openai.js';
import type { Provider } from '../../src/providers/types.js';
import { fixture, makeRequest, SSE, startServer, type TestServer } from './server.js';

let server: TestServer;
const providers: Provider[] = [];

beforeAll(async () => {
  server = await startServer();
});

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close?.()));
});

afterAll(async () => {
  await server.close();
});

function anthropic(options: Parameters<typeof createAnthropicProvider>[0] = {}): Provider {
  const provider = createAnthropicProvider({ baseURL: server.url, ...options });
  providers.push(provider);
  return provider;
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

const events = fixture('anthropic/text.sse').split('\n\n');
const head = events.slice(0, 3).join('\n\n') + '\n\n';

describe('abort', () => {
  it('ends a call mid-stream with code cancelled, and the server sees the connection close', async () => {
    const controller = new AbortController();
    let serverSawClose!: () => void;
    const closed = new Promise<void>((resolve) => (serverSawClose = resolve));
    server.respond((_req, res) => {
      res.on('close', () => serverSawClose());
      res.writeHead(200, SSE);
      // Abort once the first events are out; the stream itself would go on forever, so the call
      // ending at all shows the abort ended it (no wall-clock bound: a loaded machine is slow).
      res.write(head, () => controller.abort());
    });
    const error = await failure(anthropic().call(makeRequest({ signal: controller.signal })));
    expect(error.code).toBe('cancelled');
    expect(error.retryable).toBe(false);
    expect(error.keyId).toBe('main:ab12');
    await closed;
  });

  it('does not send a call whose signal has already fired', async () => {
    const before = server.requests.length;
    const error = await failure(anthropic().call(makeRequest({ signal: AbortSignal.abort() })));
    expect(error.code).toBe('cancelled');
    expect(server.requests.length).toBe(before);
  });

  it('cancels a call still waiting for its headers', async () => {
    const controller = new AbortController();
    // The request has reached the server, which never answers: the client waits for headers.
    server.respond(() => controller.abort());
    const error = await failure(anthropic().call(makeRequest({ signal: controller.signal })));
    expect(error.code).toBe('cancelled');
  });
});

describe('timeouts', () => {
  it('reads no headers within headersTimeoutMs as a retryable timeout', async () => {
    server.respond(() => {}); // never answers
    const error = await failure(anthropic({ headersTimeoutMs: 150 }).call(makeRequest()));
    expect(error.code).toBe('timeout');
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/no response headers within 150 ms/);
  });

  it('reads a stream that stalls longer than bodyTimeoutMs as a retryable timeout', async () => {
    server.respond((_req, res) => {
      res.writeHead(200, SSE);
      res.write(head); // then silence
    });
    const error = await failure(anthropic({ bodyTimeoutMs: 150 }).call(makeRequest()));
    expect(error.code).toBe('timeout');
    expect(error.message).toMatch(/stalled for more than 150 ms/);
  });
});

describe('connection failures', () => {
  it('reads a connection reset before the response as a retryable network error', async () => {
    server.respond((req) => req.socket.resetAndDestroy());
    const error = await failure(anthropic().call(makeRequest()));
    expect(error.code).toBe('network');
    expect(error.retryable).toBe(true);
  });

  it('reads a socket closed mid-stream as a retryable network error', async () => {
    server.respond((req, res) => {
      res.writeHead(200, SSE);
      res.write(head, () => setTimeout(() => req.socket.destroy(), 10));
    });
    const error = await failure(anthropic().call(makeRequest()));
    expect(error.code).toBe('network');
    expect(error.retryable).toBe(true);
  });

  it('reads a cleanly ended but truncated stream as a retryable network error (both dialects)', async () => {
    server.respond({ status: 200, headers: SSE, body: head });
    expect((await failure(anthropic().call(makeRequest()))).code).toBe('network');
    const openai = createOpenAIProvider({ baseURL: server.url });
    providers.push(openai);
    server.respond({ status: 200, headers: SSE, body: fixture('openai/truncated.sse') });
    expect((await failure(openai.call(makeRequest()))).code).toBe('network');
  });

  it('reads a refused connection as a network error that names the base URL', async () => {
    const dead = await startServer();
    const url = dead.url;
    await dead.close();
    const provider = createAnthropicProvider({ baseURL: url });
    providers.push(provider);
    const error = await failure(provider.call(makeRequest()));
    expect(error.code).toBe('network');
    expect(error.message).toMatch(/ECONNREFUSED.*check the base URL/);
  });
});

describe('connection pool', () => {
  // undici frees a connection a tick after its body ends; a call made in that very tick opens a
  // second one. Agents call again only after their tools ran, so one turn of the loop is enough.
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  it('keeps one connection alive across sequential calls to the same origin', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse') });
    const provider = anthropic();
    const before = server.requests.length;
    for (let i = 0; i < 3; i++) {
      await provider.call(makeRequest());
      await nextTurn();
    }
    const used = new Set(server.requests.slice(before).map((r) => r.connection));
    expect(used.size).toBe(1);
  });

  it('keeps the connection alive after an error response too', async () => {
    server.respond({ status: 529, body: fixture('anthropic/errors/529_overloaded_error.json') });
    const provider = anthropic();
    const before = server.requests.length;
    await failure(provider.call(makeRequest()));
    await nextTurn();
    await failure(provider.call(makeRequest()));
    expect(new Set(server.requests.slice(before).map((r) => r.connection)).size).toBe(1);
  });

  it('runs concurrent calls in parallel on several connections', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse'), chunkSize: 50 });
    const provider = anthropic();
    const outs = await Promise.all(Array.from({ length: 4 }, () => provider.call(makeRequest())));
    expect(outs.every((o) => o.stopReason === 'end_turn')).toBe(true);
  });

  it('closes its sockets on close() and refuses calls afterwards', async () => {
    server.respond({ status: 200, headers: SSE, body: fixture('anthropic/text.sse') });
    const provider = createAnthropicProvider({ baseURL: server.url });
    await provider.call(makeRequest());
    const closedBefore = server.closedConnections;
    await provider.close?.();
    // The server sees the close when its socket does: wait for that, not for a fixed time.
    while (server.closedConnections === closedBefore) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(server.closedConnections).toBeGreaterThan(closedBefore);
    const error = await failure(provider.call(makeRequest()));
    expect(error.code).toBe('internal');
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/provider was closed/);
  });
});
