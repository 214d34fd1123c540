/**
 * The coordinator's side of a distributed run: model and tool calls as BullMQ jobs.
 *
 * `call(job)` adds the job under its content-derived id (src/distributed/protocol.ts) and waits
 * for its outcome. BullMQ keeps one job per id, so a call whose job exists already (a resumed
 * coordinator repeating an interrupted attempt) waits for that job, or takes its result if it is
 * done, instead of running it again. Waiting listens to the queue's events and also looks at the
 * job every few seconds, so a missed event (Redis restarting) costs a few seconds, not the run; a
 * job Redis lost (a restart without persistence) is added again.
 */
import { Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { ProviderError } from '../providers/errors.js';
import { connectionsIn, within, type ClosableConnection } from './connection.js';
import { CALL_QUEUE, CANCEL_CHANNEL, callKeyOf, type CallJob, type CallOutcome } from './protocol.js';
import { RedisErrors, redisOptions, type RedisErrorCount } from './redis.js';

/** How long completed jobs stay readable (a resumed coordinator takes their results). */
const KEEP_DONE_S = 7 * 24 * 3600;
const CHECK_EVERY_MS = 2000;

export class RemoteCalls {
  private readonly queue: Queue;
  private readonly events: QueueEvents;
  /** Identical calls made so far by this coordinator, per content: the nth gets its own job. */
  private readonly seen = new Map<string, number>();
  private closed = false;
  /** For cancels (opened on the first one). */
  private publisher: Redis | undefined;
  /** Cancels on their way: a closing coordinator lets them go out first (for a second at most). */
  private readonly cancelling = new Set<Promise<void>>();

  /** Connection errors, counted per connection (retried by the client: they must not crash the process). */
  private readonly errors: RedisErrors;
  /** The queue's and the event stream's connections, ended by close whatever Redis does. */
  private readonly connections: ClosableConnection[] = [];

  /** `onError` is told each new connection error (its message without the URL's password). */
  constructor(
    readonly url: string,
    options: { onError?: (source: string, message: string) => void } = {},
  ) {
    this.errors = new RedisErrors(url, options.onError);
    const Connection = connectionsIn(this.connections);
    this.queue = this.errors.watch('queue', new Queue(CALL_QUEUE, { connection: redisOptions(url) }, Connection));
    this.events = this.errors.watch('queue events', new QueueEvents(CALL_QUEUE, { connection: redisOptions(url) }, Connection));
    // Every call waiting on its job listens on the queue for a moment: many at once is normal.
    this.queue.setMaxListeners(0);
    this.events.setMaxListeners(0);
  }

  /** Sends a call to the workers and gives back its outcome (rejects on abort). */
  async call(job: CallJob, signal: AbortSignal): Promise<CallOutcome> {
    const key = callKeyOf(job);
    const n = this.seen.get(key) ?? 0;
    this.seen.set(key, n + 1);
    const id = `${key}.${n}`;
    const startedAt = Date.now();
    const abort = () => {
      // The worker making the call stops too (the call is not paid for to its end): a job not
      // taken yet is withdrawn, one a worker is running is stopped there. Once closed, nothing
      // more is sent: a publisher made now would outlive the close, reconnecting to a Redis gone.
      if (this.closed) return signal.reason ?? new Error('aborted');
      this.publisher ??= this.errors.watch('cancel publisher', new Redis(redisOptions(this.url)));
      const sent = Promise.allSettled([this.queue.remove(id), this.publisher.publish(CANCEL_CHANNEL, id)]).then(() => {});
      this.cancelling.add(sent);
      void sent.finally(() => this.cancelling.delete(sent));
      return signal.reason ?? new Error('aborted');
    };
    // Every Redis round trip gives way to an abort: a Redis that is down must not hold a call
    // past its deadline, or a cancelled run open.
    const step = <T>(p: Promise<T>) => untilAborted(p, signal, abort);
    await step(this.add(id, job));
    for (;;) {
      if (signal.aborted) throw abort();
      if (this.closed) throw new Error('the coordinator is closing');
      const found = await step(Job.fromId<CallJob, CallOutcome>(this.queue, id).catch(() => undefined));
      if (found === undefined) {
        // Redis lost the job (it restarted without persistence): send it again.
        await step(this.add(id, job));
        continue;
      }
      const state = await step(found.getState().catch(() => 'unknown'));
      const earlier = (found.finishedOn ?? Date.now()) < startedAt;
      if (state === 'completed') {
        // Read again: the copy above may predate the completion (its return value not yet there).
        const done = found.returnvalue ?? (await step(Job.fromId<CallJob, CallOutcome>(this.queue, id).catch(() => undefined)))?.returnvalue;
        if (!done) continue;
        // An answer from an earlier life of the run is taken; an error from then (a cancel, a
        // 401 since fixed) is not: the call is made again.
        if (done.ok || !earlier) return done;
        await step(this.redo(found, id, job));
        continue;
      }
      if (state === 'failed') {
        if (earlier) {
          await step(this.redo(found, id, job));
          continue;
        }
        throw new ProviderError('internal', `call job ${id} failed on a worker: ${found.failedReason ?? 'unknown reason'}`, { retryable: true });
      }
      // It ended while we waited (after this call began): its outcome is this call's.
      const ended = await this.waitFor(found, signal);
      if (ended) return ended;
    }
  }

  /** The connection errors so far, by connection. */
  connectionErrors(): Record<string, RedisErrorCount> {
    return this.errors.counts();
  }

  /** Forgets a run's call counts (its calls are over). */
  forgetRun(runId: string): void {
    const prefix = `${runId}.`;
    for (const id of this.seen.keys()) if (id.startsWith(prefix)) this.seen.delete(id);
  }

  async close(): Promise<void> {
    this.closed = true;
    await within(Promise.allSettled([...this.cancelling]), 1000);
    this.errors.ownerClosing();
    this.publisher?.disconnect();
    const answering = this.connections.every((c) => c.answering());
    const polite = Promise.allSettled([this.events.close(), this.queue.close()]);
    // A Redis that answers is told goodbye (QUIT); one that is gone would be waited for for ever.
    if (answering) await within(polite, 2000);
    // What still waits on Redis (a QUIT, a start never finished) is ended: nothing of this queue
    // reconnects after close, or holds the process open.
    for (const connection of this.connections) connection.cut();
  }

  private async add(id: string, job: CallJob): Promise<void> {
    await this.queue.add(job.kind, job, {
      jobId: id,
      removeOnComplete: { age: KEEP_DONE_S },
      removeOnFail: { age: KEEP_DONE_S },
    });
  }

  /** A job that ended badly in an earlier life: removed, and added again to run now. */
  private async redo(job: Job<CallJob, CallOutcome>, id: string, data: CallJob): Promise<void> {
    await job.remove().catch(() => {});
    await this.add(id, data);
  }

  /**
   * Until the job completes (its outcome), fails, the call is aborted, or it is time to look
   * again (undefined: the loop looks at the job once more).
   */
  private async waitFor(job: Job<CallJob, CallOutcome>, signal: AbortSignal): Promise<CallOutcome | undefined> {
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<undefined>((resolve) => {
      onAbort = () => resolve(undefined);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const outcome = await Promise.race([job.waitUntilFinished(this.events, CHECK_EVERY_MS).catch(() => undefined), aborted]);
      return outcome ?? undefined;
    } finally {
      signal.removeEventListener('abort', onAbort!);
    }
  }
}

/** `promise`, unless `signal` aborts first: then what `onAbort` returns is thrown. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, onAbort: () => unknown): Promise<T> {
  if (signal.aborted) return Promise.reject(onAbort());
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(onAbort());
    signal.addEventListener('abort', stop, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', stop);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', stop);
        reject(error);
      },
    );
  });
}
