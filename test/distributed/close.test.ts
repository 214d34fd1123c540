/**
 * Closing the distributed side during a Redis outage (a real redis-server, killed): the
 * coordinator's queue closes without an unhandled rejection; a worker with nothing in flight
 * closes at once instead of waiting out its grace for a Redis that is gone, one with a call in
 * flight cuts it off after the grace; `swarmstate worker` stopped then exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fingerprint } from '../../src/keys.js';
import { parsePlan } from '../../src/plan/index.js';
import type { ModelJob } from '../../src/distributed/protocol.js';
import { RemoteCalls } from '../../src/distributed/remote.js';
import { startWorker, type RunningWorker } from '../../src/distributed/worker.js';
import { skipWithout } from '../helpers/programs.js';
import { errorListener as listener, startRedis, type TestRedis } from '../helpers/redis.js';

const skip = skipWithout('redis-server', 'the distributed close tests', 'apt-get install -y redis-server');

describe.skipIf(skip)('closing while Redis is gone', () => {
  let redis: TestRedis;
  beforeEach(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await redis?.close();
  });

  // Before the fix, BullMQ re-emitted the queue's failed start as an 'error' after close had
  // removed its listeners: an unhandled rejection, which fails this file's run.
  it('a coordinator`s queue closed right after its connection errors: no unhandled rejection', async () => {
    await redis.stop();
    const seen = listener(['queue', 'queue events']);
    const remote = new RemoteCalls(redis.url, { onError: seen.onError });
    await seen.all;
    await remote.close();
    expect(Object.keys(remote.connectionErrors()).sort()).toEqual(['queue', 'queue events']);
  });
});

// The worker's grace is for calls in flight: with none, a close during an outage has nothing to
// wait for. Before the fix it waited out the grace (then 10 s, fixed) and 2 s more. The tests'
// own timeouts are below both the grace they set and the old fixed one; setting up is in hooks.
describe.skipIf(skip)('a worker closed while Redis is gone, nothing in flight', () => {
  const GRACE_MS = 30_000;
  const BOUND_MS = 9_000;
  let redis: TestRedis;
  let worker: RunningWorker | undefined;
  beforeEach(async () => {
    redis = await startRedis();
    const seen = listener(['worker']);
    worker = await startWorker({ redis: redis.url, closeGraceMs: GRACE_MS, onError: seen.onError });
    await redis.stop();
    await seen.all;
  });
  afterEach(async () => {
    await redis?.close();
  });

  it('close resolves long before the grace', { timeout: BOUND_MS }, async () => {
    await worker!.close();
    expect(worker!.connectionErrors().worker!.count).toBeGreaterThanOrEqual(1);
  });
});

// A call in flight keeps its grace while Redis is gone, and no more: then it is cut off and the
// close ends. Before the fix the polite close waited for Redis (10 s, fixed), then 2 s more.
describe.skipIf(skip)('a worker closed while Redis is gone, a call in flight', () => {
  const GRACE_MS = 1000;
  const BOUND_MS = 9_000;
  const SECRET = 'sk-close-test-1';
  let redis: TestRedis;
  let provider: Server;
  let worker: RunningWorker | undefined;
  let remote: RemoteCalls;
  /** The held request's connection closing: the worker aborted the call. */
  let cutOff: Promise<void>;
  const coordinator = new AbortController();
  beforeEach(async () => {
    redis = await startRedis();
    // A provider that takes the request and never answers: the call stays in flight.
    let arrived!: () => void;
    const inFlight = new Promise<void>((done) => (arrived = done));
    provider = createServer((request) => {
      cutOff = new Promise((done) => request.once('close', done));
      arrived();
    });
    await new Promise<void>((done) => provider.listen(0, '127.0.0.1', done));
    const { port } = provider.address() as { port: number };
    const seen = listener(['worker']);
    const env = { CLOSE_TEST_KEY: SECRET };
    worker = await startWorker({ redis: redis.url, closeGraceMs: GRACE_MS, env, onError: seen.onError });
    remote = new RemoteCalls(redis.url);
    const plan = parsePlan(
      {
        providers: { held: { type: 'openai', baseURL: `http://127.0.0.1:${port}/v1`, keys: [{ env: 'CLOSE_TEST_KEY' }] } },
        models: { m: { provider: 'held', model: 'm' } },
        tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
      },
      { env },
    );
    const job: ModelJob = {
      kind: 'model',
      runId: 'close-test',
      config: { providers: plan.providers, tools: plan.tools },
      keyId: `held:${fingerprint(SECRET)}`,
      provider: 'held',
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      tools: [],
      maxTokens: 16,
      meta: { taskId: 't', attempt: 1, turn: 1 },
    };
    void remote.call(job, coordinator.signal).catch(() => {});
    await inFlight;
    await redis.stop();
    await seen.all;
  }, 60_000);
  afterEach(async () => {
    coordinator.abort();
    await remote?.close();
    provider?.closeAllConnections();
    await new Promise((done) => provider?.close(done));
    await redis?.close();
  });

  it('close cuts the call off after its grace and ends', { timeout: BOUND_MS }, async () => {
    await worker!.close();
    await cutOff;
  });
});

describe.skipIf(skip)('`swarmstate worker` stopped while Redis is gone', () => {
  const BIN = resolve('bin/swarmstate.js');
  let redis: TestRedis;
  let child: ChildProcess;
  let stderr = '';
  let exited: Promise<number | null>;
  beforeEach(async () => {
    redis = await startRedis();
    stderr = '';
    child = spawn(process.execPath, [BIN, 'worker', '--redis', redis.url], { stdio: ['ignore', 'ignore', 'pipe'] });
    exited = new Promise((done) => child.on('close', (code) => done(code)));
    const looks = new Set<() => void>();
    child.stderr!.on('data', (d) => {
      stderr += d;
      for (const look of looks) look();
    });
    const said = (text: string) =>
      new Promise<void>((done) => {
        const look = () => {
          if (!stderr.includes(text)) return;
          looks.delete(look);
          done();
        };
        looks.add(look);
        look();
      });
    await said('worker ready');
    const outage = said('worker: Redis worker error');
    await redis.stop();
    await outage;
  });
  afterEach(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await redis?.close();
  });

  // Before the fix it said "worker stopped" after 12 s and then never exited: its Redis clients
  // kept reconnecting. (BullMQ's own wait for a job can still hold it a few seconds: its watchdog.)
  it('exits on SIGTERM', { timeout: 60_000 }, async () => {
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toContain('worker stopped: 0 calls made');
  });
});
