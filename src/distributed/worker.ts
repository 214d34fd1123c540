/**
 * `swarmstate worker`: runs the calls of distributed runs. Each job is one model call (sent with
 * the key the coordinator leased, whose secret this worker reads from its own environment) or
 * one tool execution (on the run's MCP servers, connected by this worker). Workers hold no run
 * state: they can start and stop at any time. A worker that dies mid-job leaves the job stalled;
 * BullMQ gives it to another worker once its lock expires.
 */
import { Worker, type Job } from 'bullmq';
import { Keyring } from '../keys.js';
import { asProviderError } from '../providers/errors.js';
import { ProviderRegistry } from '../providers/registry.js';
import { preloadHttp } from '../providers/http.js';
import type { Provider } from '../providers/types.js';
import type { Plan } from '../plan/index.js';
import { RunTools } from '../tools/registry.js';
import { Redis } from 'ioredis';
import { connectionsIn, endClient, within, type ClosableConnection } from './connection.js';
import { CALL_QUEUE, CANCEL_CHANNEL, type CallJob, type CallOutcome, type RunConfig } from './protocol.js';
import { RedisErrors, redisOptions, type RedisErrorCount } from './redis.js';

export interface WorkerOptions {
  redis: string;
  /** Calls at once. Default 8. */
  concurrency?: number;
  /** How long a job's lock lasts without renewal: a dead worker's jobs move on after this. Default 30000. */
  lockMs?: number;
  env?: Record<string, string | undefined>;
  /** Told each job's kind and id as it ends (for logs). */
  onJob?: (job: { id: string; kind: CallJob['kind']; ok: boolean }) => void;
  /**
   * Told each new Redis connection error (`source`: 'worker' or 'cancel subscriber'; the message
   * without the URL's password). The connections retry on their own: the worker keeps running.
   */
  onError?: (source: string, message: string) => void;
  /** How long `close()` lets calls in flight finish before it cuts them off. Default 10000. */
  closeGraceMs?: number;
}

/** A running worker. */
export interface RunningWorker {
  close(): Promise<void>;
  /** Its Redis connection errors so far, by connection. */
  connectionErrors(): Record<string, RedisErrorCount>;
}

/** What a worker keeps per run: its keys and adapters (per provider, made when first needed), its tool connections. */
interface RunSide {
  keyring: Keyring;
  adapters: Map<string, Provider>;
  tools: Promise<RunTools> | undefined;
  lastUsed: number;
}

