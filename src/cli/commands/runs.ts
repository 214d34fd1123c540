/** `swarmstate runs`: the journaled runs; `swarmstate runs prune`: journal upkeep. */
import { listRuns, pruneCommand } from '../commands.js';
import type { Command } from './command.js';

/** The flags only `runs prune` takes. */
const PRUNE_FLAGS = ['older-than', 'keep', 'dry-run'] as const;

export const runs: Command = {
  name: 'runs',
  summary: 'List the journaled runs: id, status, progress, cost; `runs prune` removes old ones.',
  usage: `Usage: swarmstate runs [--store <file>] [--json]
       swarmstate runs prune (--older-than <duration> | --keep <n>) [--dry-run] [--store <file>] [--json]

Lists the runs of a journal, newest first: id, status, tasks done, cost, start time, plan file. A
run no live process holds any more shows \`interrupted\`: resume it with \`swarmstate resume <runId>\`.
A \`paused\` run waits for approvals: \`swarmstate approve <runId> <taskId>\`, then resume it.
A run whose row was changed outside swarmstate shows \`unreadable\`, with what is wrong below.

\`runs prune\` removes finished runs (every row they have) and then gives the space back to the
file system (VACUUM). It never removes a run that a live process holds, nor an interrupted one
(\`swarmstate resume\` continues it). With both flags, a run is removed when both pick it.

Options:
  --store <file>            The journal. Default $SWARMSTATE_STORE, else .swarmstate/runs.db.
  --json                    The runs (prune: what it removed, kept and freed) as JSON.
  --older-than <duration>   prune: the runs started more than this long ago: 30m, 12h, 7d, 2w
                            (a whole number and s, m, h, d or w).
  --keep <n>                prune: all but the <n> newest runs.
  --dry-run                 prune: say what would be removed; change nothing.
  -h, --help                This help.`,
  options: {
    store: { type: 'string' },
    json: { type: 'boolean', default: false },
    'older-than': { type: 'string' },
    keep: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
  },
  maxPositionals: 1,
  check({ positionals: [sub], values: v }) {
    if (sub !== undefined && sub !== 'prune') return `unexpected argument "${sub}"`;
    const misplaced = sub === undefined ? PRUNE_FLAGS.find((flag) => v[flag] !== undefined && v[flag] !== false) : undefined;
    return misplaced === undefined ? undefined : `--${misplaced} is an option of swarmstate runs prune`;
  },
  run(args, io) {
    const [sub] = args.positionals;
    const v = args.values;
    const store = v.store as string | undefined;
    if (sub === 'prune') {
      const flags = { store, olderThan: v['older-than'] as string | undefined, keep: v.keep as string | undefined, dryRun: v['dry-run'] === true, json: v.json === true };
      return pruneCommand(flags, io);
    }
    return listRuns(store, v.json === true, io);
  },
};
