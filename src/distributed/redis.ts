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
    // Not echoed: a URL that does not parse may still hold a password.
    throw new Error('--redis must be a URL like redis://127.0.0.1:6379 (the one given does not parse)');
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

/**
 * A Redis URL fit to print: its password (and user name) replaced, so logs and hints never
 * carry the credentials; a URL that does not parse is not echoed at all.
 *
 * @example
 * redisForDisplay('redis://app:s3cret@db:6379/2') // 'redis://***:***@db:6379/2'
 */
export function redisForDisplay(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '(the --redis URL)';
  }
  if (parsed.username) parsed.username = '***';
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

