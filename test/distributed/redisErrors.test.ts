/**
 * Redis connection errors are never silent: each is counted per connection and each new message
 * is told to `onError`, without the URL's password. The clients retry on their own, so the
 * handler must also keep an 'error' event from crashing the process.
 */
import { EventEmitter } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisErrors, redactRedis } from '../../src/distributed/redis.js';
import { RemoteCalls } from '../../src/distributed/remote.js';
import { startWorker } from '../../src/distributed/worker.js';
import { skipWithout } from '../helpers/programs.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

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

  /** An onError that records, and a promise for the first message of each of `sources`. */
  function listener(sources: string[]) {
    const told: [string, string][] = [];
    let allTold!: () => void;
    const all = new Promise<void>((resolve) => (allTold = resolve));
    const onError = (source: string, message: string) => {
      told.push([source, message]);
      if (sources.every((s) => told.some(([t]) => t === s))) allTold();
    };
    return { told, all, onError };
  }

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
