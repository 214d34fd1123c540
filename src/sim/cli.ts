/**
 * `swarmstate sim`: run the simulator standalone until SIGINT/SIGTERM. Prints the URL on stdout
 * (one line, for scripts) and what it accepts on stderr. Exit codes: 0 stopped, 2 bad usage.
 */
import { parseArgs } from 'node:util';
import { numberFlag, type NumberRule } from '../util/numberFlag.js';
import { visible } from '../cli/terminal.js';
import { fingerprint } from './hash.js';
import { startSim } from './server.js';
import type { SimFaults, SimKeyLimits, SimOptions } from './types.js';
import { untilStopSignal } from '../util/signals.js';

export const SIM_HELP = `swarmstate sim: a simulated Anthropic + OpenAI API on 127.0.0.1

Usage:
  swarmstate sim [--port 8787] [--seed n] [--keys k1,k2] [--rpm n] [--itpm n] [--otpm n]
                 [--fault-rate x] [--ttft ms] [--tps n] [--no-headers]

Options:
  --port <n>        Port (0: any free one). Default 8787.
  --seed <n>        Seed of replies and faults. Default 0.
  --keys <k1,k2>    Accept only these keys (401 otherwise). Default: any key.
  --rpm, --itpm, --otpm <n>
                    Per-key limits (requests, input tokens, output tokens per minute); need --keys.
                    0 refuses every request of the key with a 429.
  --fault-rate <x>  Total fault rate in [0, 1], split evenly over 500, overloaded, reset and
                    mid-stream errors. Default 0.
  --ttft <ms>       Time to first token. Default 0.
  --tps <n>         Output tokens per second. Default: unlimited.
  --no-headers      Say nothing about the limits: no rate-limit headers, no retry-after on a
                    429 (the limits are enforced the same).
  -h, --help        This help.
Endpoints: POST /v1/messages, POST /v1/chat/completions, GET /stats. Docs: docs/sim.md`;

/** The flags of `swarmstate sim` (and `-h`): the CLI's command table reads them too. */
export const SIM_OPTIONS = {
  port: { type: 'string' },
  seed: { type: 'string' },
  keys: { type: 'string' },
  rpm: { type: 'string' },
  itpm: { type: 'string' },
  otpm: { type: 'string' },
  'fault-rate': { type: 'string' },
  ttft: { type: 'string' },
  tps: { type: 'string' },
  'no-headers': { type: 'boolean', default: false },
} as const;

/** A usage error as every command says one: one line, pointing at the help. */
function usageLine(problem: string): string {
  return `swarmstate sim: ${visible(problem)} (see swarmstate sim --help)\n`;
}

export interface SimCommandIO {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  /** Stops the server like a signal would (tests). */
  stop?: AbortSignal;
}

/**
 * Runs `swarmstate sim` with the arguments after `sim`; resolves with the exit code once stopped.
 * @example
 * process.exitCode = await simCommand(['--port', '8787', '--keys', 'sk-a,sk-b', '--rpm', '50']);
 */
export async function simCommand(argv: string[], io: SimCommandIO = { out: process.stdout, err: process.stderr }): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...SIM_OPTIONS, help: { type: 'boolean', short: 'h', default: false } },
    }));
  } catch (error) {
    io.err.write(usageLine((error as Error).message));
    return 2;
  }
  if (values.help) {
    io.out.write(`${SIM_HELP}\n`);
    return 0;
  }

  const problems: string[] = [];
  const number = (name: string, raw: string | undefined, rule: NumberRule): number | undefined => {
    if (raw === undefined) return undefined;
    const read = numberFlag(name, raw, rule);
    if ('problem' in read) problems.push(read.problem);
    return 'value' in read ? read.value : undefined;
  };
  const port = number('port', values.port, { says: 'a port number', integer: true, min: 0, max: 65535 }) ?? 8787;
  const seed = number('seed', values.seed, { says: 'an integer', integer: true }) ?? 0;
  const limits: SimKeyLimits = {};
  for (const name of ['rpm', 'itpm', 'otpm'] as const) {
    // 0 is a key that refuses every request (a 429 each time), as a key's limits in code allow.
    const n = number(name, values[name], { says: 'a number >= 0', min: 0 });
    if (n !== undefined) limits[name] = n;
  }
  const faultRate = number('fault-rate', values['fault-rate'], { says: 'a rate in [0, 1]', min: 0, max: 1 }) ?? 0;
  const ttftMs = number('ttft', values.ttft, { says: 'a number of ms >= 0', min: 0 }) ?? 0;
  const tokensPerSecond = number('tps', values.tps, { says: 'a number > 0', above: 0 }) ?? Infinity;
  const secrets = values.keys?.split(',').map((k) => k.trim()).filter(Boolean);
  if (values.keys !== undefined && (!secrets || secrets.length === 0)) problems.push('--keys needs at least one key');
  if (Object.keys(limits).length > 0 && values.keys === undefined) problems.push('--rpm/--itpm/--otpm are per key: give the keys with --keys');
  if (problems.length > 0) {
    io.err.write(problems.map(usageLine).join(''));
    return 2;
  }

  const share = faultRate / 4;
  const faults: SimFaults = { http500: share, http529: share, reset: share, streamError: share };
  const options: SimOptions = { port, seed, faults, latency: { ttftMs, tokensPerSecond }, headers: !values['no-headers'] };
  if (secrets) options.keys = Object.fromEntries(secrets.map((k) => [k, limits]));
  let sim;
  try {
    sim = await startSim(options);
  } catch (error) {
    io.err.write(`swarmstate sim: cannot start: ${(error as Error).message}\n`);
    return 2;
  }
  io.out.write(`${sim.url}\n`);
  const accepted = secrets ? `keys ${secrets.map(fingerprint).join(', ')} (sha256 prefixes)` : 'any key';
  io.err.write(`swarmstate sim: listening on ${sim.url} (Anthropic baseURL ${sim.url}, OpenAI baseURL ${sim.url}/v1); ${accepted}; Ctrl-C stops\n`);

  await untilStopSignal(io.stop);
  await sim.close();
  io.err.write('swarmstate sim: stopped\n');
  return 0;
}
