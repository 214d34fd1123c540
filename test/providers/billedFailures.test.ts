/**
 * Which failed calls are charged, end to end over loopback with a real adapter: a call that may
 * have reached the server (the server took the request, then never answered: a headers timeout;
 * or dropped the connection after reading it) is charged its worst case, in the ledger and in the
 * cost the run shows; one that never left (the connection was refused) is charged nothing.
 */
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, type RunEvent } from '../../src/index.js';
import { classifyTransportError } from '../../src/providers/classify.js';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderError } from '../../src/providers/errors.js';
import { makeRequest } from './server.js';

const KEY = 'sk-billed-failures-0123456789';
// docs/architecture.md's example: a bound of 50 tokens, (50 x 1.25 + 256 x 100) / 10^6.
const WORST = 0.0256625;

/** A raw TCP server: `silent` reads the request and never answers; `drop` reads it and closes the connection. */
async function rawServer(mode: 'silent' | 'drop') {
  const sockets = new Set<Socket>();
  let requests = 0;
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let seen = '';
    socket.on('data', (chunk) => {
      seen += chunk.toString('latin1');
      // The whole request is in once its JSON body has closed.
      if (seen.includes('\r\n\r\n') && seen.trimEnd().endsWith('}')) {
        requests++;
        seen = '';
        if (mode === 'drop') socket.destroy();
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function runAgainst(baseURL: string) {
  const swarm = createSwarm({ store: false, env: { K: KEY } });
  const run = swarm.run({
    providers: { a: { type: 'anthropic', baseURL, keys: [{ env: 'K' }], headersTimeoutMs: 300 } },
    models: { pricey: { provider: 'a', model: 'claude-sonnet-4-5', maxTokens: 256, price: { input: 1, output: 100 } } },
    defaults: { maxRetries: 0 },
    budget: { usd: 1 },
    tasks: [{ id: 't', model: 'pricey', prompt: 'Task 3. [[sim:length 200]]' }],
  });
  const events: RunEvent[] = [];
  run.events.on('*', (_type, e) => events.push(e as RunEvent));
  // The ledger's run account as the run ends (the ledger stops with the run).
  let ledger: unknown;
  run.events.on('run:completed', () => {
    ledger = (run.actor!.system.get('ledger')!.getSnapshot() as { context: { book: { run(): unknown } } }).context.book.run();
  });
  const result = await run.result;
  await swarm.close();
  return { result, ledger, errors: events.filter((e): e is Extract<RunEvent, { type: 'model:error' }> => e.type === 'model:error') };
}

describe('a failed call that may have reached the server is charged its worst case', () => {
  let silent: Awaited<ReturnType<typeof rawServer>>;
  let drop: Awaited<ReturnType<typeof rawServer>>;
  beforeAll(async () => {
    silent = await rawServer('silent');
    drop = await rawServer('drop');
  });
  afterAll(async () => {
    await silent.close();
    await drop.close();
  });

  it('the server took the request and never answered (headers timeout): charged the reservation, in the ledger and the cost shown', async () => {
    const { result, ledger, errors } = await runAgainst(silent.url);
    expect(silent.requests()).toBe(1);
    expect(result.tasks.t).toMatchObject({ status: 'failed', error: { code: 'timeout' }, costUsd: WORST });
    expect(result.totals.costUsd).toBe(WORST);
    expect(ledger).toEqual({ limitUsd: 1, spentUsd: WORST, reservedUsd: 0 });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ costUsd: WORST, modelName: 'pricey' });
    expect(errors[0]!.error.unsent).toBeUndefined();
  });

  it('the server read the request and dropped the connection: charged the reservation', async () => {
    const { result, ledger } = await runAgainst(drop.url);
    expect(drop.requests()).toBeGreaterThanOrEqual(1);
    expect(result.tasks.t).toMatchObject({ status: 'failed', error: { code: 'network' }, costUsd: WORST });
    expect(ledger).toEqual({ limitUsd: 1, spentUsd: WORST, reservedUsd: 0 });
  });

  it('the connection was refused (nothing was sent): released, nothing charged', async () => {
    const { result, ledger, errors } = await runAgainst(`http://127.0.0.1:${await closedPort()}`);
    expect(result.tasks.t).toMatchObject({ status: 'failed', error: { code: 'network', unsent: true }, costUsd: 0 });
    expect(result.totals.costUsd).toBe(0);
    expect(ledger).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: 0 });
    expect(errors[0]).not.toHaveProperty('costUsd');
  });
});

describe('unsent: a failure of the connection itself, before any byte of the request', () => {
  const facts = { provider: 'a', model: 'm', keyId: 'a:1' };
  const sys = (code: string, syscall?: string) => Object.assign(new Error(`${syscall ?? 'x'} ${code}`), { code, ...(syscall ? { syscall } : {}) });

  it.each([
    ['ECONNREFUSED', 'connect', 'network'],
    ['EHOSTUNREACH', 'connect', 'network'],
    ['ETIMEDOUT', 'connect', 'timeout'],
    ['ENOTFOUND', 'getaddrinfo', 'network'],
    ['EAI_AGAIN', 'getaddrinfo', 'network'],
  ])('%s in %s: unsent', (code, syscall, as) => {
    const e = classifyTransportError(Object.assign(new TypeError('fetch failed'), { cause: sys(code, syscall) }), facts);
    expect(e).toMatchObject({ code: as, unsent: true });
    expect(e.toJSON().unsent).toBe(true);
  });

  it("undici's connect timeout: unsent", () => {
    expect(classifyTransportError(Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' }), facts)).toMatchObject({ code: 'timeout', unsent: true });
  });

  it.each([
    ['ECONNRESET', 'read'],
    ['ETIMEDOUT', 'read'],
    ['EHOSTUNREACH', 'write'],
    ['ECONNRESET', undefined],
    ['UND_ERR_SOCKET', undefined],
    ['UND_ERR_HEADERS_TIMEOUT', undefined],
  ])('%s (%s): may have reached the server', (code, syscall) => {
    const e = classifyTransportError(sys(code, syscall), facts);
    expect(e.unsent).toBeUndefined();
    expect(e.toJSON()).not.toHaveProperty('unsent');
  });

  it('a real refused connection through the adapter is unsent', async () => {
    const anthropic = createAnthropicProvider({ baseURL: `http://127.0.0.1:${await closedPort()}` });
    const error = await anthropic.call(makeRequest()).then(() => undefined, (e: unknown) => e);
    await anthropic.close?.();
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ code: 'network', unsent: true });
  });
});
