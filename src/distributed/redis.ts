/**
 * Redis connection settings for BullMQ: from a `redis://` URL, reconnecting for ever (a Redis
 * that is down for a while delays the run; it does not end it).
 */
import type { RedisOptions } from 'ioredis';

export function redisOptions(url: string): RedisOptions {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`--redis must be a URL like redis://127.0.0.1:6379, got "${url}"`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new Error(`--redis must be a redis:// or rediss:// URL, got "${parsed.protocol}//..."`);
  const options: RedisOptions = {
    host: parsed.hostname || '127.0.0.1',
    port: parsed.port ? Number(parsed.port) : 6379,
    // BullMQ's blocking commands need these: commands wait for a reconnect instead of failing.
    maxRetriesPerRequest: null,
    enableOfflineQueue: true,
    retryStrategy: (times) => Math.min(200 + times * 100, 2000),
  };
  if (parsed.password) options.password = decodeURIComponent(parsed.password);
  if (parsed.username) options.username = decodeURIComponent(parsed.username);
  const db = parsed.pathname.replace(/^\//, '');
  if (db) options.db = Number(db);
  if (parsed.protocol === 'rediss:') options.tls = {};
  return options;
}