export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const env = options.env ?? process.env;
  // Loaded before the first job, not while its deadline runs.
  await preloadHttp();
  const registry = new ProviderRegistry({ now: () => Date.now(), seed: 0 });
  const runs = new Map<string, RunSide>();

  const sideOf = (runId: string): RunSide => {
    let side = runs.get(runId);
    if (!side) {
      side = { keyring: new Keyring(), adapters: new Map(), tools: undefined, lastUsed: Date.now() };
      runs.set(runId, side);
    }
    side.lastUsed = Date.now();
    return side;
  };

  /** A provider's adapter and keys on this worker (a variable this worker lacks fails only that provider's calls). */
  const adapterOf = (side: RunSide, config: RunConfig, name: string): Provider => {
    let adapter = side.adapters.get(name);
    if (adapter) return adapter;
    const spec = config.providers[name];
    if (!spec) throw new Error(`provider "${name}" is not in the run's settings`);
    const ids = spec.keys.length > 0 ? side.keyring.addProvider(name, spec.keys, env) : [side.keyring.addAnonymous(name)];
    adapter = registry.get(name, spec, ids.map((id) => side.keyring.get(id).secret).filter((x) => x !== ''));
    side.adapters.set(name, adapter);
    return adapter;
  };

  /** The calls running here, by job id: a cancel from the coordinator aborts one. */
  const running = new Map<string, AbortController>();
  /** Told when the last call running here ends (a close waits for that). */
  let onIdle: (() => void) | undefined;
  const idle = () => (running.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (onIdle = resolve)));
  const errors = new RedisErrors(options.redis, options.onError);
  const cancels = errors.watch('cancel subscriber', new Redis(redisOptions(options.redis)));
  cancels.on('message', (_channel: string, id: string) => running.get(id)?.abort(new Error('the coordinator cancelled the call')));
  await cancels.subscribe(CANCEL_CHANNEL);

  const run = async (job: Job<CallJob, CallOutcome>): Promise<CallOutcome> => {
    const controller = new AbortController();
    running.set(job.id ?? '', controller);
    try {
      return await runCall(job, controller);
    } finally {
      running.delete(job.id ?? '');
      if (running.size === 0) onIdle?.();
    }
  };

  const runCall = async (job: Job<CallJob, CallOutcome>, controller: AbortController): Promise<CallOutcome> => {
    const data = job.data;
    const side = sideOf(data.runId);
    if (data.kind === 'model') {
      let adapter: Provider;
      let key;
      try {
        adapter = adapterOf(side, data.config, data.provider);
        key = side.keyring.get(data.keyId);
      } catch (error) {
        // This worker lacks the key, not the key itself: a retry may land on a worker that has
        // it (an `auth` error would revoke the key for every worker).
        return { ok: false, error: { code: 'internal', message: `worker: ${(error as Error).message.replace(/^unknown key id .*/, `key ${data.keyId} is not in this worker's environment`)}`, retryable: true } };
      }
      try {
        const { kind: _kind, runId: _runId, config: _config, keyId: _keyId, ...request } = data;
        const started = performance.now();
        const model = await adapter.call({ ...request, key, signal: controller.signal });
        return { ok: true, model, callMs: Math.round(performance.now() - started) };
      } catch (error) {
        // Cancelled by the coordinator: the job fails (its result is nobody's to take later).
        if (controller.signal.aborted) throw controller.signal.reason;
        const e = asProviderError(error, { provider: data.provider, model: data.model, keyId: data.keyId });
        // A secret a server echoed back never leaves the worker.
        return { ok: false, error: { ...e.toJSON(), message: side.keyring.redact(e.message) } };
      }
    }
    try {
      // A failed connection is tried again by the next tool call, not kept.
      side.tools ??= RunTools.open({ tools: data.config.tools } as Plan, [], env).catch((error: unknown) => {
        side.tools = undefined;
        throw error;
      });
      const tools = await side.tools;
      if (data.kind === 'tool') return { ok: true, text: await tools.execute(data.name, data.args, controller.signal, data.idempotencyKey) };
      return { ok: true, results: await tools.executeBatch(data.name, data.calls, controller.signal) };
    } catch (error) {
      if (controller.signal.aborted) throw controller.signal.reason;
      // A tool's error goes back as its own words, as in a run in one process.
      return { ok: false, error: { code: 'tool_error', message: (error as Error).message ?? String(error), retryable: false } };
    }
  };

  const connections: ClosableConnection[] = [];
  const worker = new Worker<CallJob, CallOutcome>(CALL_QUEUE, run, {
    connection: redisOptions(options.redis),
    concurrency: options.concurrency ?? 8,
    lockDuration: options.lockMs ?? 30_000,
    stalledInterval: Math.max(1000, Math.floor((options.lockMs ?? 30_000) / 2)),
    // A job whose workers keep dying is still somebody's call: try it many times before giving up.
    maxStalledCount: 100,
  }, connectionsIn(connections));
  errors.watch('worker', worker);
  worker.on('completed', (job, outcome) => options.onJob?.({ id: job.id ?? '', kind: job.data.kind, ok: outcome.ok }));
  // A call cut off by a cancel fails its job: it still counts as one this worker made.
  worker.on('failed', (job) => job && options.onJob?.({ id: job.id ?? '', kind: job.data.kind, ok: false }));
  // Runs not used for a while: their tool connections are closed.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [runId, side] of runs) {
      if (now - side.lastUsed < 10 * 60_000) continue;
      runs.delete(runId);
      void side.tools?.then((t) => t.close()).catch(() => {});
    }
  }, 60_000);
  sweep.unref();
  // The connection that waits for jobs (BullMQ's own class, not ours): ended by close.
  const blocking = await worker.waitUntilReady();
  const graceMs = options.closeGraceMs ?? 10_000;
  const cutOff = () => {
    for (const controller of running.values()) controller.abort(new Error('the worker is stopping'));
  };

  return {
    connectionErrors: () => errors.counts(),
    async close() {
      clearInterval(sweep);
      if (blocking.status === 'ready' && connections.every((c) => c.answering())) {
        // Redis is there: BullMQ's close stops taking jobs, lets the calls in flight end and
        // their outcomes be written, and says goodbye. Past the grace the calls are cut off and
        // their jobs, no longer locked by anyone, go to another worker.
        if (!(await within(worker.close(), graceMs))) {
          cutOff();
          errors.ownerClosing();
          await within(worker.close(true), 2000);
        }
      } else {
        // Redis is gone: BullMQ's polite close would wait for it (a goodbye, outcomes it cannot
        // write) for ever, so only the calls in flight are waited for, and with none that is at
        // once. A job whose outcome did not reach Redis is run again by another worker.
        void worker.pause(true).catch(() => {});
        if (!(await within(idle(), graceMs))) cutOff();
        // What the clients fail with from here on is this close ("Connection is closed").
        errors.ownerClosing();
        await within(worker.close(true), 2000);
      }
      errors.ownerClosing();
      // Nothing of this worker reconnects after close (a client retrying holds the process open).
      for (const connection of connections) connection.cut();
      endClient(blocking);
      cancels.disconnect();
      await Promise.allSettled([...runs.values()].map((side) => side.tools?.then((t) => t.close())));
      await registry.close();
    },
  };
}
