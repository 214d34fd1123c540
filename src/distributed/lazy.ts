/**
 * The coordinator's queue (remote.ts), loaded only for a distributed run: bullmq and ioredis
 * are optional packages, and loading them costs a third of a second that no other run should pay.
 * The load starts when the swarm is created; every call waits for it, and fails with what to
 * install if they are missing.
 */
import { ProviderError } from '../providers/errors.js';
import { assertInstalled, importOptional } from '../util/optional.js';
import type { CallJob, CallOutcome } from './protocol.js';
import type { RedisErrorCount } from './redis.js';

/** What a run uses of RemoteCalls. */
export interface Remote {
  call(job: CallJob, signal: AbortSignal): Promise<CallOutcome>;
  forgetRun(runId: string): void;
  /** The queue's connection errors so far, by connection (none before it is loaded). */
  connectionErrors(): Record<string, RedisErrorCount>;
  close(): Promise<void>;
}

export const DISTRIBUTED_PACKAGES = ['bullmq', 'ioredis'] as const;

/** Node's warning `code` of a coordinator's Redis connection error (`process.on('warning')`). */
export const REDIS_WARNING_CODE = 'SWARMSTATE_REDIS';

/**
 * Where a coordinator's Redis connection errors go when its creator gave no handler: Node's
 * process warnings (stderr unless the application listens, or runs with --no-warnings). The
 * connections retry on their own, so the run goes on; the message has no password.
 */
export function warnRedisError(source: string, message: string): void {
  process.emitWarning(`coordinator: Redis ${source} error (retrying): ${message}`, { type: 'SwarmstateWarning', code: REDIS_WARNING_CODE });
}

/**
 * `onError` is told each new connection error of the queue (a source such as 'queue' or 'queue
 * events', and the message without the URL's password); by default a process warning.
 *
 * @throws MissingPackageError (code OPTIONAL_PACKAGE_MISSING) when bullmq or ioredis is not installed.
 */
export function lazyRemote(url: string, onError: (source: string, message: string) => void = warnRedisError): Remote {
  assertInstalled(DISTRIBUTED_PACKAGES, 'a distributed run (redis)');
  let loaded: Remote | undefined;
  const loading = importOptional(() => import('./remote.js'), DISTRIBUTED_PACKAGES, 'a distributed run (--redis)').then((m) => {
    loaded = new m.RemoteCalls(url, { onError });
    return loaded;
  });
  // Reported by the calls that wait for it, not as an unhandled rejection.
  loading.catch(() => {});
  return {
    call: async (job, signal) => (await loading).call(job, signal),
    // No call has been made before the queue is there: nothing to forget.
    forgetRun: (runId) => loaded?.forgetRun(runId),
    connectionErrors: () => loaded?.connectionErrors() ?? {},
    close: async () => {
      const remote = await loading.catch(() => undefined);
      await remote?.close();
    },
  };
}

/** Turns a job's outcome back into what the call's actor resolves with, or its error. */
export function unwrap(outcome: CallOutcome): CallOutcome & { ok: true } {
  if (outcome.ok) return outcome;
  const { code, message, ...facts } = outcome.error;
  throw new ProviderError(code, message, facts as ConstructorParameters<typeof ProviderError>[2]);
}
