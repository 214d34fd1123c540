/** `swarmstate sim`: the simulated provider server (src/sim/). */
import { SIM_HELP, SIM_OPTIONS, simCommand } from '../../sim/index.js';
import type { Command } from './command.js';

export const sim: Command = {
  name: 'sim',
  summary: 'Start the simulated provider server (Anthropic and OpenAI wire protocols) on 127.0.0.1.',
  usage: SIM_HELP,
  // The flags of src/sim/cli.ts, which parses them again: here only to refuse others in one line.
  options: SIM_OPTIONS,
  maxPositionals: 0,
  run: (args, io) => simCommand(args.argv, io),
};
