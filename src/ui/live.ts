/**
 * The live page: the run's report, served on 127.0.0.1 while the run goes, updating itself.
 *
 * One code path with the static report: the server renders the same views (`renderReport`) from
 * the events so far and sends them over Server-Sent Events; the page swaps them in. `/events`
 * replays every event so far before streaming new ones, so a reload (or a second tab) shows the
 * whole run. Every request needs the random token in the URL (else 403); the page loads nothing
 * from anywhere (a strict CSP header with a per-response script nonce says so).
 *
 * @example
 * const run = swarm.run(plan);
 * const ui = await startLiveUi({ run });
 * console.error(`live page: ${ui.url}`);
 * await run.result;
 * await ui.close();
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunResult } from '../../machines/tasks/results.js';
import { renderReport, reportPage, type RenderedReport } from '../report/html.js';
import type { RunHandle, TimedRunEvent } from '../swarm.js';
import { LIVE_SCRIPT } from './liveScript.js';

export interface LiveUiOptions {
  run: RunHandle;
  /** Events that happened before this call (subscribe first, then start the UI, and pass them). */
  events?: TimedRunEvent[];
  /** The run's result: the last view renders with it (final statuses, outputs, cost). Default `run.result`. */
  result?: Promise<RunResult>;
  host?: '127.0.0.1';
  /** Default 0: a free port. */
  port?: number;
}

export interface LiveUi {
  /** `http://127.0.0.1:<port>/?token=<token>`: the token is the only key to the page. */
  url: string;
  close(): Promise<void>;
}

/** How often at most the views are rendered again while events arrive. */
const RENDER_EVERY_MS = 400;
const MAX_BUFFERED = 8 * 1024 * 1024;

export async function startLiveUi(opts: LiveUiOptions): Promise<LiveUi> {
  if (opts.host !== undefined && opts.host !== '127.0.0.1') {
    throw new Error(`startLiveUi: host must be 127.0.0.1 (got ${String(opts.host)}): the live page is for this machine only`);
  }
  const token = randomBytes(18).toString('base64url');
  const events: TimedRunEvent[] = [...(opts.events ?? [])];
  let result: RunResult | undefined;
  /** The run ended: with its result, or refused (then the page keeps the events it had). */
  let ended = false;
  const clients = new Set<ServerResponse>();
  let rendered: RenderedReport | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const render = (): RenderedReport => (rendered ??= renderReport(result ? { events, result } : { events }));
  const send = (res: ServerResponse, type: string, data: unknown) => res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  const viewOf = () => ({ html: render().main, events: events.length, done: ended });
  const flush = () => {
    timer = undefined;
    if (clients.size === 0) return;
    const view = viewOf();
    // A tab that does not read (hidden, stalled) gets no more views until it has caught up: the
    // next one replaces them all, and the server's memory stays bounded.
    for (const c of clients) if (c.writableLength < MAX_BUFFERED) send(c, 'view', view);
  };
  const changed = () => {
    rendered = undefined;
    if (!timer && !closed) timer = setTimeout(flush, RENDER_EVERY_MS);
  };

  const onEvent = (_type: unknown, e: unknown) => {
    const event = e as TimedRunEvent;
    events.push(event);
    for (const c of clients) send(c, 'run', event);
    changed();
  };
  opts.run.events.on('*', onEvent);
  (opts.result ?? opts.run.result).then(
    (r) => {
      result = r;
      ended = true;
      changed();
    },
    // A run that fails to start has its events so far: the page keeps showing them.
    () => {
      ended = true;
      changed();
    },
  );

  const expected = Buffer.from(token);
  const allowed = (url: URL) => {
    const given = Buffer.from(url.searchParams.get('token') ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('Cache-Control', 'no-store');
    if (!allowed(url)) {
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' }).end('403: this page needs the token in the URL swarmstate printed\n');
      return;
    }
    if (req.method !== 'GET') {
      res.writeHead(405, { Allow: 'GET' }).end();
      return;
    }
    if (url.pathname === '/') {
      const nonce = randomBytes(16).toString('base64');
      const csp = `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': csp });
      res.end(reportPage(render(), { nonce, script: LIVE_SCRIPT }));
      return;
    }
    if (url.pathname === '/events') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' });
      // The replay, then the views as they are now; new events follow as they happen.
      for (const e of events) send(res, 'run', e);
      send(res, 'view', viewOf());
      clients.add(res);
      req.on('close', () => clients.delete(res));
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found\n');
  };
  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    close: async () => {
      if (closed) return;
      closed = true;
      if (timer) clearTimeout(timer);
      opts.run.events.off('*', onEvent);
      for (const c of clients) c.end();
      clients.clear();
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await done;
    },
  };
}
