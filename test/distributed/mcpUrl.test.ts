/**
 * A distributed run (a real Redis, a worker in this process) with an MCP server whose URL comes
 * from the environment: the plan's tool settings travel through Redis as `{ "env": NAME }`, and
 * each worker reads the URL from its own environment. An inline URL with a token is refused
 * there, as an inline header value is. Skipped, saying so, without redis-server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, PlanValidationError, startSim, type SimServer } from '../../src/index.js';
import { startWorker } from '../../src/distributed/worker.js';
import { skipWithout } from '../helpers/programs.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startHttpFixture, type HttpFixture } from '../tools/fixtures/httpServer.js';

const skip = skipWithout('redis-server', 'the distributed MCP URL tests', 'apt-get install -y redis-server');

let redis: TestRedis;
let sim: SimServer;
let here: HttpFixture;
let there: HttpFixture;
beforeAll(async () => {
  if (skip) return;
  [redis, sim, here, there] = await Promise.all([startRedis(), startSim({ seed: 6 }), startHttpFixture(), startHttpFixture()]);
});
afterAll(async () => {
  await Promise.all([redis?.close(), sim?.close(), here?.close(), there?.close()]);
});

const plan = (url: unknown) => ({
  providers: { main: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'DIST_KEY' }] } },
  models: { m: { provider: 'main', model: 'claude-haiku-4-5', maxTokens: 128 } },
  tools: { servers: { docs: { url } } },
  tasks: [{ id: 'sum', model: 'm', tools: ['docs.add'], prompt: 'Add. [[sim:tool docs__add {"a":20,"b":22}]]' }],
});

describe.skipIf(skip)('a distributed run with an MCP server URL from the environment', () => {
  it('the worker calls the server at the URL of its own environment; an inline URL with a token is refused', async () => {
    const worker = await startWorker({ redis: redis.url, env: { DIST_KEY: 'sk-dist-mcp-url', DOCS_URL: `${there.url}?api_key=worker-token-0123` } });
    // The coordinator lists the tools at the URL its own environment gives.
    const swarm = createSwarm({ redis: redis.url, store: false, env: { DIST_KEY: 'sk-dist-mcp-url', DOCS_URL: `${here.url}?api_key=coordinator-token-0123` } });
    try {
      const result = await swarm.run(plan({ env: 'DOCS_URL' })).result;
      expect(result.status).toBe('completed');
      expect(there.seen.added).toEqual({ '20+22': 1 });
      expect(here.seen.added).toEqual({});
      expect(there.seen.urls.every((u) => u === '/mcp?api_key=worker-token-0123')).toBe(true);

      let error: unknown;
      try {
        swarm.run(plan(`${here.url}?api_key=inline-token-0123`));
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PlanValidationError);
      expect((error as PlanValidationError).issues).toEqual([
        { path: 'tools.servers.docs.url', message: expect.stringMatching(/^a distributed run \(--redis\) sends tool server settings through Redis: give this value as \{"env": "NAME"\}/) },
      ]);
    } finally {
      await swarm.close();
      await worker.close();
    }
  }, 120_000);
});
