/**
 * What a task's last error says, end to end over loopback: a connection refused on the last
 * attempt says the retries are spent (not that the call "is retried with backoff"); a redirect
 * says it is one, where it points (without secrets), that it is not followed, and what to check.
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm } from '../../src/index.js';
import { classifyHttpError } from '../../src/providers/classify.js';
import { startServer, type TestServer } from './server.js';

const KEY = 'sk-final-errors-0123456789abcdef';

/** A loopback port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function runOnce(baseURL: string, maxRetries: number) {
  const swarm = createSwarm({ store: false, backoff: { baseMs: 1, maxMs: 1 }, env: { K: KEY } });
  const result = await swarm.run({
    providers: { a: { type: 'anthropic', baseURL, keys: [{ env: 'K' }] } },
    models: { m: { provider: 'a', model: 'claude-sonnet-4-5', maxTokens: 32 } },
    defaults: { maxRetries },
    tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
  }).result;
  await swarm.close();
  return result;
}

describe('the last network failure', () => {
  it('says the retries are spent, not that the call is retried', async () => {
    const result = await runOnce(`http://127.0.0.1:${await closedPort()}`, 1);
    const task = result.tasks.t!;
    expect(task).toMatchObject({ status: 'failed', requests: 2, retries: 1, error: { code: 'network' } });
    expect(task.error!.message).toMatch(/^a\/claude-sonnet-4-5, key a:[0-9a-f]{8}: the connection failed \(ECONNREFUSED: .*\) \(check the base URL\): the call is not retried: the task's retries are spent\.$/);
    expect(task.error!.message).not.toContain('is retried with backoff');
  });
});

describe('a redirect', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.close());

  it.each([301, 307, 308])('HTTP %i: a redirect, its Location without secrets, not followed, check baseURL; not retried', async (status) => {
    server.respond({ status, headers: { location: `https://user:${KEY}@api.example.test/v1/messages?api_key=${KEY}&region=eu`, 'content-type': 'text/plain' }, body: '' });
    const result = await runOnce(server.url, 2);
    const error = result.tasks.t!.error!;
    expect(error).toMatchObject({ code: 'bad_request', retryable: false, status });
    // Not retried: one request.
    expect(result.tasks.t!.requests).toBe(1);
    expect(error.message).toMatch(
      new RegExp(
        `^a/claude-sonnet-4-5, key a:[0-9a-f]{8}: HTTP ${status} redirect to https://api\\.example\\.test/v1/messages\\?api_key=\\.\\.\\.&region=\\.\\.\\.: swarmstate does not follow redirects\\. Check the provider's baseURL \\(this request went to ${server.url.replace(/[.]/g, '\\.')}/v1/messages\\): point it at the address the redirect names \\(https rather than http, another host or path\\); this is not retried\\.$`,
      ),
    );
    expect(error.message).not.toContain(KEY);
    expect(error.message).not.toContain('invalid');
  });

  it('a relative Location is shown resolved against the request, and a missing one is said to be missing', () => {
    const facts = { provider: 'a', model: 'm', keyId: 'a:1' };
    const relative = classifyHttpError({ ...facts, status: 302, body: '', headers: { location: '/v2/messages' }, url: 'http://127.0.0.1:9/v1/messages' });
    expect(relative.message).toContain('HTTP 302 redirect to http://127.0.0.1:9/v2/messages: swarmstate does not follow redirects');
    const none = classifyHttpError({ ...facts, status: 303, body: 'see other' });
    expect(none.message).toContain('HTTP 303 redirect (no Location header): swarmstate does not follow redirects. Check the provider\'s baseURL:');
    expect(none).toMatchObject({ code: 'bad_request', retryable: false });
  });
});
