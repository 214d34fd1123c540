/**
 * Redis connection settings for BullMQ: from a `redis://` URL, reconnecting for ever (a Redis
 * that is down for a while delays the run; it does not end it).
 */
import type { RedisOptions } from 'ioredis';
import { decodedOrAsIs, parseUrl } from '../tools/urls.js';

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


/**
 * `text` with the credentials of the Redis `url` taken out: the URL itself as
 * {@link redisForDisplay} prints it, and its password (raw or decoded) wherever else it appears.
 */
export function redactRedis(text: string, url: string): string {
  let out = text.split(url).join(redisForDisplay(url));
  const parsed = parseUrl(url);
  if (!parsed) return out;
  for (const secret of new Set([parsed.password, decodedOrAsIs(parsed.password)])) if (secret !== '') out = out.split(secret).join('***');
  return out;
}

/** The connection errors of one source (a queue, a worker, a subscriber): how many, and the last one. */
export interface RedisErrorCount {
  count: number;
  /** The last error's message, credentials taken out. */
  last: string;
}

/**
 * The connection errors of a process's Redis clients. The clients reconnect on their own (a
 * Redis that restarts mid-run must not end it), so an error is not fatal, but it is never
 * silent either: each is counted per source, and `onError` is told each new message (a Redis
 * that stays down fails the same way on every retry, every 2 s: told once, counted each time).
 * Messages never carry the URL's password.
 */
export class RedisErrors {
  private readonly bySource = new Map<string, RedisErrorCount>();
  private closing = false;

  constructor(
    private readonly url: string,
    private readonly onError?: (source: string, message: string) => void,
  ) {}

  /** Listens to `emitter`'s 'error' events as `source`'s; returns `emitter`. */
  watch<T extends { on(event: 'error', listener: (error: Error) => void): unknown }>(source: string, emitter: T): T {
    emitter.on('error', (error: Error) => this.record(source, error));
    return emitter;
  }

  record(source: string, error: unknown): void {
    if (this.closing) return;
    const raw = (error as { message?: unknown } | null)?.message;
    const message = redactRedis(typeof raw === 'string' && raw !== '' ? raw : String(error), this.url);
    const seen = this.bySource.get(source);
    if (seen === undefined) this.bySource.set(source, { count: 1, last: message });
    else {
      seen.count++;
      if (seen.last === message) return;
      seen.last = message;
    }
    try {
      this.onError?.(source, message);
    } catch {
      // A logger that throws must not turn a retried connection error into a crash.
    }
  }

  /**
   * The owner is ending its clients: what they fail with from now on ("Connection is closed", a
   * goodbye Redis cannot answer) is that ending, not an outage to tell about or retry.
   */
  ownerClosing(): void {
    this.closing = true;
  }

  /** The counts so far, by source. */
  counts(): Record<string, RedisErrorCount> {
    return Object.fromEntries([...this.bySource].map(([source, c]) => [source, { ...c }]));
  }
}
