/**
 * The commands around runs: `swarmstate worker`, `swarmstate runs` and `runs prune`, and the
 * Redis check a distributed run and a worker make before they start.
 */
import { createSwarm } from '../swarm.js';
import type { RunSummary } from '../store/index.js';
import { redisForDisplay } from '../distributed/redis.js';
import { DISTRIBUTED_PACKAGES } from '../distributed/lazy.js';
import { importOptional } from '../util/optional.js';
import { EXIT } from './exit.js';
import { formatBytes, journalBytes, missingJournal, storeFileOf, storeSpecOf } from './paths.js';
import { usageError } from './commands/command.js';
import { openStore, openStoreToRead, type PruneResult, type Store } from '../store/index.js';
import { errorText, jsonForTerminal, visible } from './terminal.js';
import { onFirstStop, untilStopSignal } from '../util/signals.js';

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
  // Listening before the line goes out: whoever reacts to it with a signal finds it handled.
  const stopListening = onFirstStop(() => controller.abort());
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
    stopListening();
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
  await untilStopSignal();
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
  const rows = runs.map(runRow);
  const head = ['run', 'status', 'done', 'cost', 'started (UTC)', 'plan'] as const;
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  // A run whose row cannot be read is listed with the others, and what is wrong with it below them.
  const damaged = runs.filter((r) => r.damaged !== undefined).map((r) => visible(`${r.id}: ${r.damaged!.message}`));
  io.out.write([line(head), ...rows.map(line), ...(damaged.length > 0 ? ['', ...damaged] : [])].join('\n') + '\n');
  return EXIT.ok;
}


/** A run's cells in the `runs` table; of a damaged row, only what it could be read for. */
function runRow(r: RunSummary): readonly string[] {
  const started = new Date(r.createdAt).toISOString().replace('T', ' ').slice(0, 19);
  if (r.damaged === undefined) return [visible(r.id), r.status, `${r.tasksDone}/${r.tasksTotal}`, `$${r.costUsd.toFixed(4)}`, started, visible(r.source ?? '')];
  const bad = r.damaged.column;
  return [visible(r.id), 'unreadable', '-', '-', bad === 'created_at' ? '-' : started, bad === 'source' ? '-' : visible(r.source ?? '')];
}

const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `30m`, `12h`, `7d` (also `s` and `w`): a whole number and one unit, in ms; else undefined. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d{1,9})([smhdw])$/.exec(text);
  return match ? Number(match[1]) * DURATION_UNITS[match[2]!]! : undefined;
}

export interface PruneFlags {
  store: string | undefined;
  olderThan: string | undefined;
  keep: string | undefined;
  dryRun: boolean;
  json: boolean;
}

/**
 * `swarmstate runs prune`: removes the runs the flags pick (never a live or interrupted one),
 * then VACUUM when it removed any, and says what it removed (or would), with the bytes.
 */
