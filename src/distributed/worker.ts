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
import type { Provider } from '../providers/types.js';
import type { Plan } from '../plan/index.js';
import { RunTools } from '../tools/registry.js';
import { Redis } from 'ioredis';
import { CALL_QUEUE, CANCEL_CHANNEL, type CallJob, type CallOutcome, type RunConfig } from './protocol.js';
import { redisOptions } from './redis.js';

export interface WorkerOptions {
  redis: string;
  /** Calls at once. Default 8. */
  concurrency?: number;
  /** How long a job's lock lasts without renewal: a dead worker's jobs move on after this. Default 30000. */
  lockMs?: number;
  env?: Record<string, string | undefined>;
  /** Told each job's kind and id as it ends (for logs). */
  onJob?: (job: { id: string; kind: CallJob['kind']; ok: boolean }) => void;
}

/** What a worker keeps per run: its keys, adapters and tool connections. */
interface RunSide {
  keyring: Keyring;
  adapters: Map<string, Provider>;
  tools: Promise<RunTools> | undefined;
  lastUsed: number;
}

export async function startWorker(options: WorkerOptions): Promise<{ close(): Promise<void> }> {
  const env = options.env ?? process.env;
  const registry = new ProviderRegistry({ now: () => Date.now(), seed: 0 });
  const runs = new Map<string, RunSide>();

  const sideOf = (runId: string, config: RunConfig): RunSide => {
    let side = runs.get(runId);
    if (!side) {
      const keyring = new Keyring();
      const secrets = new Map<string, string[]>();
      for (const [name, spec] of Object.entries(config.providers)) {
        const ids = spec.keys.length > 0 ? keyring.addProvider(name, spec.keys, env) : [keyring.addAnonymous(name)];
        secrets.set(name, ids.map((id) => keyring.get(id).secret).filter((s) => s !== ''));
      }
      const adapters = registry.forPlan({ providers: config.providers } as Plan, (name) => secrets.get(name) ?? []);
      side = { keyring, adapters, tools: undefined, lastUsed: Date.now() };
      runs.set(runId, side);
    }
    side.lastUsed = Date.now();
    return side;
  };

  /** The calls running here, by job id: a cancel from the coordinator aborts one. */
  const running = new Map<string, AbortController>();
  const cancels = new Redis(redisOptions(options.redis));
  cancels.on('error', () => {});
  cancels.on('message', (_channel: string, id: string) => running.get(id)?.abort(new Error('the coordinator cancelled the call')));
  await cancels.subscribe(CANCEL_CHANNEL);

  const run = async (job: Job<CallJob, CallOutcome>): Promise<CallOutcome> => {
    const controller = new AbortController();
    running.set(job.id ?? '', controller);
    try {
      return await runCall(job, controller);
    } finally {
      running.delete(job.id ?? '');
    }
  };

  const runCall = async (job: Job<CallJob, CallOutcome>, controller: AbortController): Promise<CallOutcome> => {
    const data = job.data;
    let side: RunSide;
    try {
      side = sideOf(data.runId, data.config);
    } catch (error) {
      // This worker lacks the key, not the key itself: a retry may land on a worker that has it
      // (an `auth` error would revoke the key for every worker).
      return { ok: false, error: { code: 'internal', message: `worker: ${(error as Error).message}`, retryable: true } };
    }
    try {
      if (data.kind === 'model') {
        const adapter = side.adapters.get(data.provider);
        if (!adapter) return { ok: false, error: { code: 'internal', message: `worker: no adapter for provider "${data.provider}"`, retryable: false } };
        let key;
        try {
          key = side.keyring.get(data.keyId);
        } catch {
          return { ok: false, error: { code: 'internal', message: `worker: key ${data.keyId} is not in this worker's environment`, retryable: true } };
        }
        const model = await adapter.call({
          provider: data.provider,
          model: data.model,
          messages: data.messages,
          tools: data.tools,
          maxTokens: data.maxTokens,
          key,
          signal: controller.signal,
          meta: data.meta,
          ...(data.system !== undefined ? { system: data.system } : {}),
        });
        return { ok: true, model };
      }
      side.tools ??= RunTools.open({ tools: data.config.tools } as Plan, [], env);
      const tools = await side.tools;
      if (data.kind === 'tool') return { ok: true, text: await tools.execute(data.name, data.args, controller.signal, data.idempotencyKey) };
      return { ok: true, results: await tools.executeBatch(data.name, data.calls, controller.signal) };
    } catch (error) {
      const e = asProviderError(error, data.kind === 'model' ? { provider: data.provider, model: data.model, keyId: data.keyId } : {});
      // A secret a server echoed back never leaves the worker.
      return { ok: false, error: { ...e.toJSON(), message: side.keyring.redact(e.message) } };
    }
  };

  const worker = new Worker<CallJob, CallOutcome>(CALL_QUEUE, run, {
    connection: redisOptions(options.redis),
    concurrency: options.concurrency ?? 8,
    lockDuration: options.lockMs ?? 30_000,
    stalledInterval: Math.max(1000, Math.floor((options.lockMs ?? 30_000) / 2)),
    // A job whose workers keep dying is still somebody's call: try it many times before giving up.
    maxStalledCount: 100,
  });
  worker.on('error', () => {});
  worker.on('completed', (job, outcome) => options.onJob?.({ id: job.id ?? '', kind: job.data.kind, ok: outcome.ok }));
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
  await worker.waitUntilReady();

  return {
    async close() {
      clearInterval(sweep);
      await worker.close();
      cancels.disconnect();
      await Promise.allSettled([...runs.values()].map((side) => side.tools?.then((t) => t.close())));
      await registry.close();
    },
  };
}
