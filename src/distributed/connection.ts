/**
 * BullMQ's Redis connection, made safe to close while Redis is gone. The coordinator's queue and
 * event stream, and a worker's main connection, are built on it (BullMQ takes the connection's
 * class as a constructor argument; a worker's blocking connection is always BullMQ's own).
 */
import { RedisConnection } from 'bullmq';

/**
 * Two things BullMQ's own connection gets wrong when it is closed during an outage:
 *
 * - A connection closed before its start finished fails that start, and BullMQ re-emits the
 *   failure as an 'error' on the connection from inside a promise's handler, after close() has
 *   removed every listener. With none, EventEmitter throws, and the throw becomes an unhandled
 *   rejection (fatal under `--unhandled-rejections=throw`, Node's default). What it carries is
 *   the client's last error, which the client already emitted while the owner listened, or the
 *   close itself: an 'error' nobody listens to any more is dropped here. While the owner is open
 *   it always listens (BullMQ forwards the connection's errors to it), so nothing else is.
 * - A polite close waits for Redis to answer (a QUIT, or the start it never finished) and, until
 *   it does, the client keeps reconnecting, which holds the process open. `cut()` ends it.
 */
export class ClosableConnection extends RedisConnection {
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'error' && this.listenerCount('error') === 0) return false;
    return super.emit(event, ...args);
  }

  /** Whether the client is connected to a Redis that answers now. */
  answering(): boolean {
    return this._client.status === 'ready';
  }

  /** Ends the client now, whatever it waits for: it no longer reconnects. */
  cut(): void {
    endClient(this._client);
  }
}

/**
 * Ends a Redis client that has not ended yet. One that has (a polite close's QUIT went through)
 * is left alone: ioredis would arm a 2 s timer to destroy its socket, which never closes again,
 * and that timer would hold the process open for nothing.
 */
export function endClient(client: { status: string; disconnect(): void }): void {
  if (client.status !== 'end') client.disconnect();
}

/** A ClosableConnection class whose instances (BullMQ makes them) are kept in `into`, for their owner to cut. */
export function connectionsIn(into: ClosableConnection[]): typeof RedisConnection {
  return class extends ClosableConnection {
    constructor(...args: ConstructorParameters<typeof RedisConnection>) {
      super(...args);
      into.push(this);
    }
  };
}

/** Whether `promise` settles within `ms` (it is not cancelled when it does not). */
export function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = promise.then(
    () => true,
    () => true,
  );
  return Promise.race([settled, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
}
