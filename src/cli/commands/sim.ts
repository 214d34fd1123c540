/** `swarmstate sim`: the simulated provider server (src/sim/). */
import { SIM_HELP, simCommand } from '../../sim/index.js';
import type { Command } from './command.js';

export const sim: Command = {
  name: 'sim',
  summary: 'Start the simulated provider server (Anthropic and OpenAI wire protocols) on 127.0.0.1.',
  usage: SIM_HELP,
  // The flags of src/sim/cli.ts, which parses them again: here only to refuse others in one line.
  options: Object.fromEntries(['port', 'seed', 'keys', 'rpm', 'itpm', 'otpm', 'fault-rate', 'ttft', 'tps'].map((name) => [name, { type: 'string' as const }])),
  maxPositionals: 0,
  run: (args, io) => simCommand(args.argv, io),
};
