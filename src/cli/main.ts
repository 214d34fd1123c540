/**
 * The `swarmstate` command: finds the command (src/cli/commands/) and hands it its arguments.
 * Exit codes: 0 every task completed; 1 the run ended partial, failed, cancelled or over budget;
 * 2 an invalid plan, config or command line (every problem listed on stderr); 3 the run is held
 * by another process; 4 the run's journal could not be written.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isatty } from 'node:tty';
import { packageRoot } from './demo.js';
import { EXIT } from './exit.js';
import { visible } from './terminal.js';
import { runCommand, type IO } from './commands/command.js';
import { COMMANDS, commandNamed } from './commands/index.js';
import { globalHelp } from './commands/help.js';

export { EXIT };

/** The process's own streams; stdin is only asked whether it is a terminal (never read). */
function processIO(): IO {
  return { out: process.stdout, err: process.stderr, interactive: isatty(0) };
}

export async function main(argv: string[], io: IO = processIO()): Promise<number> {
  quietOnBrokenPipe(io.out);
  quietOnBrokenPipe(io.err);
  const [first, ...rest] = argv;
  if (first === undefined) {
    // Nothing asked: the help, but as a usage error (a script that forgot its command fails).
    io.out.write(`${globalHelp(COMMANDS)}\n`);
    return EXIT.invalid;
  }
  if (first === '--help' || first === '-h') {
    io.out.write(`${globalHelp(COMMANDS)}\n`);
    return EXIT.ok;
  }
  if (first === '--version' || first === '-v') {
    io.out.write(`${await version()}\n`);
    return EXIT.ok;
  }
  const command = commandNamed(first);
  if (!command) {
    const what = first.startsWith('-') ? `options go after the command: unknown command "${first}"` : `unknown command "${first}"`;
    io.err.write(`swarmstate: ${visible(what)} (see swarmstate help)\n`);
    return EXIT.invalid;
  }
  return runCommand(command, rest, io);
}

const guarded = new WeakSet<NodeJS.WritableStream>();

/**
 * A reader that went away (`swarmstate machines --json | head -1`) fails the next write with
 * EPIPE, an 'error' event that would end the process with a stack trace. The command goes on
 * (a run still completes its journal) with that stream's writes dropped, and ends with the exit
 * code it would have had. Any other stream error is thrown as before.
 */
function quietOnBrokenPipe(stream: NodeJS.WritableStream): void {
  if (guarded.has(stream) || typeof stream.on !== 'function') return;
  guarded.add(stream);
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE' || error.code === 'ERR_STREAM_DESTROYED') return;
    throw error;
  });
}

async function version(): Promise<string> {
  const pkg = JSON.parse(await readFile(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}
