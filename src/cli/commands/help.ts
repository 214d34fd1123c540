/** `swarmstate help [command]`: the global help, or one command's. */
import { join } from 'node:path';
import { packageRoot } from '../demo.js';
import { EXIT } from '../exit.js';
import { usageError, type Command, type IO } from './command.js';

const DOCS_URL = 'https://github.com/swarmstate/swarmstate/tree/main/docs';

/**
 * The global help, from the commands' own summaries (set by the registry, which knows them all).
 * The docs it names are the installed package's own (they ship with it), by full path.
 */
export function globalHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length)) + 2;
  const root = packageRoot();
  const docs = join(root, 'docs');
  return `swarmstate: run many LLM sub-agents in parallel, reliably and within budget

Usage: swarmstate <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)} ${c.summary}`).join('\n')}

  swarmstate <command> --help    the options of a command (or: swarmstate help <command>)
  swarmstate --version           the version

Exit codes: 0 all tasks completed, 1 partial/failed/cancelled/budget_exceeded, 2 invalid plan or usage,
3 the run is held by another process, 4 the journal could not be written (resume once fixed).
Docs (in this package): ${join(docs, 'cli.md')}, ${join(docs, 'plan-format.md')},
  ${join(docs, 'sim.md')} (the simulator)
  also at ${DOCS_URL}
Plan JSON Schema (for editors, as "$schema"): ${join(root, 'schema', 'plan.schema.json')}`;
}

/** The help command, given the registry it describes. */
export function helpCommand(all: () => readonly Command[]): Command {
  return {
    name: 'help',
    summary: 'This help, or a command\'s: swarmstate help <command>.',
    usage: 'Usage: swarmstate help [command]\n\nThe list of commands, or the help of one (as `swarmstate <command> --help`).\n\nOptions:\n  -h, --help         This help.',
    options: {},
    maxPositionals: 1,
    async run(args, io: IO) {
      const name = args.positionals[0];
      if (name === undefined) {
        io.out.write(`${globalHelp(all())}\n`);
        return EXIT.ok;
      }
      const command = all().find((c) => c.name === name);
      if (!command) return usageError('help', `unknown command "${name}"`, io);
      io.out.write(`${command.usage}\n`);
      return EXIT.ok;
    },
  };
}
