/**
 * The live page: the run's report, served on 127.0.0.1 while the run goes, updating itself.
 *
 * One code path with the static report: the server renders the same views (`renderReport`) from
 * the events so far and sends them over Server-Sent Events; the page swaps them in. `/events`
 * replays every event so far before streaming new ones, so a reload (or a second tab) shows the
 * whole run. Every request needs the random token in the URL (else 403); the page loads nothing
 * from anywhere (a strict CSP header with a per-response script nonce says so).
 *
 * An approval task that waits shows its question and draft with Approve / Reject buttons and a
 * note field: the page posts `{ taskId, approved, note? }` to `/approve` (POST only, the token,
 * this page's own origin: server.ts), which is `run.approve(taskId, decision, 'ui')`; a refusal
 * comes back as JSON `{ error, code }` with a 4xx.
 *
 * @example
 * const run = swarm.run(plan);
 * const ui = await startLiveUi({ run });
 * console.error(`live page: ${ui.url}`);
 * await run.result;
 * await ui.close();
 */
import type { RunResult } from '../../machines/tasks/results.js';
import { renderReport, type RenderedReport } from '../report/html.js';
import type { RunHandle, TimedRunEvent } from '../swarm.js';
import { EventStream, sseMessage, type StreamStats } from './eventStream.js';
import { LIVE_SCRIPT } from './liveScript.js';
import { sendJson, sendPage, sendText, startTokenServer, type PageRequest } from './server.js';
import { ApprovalError, type ApprovalErrorCode } from '../run/approvals.js';

export interface LiveUiOptions {
  run: RunHandle;
  /** Events that happened before this call (subscribe first, then start the UI, and pass them). */
  events?: TimedRunEvent[];
  /** The run's result: the last view renders with it (final statuses, outputs, cost). Default `run.result`. */
  result?: Promise<RunResult>;
  host?: '127.0.0.1';
  /** Default 0: a free port. */
  port?: number;
  /**
   * The run waits for the page's decisions (it was started with `holdApprovals`): the page says
   * so next to a waiting approval. Default false: a decision there still works while the run goes.
   */
  holdsApprovals?: boolean;
}

export interface LiveUi {
  /** `http://127.0.0.1:<port>/?token=<token>`: the token is the only key to the page. */
  url: string;
  /** The event-stream clients now, the bytes queued for them in this process, those refused and dropped. */
  stats(): StreamStats;
  /**
   * Sends every client the rest of the run and the last view (the result, when the run has
   * ended), ends the streams, and stops the server.
   */
  close(): Promise<void>;
}

/** How often at most the views are rendered again while events arrive. */
const RENDER_EVERY_MS = 400;

export async function startLiveUi(opts: LiveUiOptions): Promise<LiveUi> {
  const events: TimedRunEvent[] = [...(opts.events ?? [])];
  const stream = new EventStream();
  for (const e of events) stream.push(sseMessage('run', e));
  let result: RunResult | undefined;
  /** The run ended: with its result, or refused (then the page keeps the events it had). */
  let ended = false;
  let rendered: RenderedReport | undefined;
  /** The stream has the view of the events so far. */
  let viewSent = false;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const approvals = () => ({ actions: !ended, holds: opts.holdsApprovals === true });
  const render = (): RenderedReport => (rendered ??= renderReport(result ? { events, result, approvals: approvals() } : { events, approvals: approvals() }));
  const view = () => sseMessage('view', { html: render().main, events: events.length, done: ended });
  const publish = () => {
    stream.setView(view());
    viewSent = true;
  };
  const flush = () => {
    timer = undefined;
    // Nobody follows: the next client has it rendered when it comes.
    if (stream.stats().clients > 0) publish();
  };
  const changed = () => {
    rendered = undefined;
    viewSent = false;
    if (!timer && !closed) timer = setTimeout(flush, RENDER_EVERY_MS);
  };

  const onEvent = (_type: unknown, e: unknown) => {
    const event = e as TimedRunEvent;
    events.push(event);
    stream.push(sseMessage('run', event));
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

  let server;
  try {
    server = await startTokenServer({
      name: 'startLiveUi',
      ...(opts.host !== undefined ? { host: opts.host } : {}),
      ...(opts.port !== undefined ? { port: opts.port } : {}),
      route: ({ req, res, path }) => {
        if (path === '/') return sendPage(res, render(), LIVE_SCRIPT);
        // The replay, then the views as they are now; new events follow as they happen.
        if (path === '/events') {
          if (!viewSent) publish();
          return stream.attach(req, res);
        }
        if (path === '/approve') return void res.writeHead(405, { Allow: 'POST', 'Content-Type': 'text/plain; charset=utf-8' }).end('a decision is a POST\n');
        sendText(res, 404, 'not found');
      },
      post: { paths: ['/approve'], take: (request, body) => decide(request, body, opts.run, () => ended) },
    });
  } catch (error) {
    opts.run.events.off('*', onEvent);
    throw error;
  }
  return {
    url: server.url,
    stats: () => stream.stats(),
    close: async () => {
      if (closed) return;
      closed = true;
      if (timer) clearTimeout(timer);
      opts.run.events.off('*', onEvent);
      // The view as the run is now (its end, with the result): every client gets it before its stream ends.
      await stream.close(view());
      await server.close();
    },
  };
}

/** What each refusal of `run.approve` answers. */
const REFUSAL: Record<ApprovalErrorCode, number> = { TASK_NOT_FOUND: 404, NOT_WAITING: 409, INVALID_DECISION: 400, RUN_NOT_FOUND: 404, NO_STORE: 409 };

/** `POST /approve` with `{ taskId, approved, note? }`: the page's decision on a waiting approval. */
function decide({ res }: PageRequest, body: string, run: RunHandle, ended: () => boolean): void {
  let input: unknown;
  try {
    input = JSON.parse(body);
  } catch {
    return sendJson(res, 400, { error: 'the body is not JSON: {"taskId": "...", "approved": true | false, "note": "..."}', code: 'INVALID_DECISION' });
  }
  const d = input as { taskId?: unknown; approved?: unknown; note?: unknown } | null;
  const extra = d !== null && typeof d === 'object' ? Object.keys(d).filter((k) => k !== 'taskId' && k !== 'approved' && k !== 'note') : [];
  if (d === null || typeof d !== 'object' || Array.isArray(d) || typeof d.taskId !== 'string' || typeof d.approved !== 'boolean' || extra.length > 0) {
    return sendJson(res, 400, { error: `a decision is {"taskId": "...", "approved": true | false, "note": "..."}${extra.length > 0 ? ` (unknown field "${extra[0]}")` : ''}`, code: 'INVALID_DECISION' });
  }
  if (ended()) return sendJson(res, 409, { error: `task "${d.taskId}" is not waiting for approval: the run is over (swarmstate approve, then swarmstate resume)`, code: 'NOT_WAITING' });
  try {
    run.approve(d.taskId, { approved: d.approved, ...(d.note !== undefined ? { note: d.note as string } : {}) }, 'ui');
  } catch (error) {
    if (!(error instanceof ApprovalError)) throw error;
    return sendJson(res, REFUSAL[error.code] ?? 400, { error: error.message, code: error.code });
  }
  sendJson(res, 200, { ok: true, taskId: d.taskId, approved: d.approved });
}
