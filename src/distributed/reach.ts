/**
 * Is Redis there? Asked once before a distributed run or a worker starts: the queue's own
 * connections retry for ever, which suits a Redis that restarts mid-run but hangs a command
 * whose Redis was never there, silently.
 */
import { Redis } from 'ioredis';
import { redisForDisplay, redisOptions } from './redis.js';

/** How long `reachRedis` waits by default before it gives up. */
export const REDIS_CONNECT_MS = 10_000;

/** Redis did not answer in time: nothing was sent, nothing was queued. */
export class RedisUnreachableError extends Error {
  readonly code = 'REDIS_UNREACHABLE';
  constructor(
    readonly url: string,
    readonly waitedMs: number,
    readonly reason: string | undefined,
  ) {
    super(
      `cannot reach Redis at ${url} after ${waitedMs / 1000} s${reason ? ` (${reason})` : ''}: ` +
        'start it or fix --redis; SWARMSTATE_REDIS_CONNECT_MS sets how long to wait',
    );
    this.name = 'RedisUnreachableError';
  }
}

/**
 * Waits until Redis at `url` answers, for at most `timeoutMs`. The queue's own connections
 * retry for ever (a Redis that restarts mid-run must not end the run), so a Redis that was
 * never there would hang a command silently: it is tried once here, before anything starts.
 * Resolves false when `signal` aborts first (Ctrl-C); the probe's connection is closed either way.
 *
 * @throws RedisUnreachableError when Redis has not answered within `timeoutMs`.
 */
export async function reachRedis(url: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<boolean> {
  const timeoutMs = opts.timeoutMs ?? REDIS_CONNECT_MS;
  const client = new Redis({ ...redisOptions(url), maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 250 });
  let reason: string | undefined;
  client.on('error', (error: NodeJS.ErrnoException) => {
    reason = error.code ?? error.message;
  });
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    return await new Promise<boolean>((resolve, reject) => {
      if (opts.signal?.aborted) return resolve(false);
      client.once('ready', () => resolve(true));
      timer = setTimeout(() => reject(new RedisUnreachableError(redisForDisplay(url), timeoutMs, reason)), timeoutMs);
      onAbort = () => resolve(false);
      opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  } finally {
    clearTimeout(timer);
    if (onAbort) opts.signal?.removeEventListener('abort', onAbort);
    client.disconnect();
  }
}
