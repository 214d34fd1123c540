/**
 * Closing the distributed side during a Redis outage (a real redis-server, killed): the
 * coordinator's queue closes without an unhandled rejection, and a worker with nothing in flight
 * closes at once instead of waiting out its grace for a Redis that is gone.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RemoteCalls } from '../../src/distributed/remote.js';
import { skipWithout } from '../helpers/programs.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const skip = skipWithout('redis-server', 'the distributed close tests', 'apt-get install -y redis-server');

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
