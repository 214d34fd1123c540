/**
 * `swarmstate ui`: a journal's runs served on 127.0.0.1, token-protected as the live page is (the
 * same server, src/ui/server.ts): `/` lists the runs, `/run/<id>` is a run's report rebuilt from
 * the journal (src/ui/journalReport.ts), read again at each request, so a run still going shows
 * how far it got when the page was loaded.
 *
 * @example
 * const ui = await startJournalUi({ store: openStoreToRead('.swarmstate/runs.db')! });
 * console.error(`runs: ${ui.url}`);
 */
import type { ServerResponse } from 'node:http';
import { renderReport } from '../report/html.js';
import { esc, int, raw, table, usd, type Cell } from '../report/format.js';
import type { Store } from '../store/index.js';
import { journalReport } from './journalReport.js';
import { sendPage, sendText, startTokenServer, type TokenServer } from './server.js';

export interface JournalUiOptions {
  /** The journal, open for reading; the caller closes it after `close()`. */
  store: Store;
  /** Default 0: a free port. */
  port?: number;
  /** How the list names the journal (its file). Default the store's path. */
  label?: string;
}

/** Runs the list shows at most (newest first). */
const LIST_LIMIT = 500;

/** A run's status as `runs` and `show` say it: one journaled as running that no live process holds died. */
function statusOf(store: Store, run: { id: string; status: string }): string {
  return run.status === 'running' && !store.isHeld(run.id) ? 'interrupted' : run.status;
}

const when = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);

function listPage(store: Store, label: string, token: string): { title: string; main: string } {
  const runs = store.listRuns(LIST_LIMIT);
  const link = (id: string) => raw(`<a href="/run/${esc(encodeURIComponent(id))}?token=${esc(token)}"><code>${esc(id)}</code></a>`);
  const rows: Cell[][] = runs.map((r) => {
    const status = statusOf(store, r);
    return [link(r.id), raw(`<span class="badge ${esc(status.replace(/[^a-z]/g, ''))}">${esc(status)}</span>`), `${int(r.tasksDone)}/${int(r.tasksTotal)}`, usd(r.costUsd), when(r.createdAt), r.source ?? ''];
  });
  const list =
    runs.length === 0
      ? '<p class="note">No runs in this journal yet.</p>'
      : table([{ label: 'run', id: true }, { label: 'status' }, { label: 'tasks done', num: true }, { label: 'cost', num: true }, { label: 'started (UTC)' }, { label: 'plan' }], rows);
  const more = runs.length === LIST_LIMIT ? `<p class="note">The newest ${LIST_LIMIT} runs.</p>` : '';
  const title = 'swarmstate runs';
  return { title, main: `<header><h1>${title}</h1><div class="sub">journal <code>${esc(label)}</code> · newest first</div></header>\n<section>${list}${more}</section>` };
}

function runPage(store: Store, id: string, token: string): { title: string; main: string } | undefined {
  const run = store.getRun(id);
  if (!run) return undefined;
  const status = statusOf(store, run);
  const input = journalReport(run, store.loadTasks(id), store.loadAttempts(id), status);
  // A run no live process holds will not go on: what did not end reads `unfinished`, not `running`.
  const rendered = renderReport({ ...input, ended: status !== 'running' });
  const back = `<p class="note"><a href="/?token=${esc(token)}">all runs</a> · ${esc(input.note)}</p>`;
  return { title: rendered.title, main: `${back}\n${rendered.main}` };
}

/** `/run/<id>`'s id, percent-decoded; undefined for any other path or a bad encoding. */
function runIdOf(path: string): string | undefined {
  const id = /^\/run\/([^/]+)$/.exec(path)?.[1];
  if (id === undefined) return undefined;
  try {
    return decodeURIComponent(id);
  } catch {
    return undefined;
  }
}

/** Serves the journal's runs until `close()`. */
export async function startJournalUi(opts: JournalUiOptions): Promise<TokenServer> {
  const label = opts.label ?? opts.store.path;
  let token = '';
  const answer = (res: ServerResponse, path: string): void => {
    if (path === '/') return sendPage(res, listPage(opts.store, label, token));
    const id = runIdOf(path);
    const page = id === undefined ? undefined : runPage(opts.store, id, token);
    if (page) return sendPage(res, page);
    sendText(res, 404, id === undefined ? 'not found' : `no run ${id} in this journal`);
  };
  const server = await startTokenServer({
    name: 'swarmstate ui',
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    route: ({ res, path }) => {
      try {
        answer(res, path);
      } catch (error) {
        // A journal that cannot be read (a bad row, a file gone): said on the page; the server goes on.
        sendText(res, 500, `the journal could not be read: ${error instanceof Error ? error.message : String(error)}`);
      }
    },
  });
  token = server.token;
  return server;
}
