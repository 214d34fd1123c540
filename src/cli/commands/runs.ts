/** `swarmstate runs`: the journaled runs. */
import { listRuns } from '../commands.js';
import type { Command } from './command.js';

export const runs: Command = {
  name: 'runs',
  summary: 'List the journaled runs: id, status, progress, cost.',
  usage: `Usage: swarmstate runs [--store <file>] [--json]

Lists the runs of a journal, newest first: id, status, tasks done, cost, start time, plan file. A
run no live process holds any more shows \`interrupted\`: resume it with \`swarmstate resume <runId>\`.

Options:
  --store <file>     The journal. Default $SWARMSTATE_STORE, else .swarmstate/runs.db.
  --json             The runs as one JSON array.
  -h, --help         This help.`,
  options: { store: { type: 'string' }, json: { type: 'boolean', default: false } },
  maxPositionals: 0,
  run: (args, io) => listRuns(args.values.store as string | undefined, args.values.json === true, io),
};
