/**
 * Redis connection errors are never silent: each is counted per connection and each new message
 * is told to `onError`, without the URL's password. The clients retry on their own, so the
 * handler must also keep an 'error' event from crashing the process.
 */
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSwarm } from '../../src/index.js';
import { REDIS_WARNING_CODE } from '../../src/distributed/lazy.js';
import { RedisErrors, redactRedis } from '../../src/distributed/redis.js';
import { RemoteCalls } from '../../src/distributed/remote.js';
import { startWorker } from '../../src/distributed/worker.js';
import { skipWithout } from '../helpers/programs.js';
import { errorListener as listener, startRedis, type TestRedis } from '../helpers/redis.js';
import { start, until } from '../helpers/cli.js';

describe('RedisErrors', () => {
  it('counts every error, tells each new message once, and never the password', () => {
    const url = 'redis://app:s3cret%21pw@db.internal:6379/2';
    const told: [string, string][] = [];
    const errors = new RedisErrors(url, (source, message) => void told.push([source, message]));
    const queue = errors.watch('queue', new EventEmitter());
    // Without a listener an 'error' event throws: with one, it is only recorded.
    queue.emit('error', new Error('connect ECONNREFUSED 10.0.0.9:6379'));
    queue.emit('error', new Error('connect ECONNREFUSED 10.0.0.9:6379'));
    queue.emit('error', new Error(`WRONGPASS for ${url} (password s3cret!pw)`));
    errors.watch('worker', new EventEmitter()).emit('error', new Error('read ECONNRESET'));
    expect(told).toEqual([
      ['queue', 'connect ECONNREFUSED 10.0.0.9:6379'],
      ['queue', 'WRONGPASS for redis://***:***@db.internal:6379/2 (password ***)'],
      ['worker', 'read ECONNRESET'],
    ]);
    expect(errors.counts()).toEqual({
      queue: { count: 3, last: 'WRONGPASS for redis://***:***@db.internal:6379/2 (password ***)' },
      worker: { count: 1, last: 'read ECONNRESET' },
    });
    expect(JSON.stringify([told, errors.counts()])).not.toMatch(/s3cret/);
  });

  it('once its owner closes, what the clients fail with is neither told nor counted', () => {
    const told: string[] = [];
    const errors = new RedisErrors('redis://127.0.0.1:6379', (_source, message) => void told.push(message));
    const queue = errors.watch('queue', new EventEmitter());
    queue.emit('error', new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    errors.ownerClosing();
    queue.emit('error', new Error('Connection is closed.'));
    expect(told).toEqual(['connect ECONNREFUSED 127.0.0.1:6379']);
    expect(errors.counts()).toEqual({ queue: { count: 1, last: 'connect ECONNREFUSED 127.0.0.1:6379' } });
  });

  it('survives a logger that throws', () => {
    const errors = new RedisErrors('redis://127.0.0.1:6379', () => {
      throw new Error('log closed');
    });
    const emitter = errors.watch('queue', new EventEmitter());
    expect(() => emitter.emit('error', new Error('boom'))).not.toThrow();
    expect(errors.counts().queue?.count).toBe(1);
  });

  it('redacts a URL that has no password as it is, and leaves other text alone', () => {
    expect(redactRedis('at redis://127.0.0.1:6379/0', 'redis://127.0.0.1:6379/0')).toBe('at redis://127.0.0.1:6379/0');
  });
});

// A real Redis that goes away and comes back: the coordinator's queue and a worker keep running,
// and what their connections said reaches the caller. Skipped, saying so, without redis-server.
const skip = skipWithout('redis-server', 'the Redis error tests', 'apt-get install -y redis-server');

describe.skipIf(skip)('a Redis outage, told and counted', { timeout: 120_000 }, () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.close();
  });

  it('the coordinator`s queue and a worker report their connection errors instead of swallowing them', async () => {
    const coordinator = listener(['queue', 'queue events']);
    const workerSide = listener(['worker', 'cancel subscriber']);
    const remote = new RemoteCalls(redis.url, { onError: coordinator.onError });
    const worker = await startWorker({ redis: redis.url, onError: workerSide.onError });
    try {
      await redis.stop();
      await Promise.all([coordinator.all, workerSide.all]);
      for (const [source, message] of [...coordinator.told, ...workerSide.told]) expect(message, source).not.toBe('');
      expect(Object.keys(remote.connectionErrors()).sort()).toEqual(expect.arrayContaining(['queue', 'queue events']));
      expect(worker.connectionErrors().worker!.count).toBeGreaterThanOrEqual(1);
    } finally {
      await redis.start();
      await Promise.all([worker.close(), remote.close()]);
    }
  });
});

