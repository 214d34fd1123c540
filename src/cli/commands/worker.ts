/** `swarmstate worker`: makes the calls of distributed runs. */
import { workerCommand } from '../commands.js';
import { EXIT } from '../exit.js';
import { numberOption, usageError, type Command } from './command.js';

export const worker: Command = {
  name: 'worker',
  summary: 'Make the model and tool calls of distributed runs (run --redis).',
  usage: `Usage: swarmstate worker --redis <redis://host:6379> [--concurrency 8] [--lock-ms 30000]

Makes the model and tool calls of distributed runs (run --redis), taking them from the queue on
Redis, until SIGINT or SIGTERM. Start as many as you like, on any machine with the plan's key
environment variables; stop them any time.

Options:
  --redis <url>      The Redis the runs coordinate on (required). Waits at most 10 s for it
                     ($SWARMSTATE_REDIS_CONNECT_MS), then exits 2.
  --concurrency <n>  Calls at once. Default 8.
  --lock-ms <n>      How soon another worker takes over the jobs of a worker that died. Default 30000.
  -h, --help         This help.

Docs: docs/cli.md#swarmstate-worker`,
  options: { redis: { type: 'string' }, concurrency: { type: 'string' }, 'lock-ms': { type: 'string' } },
  maxPositionals: 0,
  async run(args, io) {
    const redis = args.values.redis as string | undefined;
    if (!redis) return usageError('worker', '--redis <redis://host:6379> is required', io);
    const concurrency = numberOption('worker', args.values.concurrency, 'concurrency', { says: 'a positive integer', integer: true, min: 1 }, io);
    if (concurrency === false) return EXIT.invalid;
    const lockMs = numberOption('worker', args.values['lock-ms'], 'lock-ms', { says: 'an integer of at least 500', integer: true, min: 500 }, io);
    if (lockMs === false) return EXIT.invalid;
    return workerCommand(redis, concurrency ?? 8, lockMs ?? 30_000, io);
  },
};
