/**
 * The commands around runs: `swarmstate worker`, `swarmstate runs`, and the Redis check a
 * distributed run and a worker make before they start.
 */
import { createSwarm } from '../swarm.js';
import { redisForDisplay } from '../distributed/redis.js';
import { DISTRIBUTED_PACKAGES } from '../distributed/lazy.js';
import { importOptional } from '../util/optional.js';
import { EXIT } from './exit.js';
import { missingJournal, storeSpecOf } from './paths.js';
import { errorText, jsonForTerminal, visible } from './terminal.js';

type IO = { out: NodeJS.WritableStream; err: NodeJS.WritableStream };

/**
 * Says which Redis it connects to (credentials hidden) and waits until it answers, at most
 * $SWARMSTATE_REDIS_CONNECT_MS (default 10 s). SIGINT or SIGTERM during the wait ends it.
 * `ready`, or how the command ends: `interrupted`, or `failed` (the reason printed).
 */
export async function connectRedis(url: string, io: IO, env: Record<string, string | undefined> = process.env, feature = 'a distributed run (--redis)'): Promise<'ready' | 'interrupted' | 'failed'> {
  const given = env.SWARMSTATE_REDIS_CONNECT_MS;
  const timeoutMs = given === undefined || given === '' ? undefined : Number(given);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) {
    io.err.write(`swarmstate: SWARMSTATE_REDIS_CONNECT_MS must be a positive integer (milliseconds), got "${visible(given!)}"\n`);
    return 'failed';
  }
  const controller = new AbortController();
  const stop = () => controller.abort();
  // Listening before the line goes out: whoever reacts to it with a signal finds it handled.
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    // Before the first line: without bullmq and ioredis there is nothing to connect with.
    const { reachRedis } = await importOptional(() => import('../distributed/reach.js'), DISTRIBUTED_PACKAGES, feature);
    io.err.write(`connecting to ${visible(redisForDisplay(url))} …\n`);
    if (await reachRedis(url, { signal: controller.signal, ...(timeoutMs !== undefined ? { timeoutMs } : {}) })) return 'ready';
    io.err.write('swarmstate: interrupted while connecting to Redis; nothing was started\n');
    return 'interrupted';
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return 'failed';
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/** `swarmstate worker`: runs calls of distributed runs until SIGINT or SIGTERM (its flags checked by commands/worker.ts). */
export async function workerCommand(redis: string, n: number, lock: number, io: { out: NodeJS.WritableStream; err: NodeJS.WritableStream }): Promise<number> {
  const reached = await connectRedis(redis, io, process.env, 'the worker');
  // Stopped before it took any call: as a stop by signal later would, that is a clean exit.
  if (reached === 'interrupted') return EXIT.ok;
  if (reached === 'failed') return EXIT.invalid;
  let worker;
  let calls = 0;
  try {
    const { startWorker } = await importOptional(() => import('../distributed/worker.js'), DISTRIBUTED_PACKAGES, 'the worker');
    worker = await startWorker({
      redis,
      concurrency: n,
      lockMs: lock,
      onJob: () => void (calls += 1),
      // Retried by the connection itself: said once per new message, the worker keeps running.
      onError: (source, message) => void io.err.write(`worker: Redis ${source} error (retrying): ${visible(message)}\n`),
    });
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.invalid;
  }
  io.err.write(`worker ready: ${n} calls at once, queue on ${visible(new URL(redis).host)}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await worker.close();
  io.err.write(`worker stopped: ${calls} calls made\n`);
  return EXIT.ok;
}

/** `swarmstate runs`: the journaled runs, newest first. */
export async function listRuns(store: string | undefined, json: boolean, io: { out: NodeJS.WritableStream; err: NodeJS.WritableStream }): Promise<number> {
  // A listing creates nothing: a journal named on purpose must exist; the default may not yet.
  const spec = storeSpecOf(store);
  const missing = missingJournal(spec);
  if (missing !== undefined && spec !== undefined) {
    io.err.write(`swarmstate: no run journal at ${visible(missing)} (check --store or $SWARMSTATE_STORE)\n`);
    return EXIT.invalid;
  }
  if (missing !== undefined) {
    io.out.write(json ? '[]\n' : 'no runs yet\n');
    return EXIT.ok;
  }
  // The swarm's own list (its store, as `run` would pick it; runs no live process holds say `interrupted`).
  const swarm = createSwarm(store !== undefined ? { store } : {});
  let runs;
  try {
    runs = swarm.runs(200);
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.journal;
  } finally {
    await swarm.close();
  }
  if (json) {
    io.out.write(jsonForTerminal(runs.map(({ options: _options, ...r }) => r)) + '\n');
    return EXIT.ok;
  }
  if (runs.length === 0) {
    io.out.write('no runs yet\n');
    return EXIT.ok;
  }
  const rows = runs.map((r) => [r.id, r.status, `${r.tasksDone}/${r.tasksTotal}`, `$${r.costUsd.toFixed(4)}`, new Date(r.createdAt).toISOString().replace('T', ' ').slice(0, 19), visible(r.source ?? '')] as const);
  const head = ['run', 'status', 'done', 'cost', 'started (UTC)', 'plan'] as const;
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  io.out.write([line(head), ...rows.map(line)].join('\n') + '\n');
  return EXIT.ok;
}

