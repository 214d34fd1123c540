/**
 * `swarmstate ui [--store <file>] [--port <n>]`: the journal's runs served on 127.0.0.1 until
 * Ctrl-C or SIGTERM: a list of runs, and each run's page rebuilt from the journal (src/ui/).
 */
import { openStoreToRead, type Store } from '../../store/index.js';
import type { TokenServer } from '../../ui/server.js';
import { EXIT } from '../exit.js';
import { missingJournal, storeFileOf, storeSpecOf } from '../paths.js';
import { errorText, visible } from '../terminal.js';
import { usageError, type Command } from './command.js';
import { untilStopSignal } from '../../util/signals.js';

export const ui: Command = {
  name: 'ui',
  summary: "Serve the journal's runs on 127.0.0.1: a list, and each run's report rebuilt from the journal.",
  usage: `Usage: swarmstate ui [--store <file>] [--port <n>]

Serves the runs of a journal on 127.0.0.1 until Ctrl-C: a list of runs (id, status, tasks done,
cost, start time), and each run's page, the HTML report rebuilt from what the journal keeps. No
events file needed. The address printed on stderr carries a random token: without it, 403.

Options:
  --store <file>     The journal. Default $SWARMSTATE_STORE, else .swarmstate/runs.db.
  --port <n>         The port on 127.0.0.1. Default 0: a free one.
  -h, --help         This help.`,
  options: { store: { type: 'string' }, port: { type: 'string' } },
  maxPositionals: 0,
  async run(args, io) {
    const given = args.values.port as string | undefined;
    const port = given === undefined ? 0 : /^\d{1,5}$/.test(given) ? Number(given) : NaN;
    if (!(port >= 0 && port <= 65_535)) return usageError('ui', `--port must be a whole number from 0 to 65535, got "${given}"`, io);
    const spec = storeSpecOf(args.values.store as string | undefined);
    const file = storeFileOf(spec);
    if (file === undefined) return usageError('ui', 'a journal kept in memory ends with its process: give the journal file with --store', io);
    const noJournal = () => {
      io.err.write(`swarmstate ui: no run journal at ${visible(file)} (check --store or $SWARMSTATE_STORE)\n`);
      return EXIT.invalid;
    };
    if (missingJournal(spec) !== undefined) return noJournal();
    let store: Store | undefined;
    let server: TokenServer;
    try {
      store = openStoreToRead(spec);
      if (!store) return noJournal();
      const { startJournalUi } = await import('../../ui/journalUi.js');
      server = await startJournalUi({ store, port, label: file });
    } catch (error) {
      store?.close();
      const e = error as NodeJS.ErrnoException;
      if (e.code === 'EADDRINUSE' || e.code === 'EACCES') {
        io.err.write(`swarmstate ui: cannot listen on 127.0.0.1:${port} (${e.code}); choose another --port, or 0 for a free one\n`);
        return EXIT.invalid;
      }
      io.err.write(`swarmstate ui: ${errorText(error)}\n`);
      return EXIT.journal;
    }
    io.err.write(`runs page: ${server.url}\nserving the runs of ${visible(file)} until Ctrl-C\n`);
    await untilStopSignal();
    await server.close();
    store.close();
    io.err.write('swarmstate ui: stopped\n');
    return EXIT.ok;
  },
};