// A coordinator (createSwarm({ redis })) whose Redis needs a password and then goes away: what its
// queue's connections say reaches the swarm's onRedisError, or by default Node's process warnings
// (stderr), never the password. Before, it was counted and shown nowhere.
describe.skipIf(skip)('a coordinator`s Redis errors, shown', { timeout: 60_000 }, () => {
  const PASSWORD = 'c00rd-s3cret!';
  let redis: TestRedis;
  let url: string;
  beforeEach(async () => {
    redis = await startRedis();
    const admin = new Redis(redis.port, '127.0.0.1');
    await admin.config('SET', 'requirepass', PASSWORD);
    admin.disconnect();
    url = `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${redis.port}`;
  });
  afterEach(async () => {
    await redis?.close();
  });

  /** Until the coordinator's queue and its event stream are connected (Redis lists their clients). */
  async function connected(): Promise<void> {
    const admin = new Redis({ port: redis.port, host: '127.0.0.1', password: PASSWORD });
    try {
      while (((await admin.client('LIST')) as string).trim().split('\n').length < 3) await new Promise((r) => setTimeout(r, 25));
    } finally {
      admin.disconnect();
    }
  }

  it('through onRedisError', async () => {
    const seen = listener(['queue', 'queue events']);
    const swarm = createSwarm({ redis: url, store: false, onRedisError: seen.onError });
    try {
      await connected();
      await redis.stop();
      await seen.all;
      for (const [source, message] of seen.told) {
        expect(message, source).toMatch(/ECONN|closed/);
        expect(message, source).not.toContain(PASSWORD);
        expect(message, source).not.toContain(encodeURIComponent(PASSWORD));
      }
    } finally {
      await swarm.close();
    }
  });

  it('from the command line: said on stderr as the worker says its own, never the password', async () => {
    // No worker: the call waits in the queue, and the run keeps its connections open.
    const child = start(['run', 'examples/plans/hello.json', '--redis', url, '--store', 'memory', '--quiet']);
    try {
      await connected();
      await redis.stop();
      await until(() => /^swarmstate: Redis (queue|queue events) error \(retrying\): /m.test(child.out.stderr), 'the error line');
      expect(child.out.stderr).not.toContain('SwarmstateWarning');
      expect(child.out.stderr).not.toContain(PASSWORD);
      expect(child.out.stderr).not.toContain(encodeURIComponent(PASSWORD));
    } finally {
      child.child.kill('SIGTERM');
      await child.exit;
    }
  });

  it('by default as a process warning', async () => {
    const warned: Error[] = [];
    let told!: () => void;
    const first = new Promise<void>((resolve) => (told = resolve));
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code !== REDIS_WARNING_CODE) return;
      warned.push(warning);
      told();
    };
    process.on('warning', onWarning);
    const swarm = createSwarm({ redis: url, store: false });
    try {
      await connected();
      await redis.stop();
      await first;
      expect(warned[0]!.message).toMatch(/^coordinator: Redis (queue|queue events) error \(retrying\): /);
      expect(warned.map((w) => w.message).join('\n')).not.toContain(PASSWORD);
    } finally {
      process.off('warning', onWarning);
      await swarm.close();
    }
  });
});