export async function pruneCommand(flags: PruneFlags, io: IO): Promise<number> {
  const olderThanMs = flags.olderThan === undefined ? undefined : parseDuration(flags.olderThan);
  if (flags.olderThan !== undefined && olderThanMs === undefined) {
    return usageError('runs', `--older-than must be a duration like 30m, 12h or 7d (got "${flags.olderThan}")`, io);
  }
  const keep = flags.keep === undefined ? undefined : /^\d{1,15}$/.test(flags.keep) ? Number(flags.keep) : Number.NaN;
  if (keep !== undefined && Number.isNaN(keep)) return usageError('runs', `--keep must be a whole number, 0 or more (got "${flags.keep}")`, io);
  if (olderThanMs === undefined && keep === undefined) return usageError('runs', 'prune needs --older-than <duration> or --keep <n>', io);
  const spec = storeSpecOf(flags.store);
  const file = storeFileOf(spec);
  if (file === undefined) return usageError('runs', 'a journal kept in memory ends with its process: there is nothing to prune', io);
  if (missingJournal(spec) !== undefined) {
    if (spec !== undefined) {
      io.err.write(`swarmstate: no run journal at ${visible(file)} (check --store or $SWARMSTATE_STORE)\n`);
      return EXIT.invalid;
    }
    const none = { dryRun: flags.dryRun, removed: [], bytes: 0, live: [], interrupted: [], fileBytes: { before: 0, after: 0 } };
    io.out.write(flags.json ? jsonForTerminal(none) + '\n' : 'nothing to remove: no run journal yet\n');
    return EXIT.ok;
  }
  const rule = { ...(olderThanMs !== undefined ? { olderThanMs } : {}), ...(keep !== undefined ? { keep } : {}) };
  const before = journalBytes(file);
  let store: Store | undefined;
  let result: PruneResult;
  let vacuumError: unknown;
  try {
    // A dry run writes nothing, not even the schema: the file is opened read-only.
    store = flags.dryRun ? openStoreToRead(spec) : openStore(spec);
    result = store?.pruneRuns(rule, { dryRun: flags.dryRun }) ?? { removed: [], bytes: 0, live: [], interrupted: [] };
    if (store && !flags.dryRun && result.removed.length > 0) {
      try {
        store.compact();
      } catch (error) {
        vacuumError = error;
      }
    }
  } catch (error) {
    io.err.write(`swarmstate: ${errorText(error)}\n`);
    return EXIT.journal;
  } finally {
    store?.close();
  }
  const after = journalBytes(file);
  if (flags.json) io.out.write(jsonForTerminal({ dryRun: flags.dryRun, ...result, fileBytes: { before, after } }) + '\n');
  else io.out.write(pruneReport(result, flags, { file, before, after, vacuumed: !flags.dryRun && result.removed.length > 0 && vacuumError === undefined }));
  if (vacuumError !== undefined) {
    io.err.write(`swarmstate: ${errorText(vacuumError)}\n`);
    return EXIT.journal;
  }
  return EXIT.ok;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** What `runs prune` prints: the runs removed (or that would be), the file before and after, what it kept. */
function pruneReport(result: PruneResult, flags: PruneFlags, file: { file: string; before: number; after: number; vacuumed: boolean }): string {
  const lines: string[] = [];
  const { removed } = result;
  if (removed.length === 0) {
    const beyond = flags.keep !== undefined ? `beyond the ${flags.keep} newest` : '';
    const older = flags.olderThan !== undefined ? `older than ${flags.olderThan}` : '';
    lines.push(`nothing to remove: no run ${beyond && older ? `${beyond} is ${older}` : beyond || `is ${older}`}`);
  } else {
    const about = `about ${formatBytes(result.bytes)} of rows`;
    lines.push(flags.dryRun ? `would remove ${plural(removed.length, 'run')} (${about}; the journal is not changed):` : `removed ${plural(removed.length, 'run')} (${about}):`);
    const cells = removed.map((r) => [visible(r.id), visible(r.status), r.createdAt === null ? '-' : new Date(r.createdAt).toISOString().replace('T', ' ').slice(0, 19), formatBytes(r.bytes)]);
    const widths = [0, 1, 2].map((i) => Math.max(...cells.map((c) => c[i]!.length)));
    for (const c of cells) lines.push(`  ${c.map((cell, i) => (i < 3 ? cell.padEnd(widths[i]!) : cell)).join('  ')}`);
    if (file.vacuumed) lines.push(`journal ${visible(file.file)}: ${formatBytes(file.before)} -> ${formatBytes(file.after)} after VACUUM (freed ${formatBytes(Math.max(0, file.before - file.after))})`);
  }
  const ids = (list: string[]) => list.map(visible).join(', ');
  if (result.live.length > 0) {
    const one = result.live.length === 1;
    lines.push(`kept ${plural(result.live.length, 'live run')} (${one ? 'a running process holds it' : 'running processes hold them'}): ${ids(result.live)}`);
  }
  if (result.interrupted.length > 0) {
    const one = result.interrupted.length === 1;
    lines.push(`kept ${plural(result.interrupted.length, 'interrupted run')} (swarmstate resume <runId> continues ${one ? 'it' : 'them'}): ${ids(result.interrupted)}`);
  }
  return lines.join('\n') + '\n';
}
