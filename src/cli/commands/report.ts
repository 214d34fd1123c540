/** `swarmstate report <events.ndjson>`: the HTML report from a saved event stream (src/report/). */
import { REPORT_HELP, reportCommand } from '../../report/index.js';
import { usageError, type Command } from './command.js';

export const report: Command = {
  name: 'report',
  summary: 'Build the HTML report of a run from its saved event stream (run --events).',
  usage: REPORT_HELP,
  // The flags of src/report/cli.ts, which parses them again: here only to refuse others in one line.
  options: { out: { type: 'string', short: 'o' }, result: { type: 'string' }, title: { type: 'string' } },
  maxPositionals: 1,
  async run(args, io) {
    if (args.positionals.length === 0) return usageError('report', 'an events file is required', io);
    return reportCommand(args.argv, io);
  },
};
