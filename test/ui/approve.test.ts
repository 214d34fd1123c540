/**
 * Deciding an approval on the live page, over real HTTP on 127.0.0.1: the page shows the waiting
 * approval (question, draft, buttons, note field); `POST /approve` with the token decides it
 * (from the page's own origin, or with no Origin as curl sends); without the token, with a wrong
 * token, from another origin, by GET, as a form, too big or malformed it is refused and the task
 * still waits.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createSwarm, startLiveUi, type RunEvent, type RunHandle } from '../../src/index.js';
import { until } from '../helpers/cli.js';

const plan = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'draft', model: 'fast', prompt: 'draft a reply [[sim:reply DRAFT <b>bold</b>]]' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
    { id: 'send', model: 'fast', deps: ['ok', 'draft'], prompt: 'send {{draft}} [[sim:reply SENT]]' },
  ],
};

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request over node:http, headers exactly as given (no Origin unless named). */
function send(url: string, method: string, body?: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { ...(body !== undefined ? { 'Content-Length': String(Buffer.byteLength(body)) } : {}), ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    // A server that refuses before reading may close while the body is still going out.
    req.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' || e.code === 'EPIPE' ? resolve({ status: 0, headers: {}, body: '' }) : reject(e)));
    req.end(body);
  });
}

const json = { 'Content-Type': 'application/json' };

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function waitingRun() {
  const swarm = createSwarm({ seed: 1, store: false });
  cleanup.push(() => swarm.close());
  const run: RunHandle = swarm.run(plan, { holdApprovals: true });
  const events: RunEvent[] = [];
  run.events.on('*', (_t, e) => events.push(e as RunEvent));
  const ui = await startLiveUi({ run, holdsApprovals: true });
  cleanup.push(() => ui.close());
  await until(() => events.filter((e) => e.type === 'approval:requested').length === 1, 'the approval to wait');
  const base = new URL(ui.url);
  const token = base.searchParams.get('token')!;
  const at = (path: string, t = token) => `${base.origin}${path}?token=${t}`;
  const decided = () => events.filter((e): e is Extract<RunEvent, { type: 'approval:decided' }> => e.type === 'approval:decided');
  const stillWaiting = () => run.actor!.getSnapshot().context.table.status('ok') === 'waiting' && decided().length === 0;
  return { run, ui, events, at, origin: base.origin, decided, stillWaiting };
}

describe('approval on the live page', () => {
  it('refuses a decision without the token, with a wrong one, from another origin, by GET, as a form, too big or malformed: the task still waits', async () => {
    const { at, stillWaiting } = await waitingRun();
    const good = JSON.stringify({ taskId: 'ok', approved: true });
    const refusals: [string, Promise<Answer>, number][] = [
      ['no token', send(at('/approve').replace(/\?token=.*$/, ''), 'POST', good, json), 403],
      ['a wrong token', send(at('/approve', 'x'.repeat(24)), 'POST', good, json), 403],
      ['another origin', send(at('/approve'), 'POST', good, { ...json, Origin: 'http://evil.example' }), 403],
      ['another port on this host', send(at('/approve'), 'POST', good, { ...json, Origin: 'http://127.0.0.1:1' }), 403],
      ['an opaque origin', send(at('/approve'), 'POST', good, { ...json, Origin: 'null' }), 403],
      ['GET', send(`${at('/approve')}&taskId=ok&approved=true`, 'GET'), 405],
      ['PUT', send(at('/approve'), 'PUT', good, json), 405],
      ['a form body', send(at('/approve'), 'POST', 'taskId=ok&approved=true', { 'Content-Type': 'application/x-www-form-urlencoded' }), 415],
      ['text/plain', send(at('/approve'), 'POST', good, { 'Content-Type': 'text/plain' }), 415],
      ['over 64 KiB', send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ok', approved: true, note: 'x'.repeat(70_000) }), json), 413],
      ['not JSON', send(at('/approve'), 'POST', '{"taskId": "ok",', json), 400],
      ['approved not a boolean', send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ok', approved: 'yes' }), json), 400],
      ['an edited output (not taken here)', send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ok', approved: true, output: 'x' }), json), 400],
      ['a task that does not exist', send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ghost', approved: true }), json), 404],
      ['a task that is not waiting', send(at('/approve'), 'POST', JSON.stringify({ taskId: 'draft', approved: true }), json), 409],
      ['another path', send(at('/approve/ok'), 'POST', good, json), 405],
    ];
    for (const [what, answer, status] of refusals) expect((await answer).status, what).toBe(status);
    // Refusals after the token check say why, as JSON.
    const foreign = await send(at('/approve'), 'POST', good, { ...json, Origin: 'http://evil.example' });
    expect(JSON.parse(foreign.body)).toEqual({ error: expect.stringContaining('not from http://evil.example') });
    const ghost = await send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ghost', approved: true }), json);
    expect(JSON.parse(ghost.body)).toMatchObject({ code: 'TASK_NOT_FOUND', error: expect.stringContaining('has no task "ghost"') });
    const done = await send(at('/approve'), 'POST', JSON.stringify({ taskId: 'draft', approved: true }), json);
    expect(JSON.parse(done.body)).toMatchObject({ code: 'NOT_WAITING', error: expect.stringContaining('task "draft"') });
    const get = await send(at('/approve'), 'GET');
    expect(get.headers.allow).toBe('POST');
    expect(stillWaiting()).toBe(true);
  });

  it('shows the waiting approval with its buttons; a rejection from the page sends the draft back, an approval by curl finishes the run', async () => {
    const { run, at, origin, events, decided } = await waitingRun();
    const page = await send(at('/'), 'GET');
    expect(page.status).toBe(200);
    expect(page.body).toContain('<code>ok</code> waits: Send this reply?');
    // The draft, escaped as every string from the run is.
    expect(page.body).toContain('DRAFT &lt;b&gt;bold&lt;/b&gt;');
    expect(page.body).toContain('<div class="approve-form" data-task="ok"><textarea name="note"');
    expect(page.body).toContain('<button type="button" class="approve-btn" data-approved="true">Approve</button>');
    expect(page.body).toContain('<button type="button" class="approve-btn" data-approved="false">Reject</button>');
    expect(page.body).toContain('The run waits for your decision on this page');

    // From the page itself: its own origin.
    const rejected = await send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ok', approved: false, note: 'too long' }), { ...json, Origin: origin });
    expect({ status: rejected.status, body: JSON.parse(rejected.body) as unknown }).toEqual({ status: 200, body: { ok: true, taskId: 'ok', approved: false } });
    await until(() => events.filter((e) => e.type === 'approval:requested').length === 2, 'the second round');
    // With no Origin, as curl sends it: the token is enough.
    const approved = await send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ok', approved: true }), json);
    expect(approved.status).toBe(200);
    const result = await run.result;
    expect(result.status).toBe('completed');
    expect(result.tasks.draft!.revisions).toBe(1);
    expect(decided().map((d) => [d.by, d.outcome, d.note ?? null])).toEqual([
      ['ui', 'revise', 'too long'],
      ['ui', 'approved', null],
    ]);
    // Over: the page takes no more decisions.
    const late = await send(at('/approve'), 'POST', JSON.stringify({ taskId: 'ok', approved: true }), json);
    expect(late.status).toBe(409);
  });
});
