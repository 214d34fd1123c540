/**
 * Branches end to end, over real HTTP against the simulated provider: a classifier with an output
 * schema answers (the sim's `[[sim:reply]]` picks the value), the branch whose `when` holds runs,
 * the other is skipped with the cause `condition` (and so is what depends on it), and a join
 * (`after: "any"`) runs once, its placeholder of the skipped branch empty. With a SQLite journal:
 * a resume keeps the condition's skip, a retry finds nothing to run again, `show --json` and the
 * journal's page give the cause.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, RetryError, type RunEvent } from '../../src/index.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { journalReport } from '../../src/ui/journalReport.js';
import { Writable } from 'node:stream';
import { runCommand } from '../../src/cli/commands/command.js';
import { show } from '../../src/cli/commands/show.js';
import { recordingProxy, type RecordedRequest } from '../helpers/recordingProxy.js';

let sim: SimServer;
let proxy: Awaited<ReturnType<typeof recordingProxy>>;
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-branches-'));
beforeAll(async () => {
  sim = await startSim({ seed: 5 });
  proxy = await recordingProxy(sim.url);
});
afterAll(async () => {
  await proxy.close();
  await sim.close();
});

const urgency = { type: 'object', properties: { urgency: { type: 'string', enum: ['low', 'high'] } }, required: ['urgency'], additionalProperties: false };

/** A ticket classified `level`; tasks named after `tag` so that runs sharing the proxy stay apart. */
function triage(tag: string, level: 'low' | 'high') {
  return {
    providers: { sim: { type: 'sim', baseURL: proxy.url, cache: false } },
    models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 128 } },
    tasks: [
      { id: `${tag}-classify`, model: 'fast', prompt: `Classify the ticket. [[sim:reply {"urgency":"${level}"}]]`, output: { schema: urgency } },
      { id: `${tag}-draft`, model: 'fast', prompt: 'Draft an urgent reply.', deps: [`${tag}-classify`], when: { task: `${tag}-classify`, path: 'urgency', equals: 'high' } },
      { id: `${tag}-send`, model: 'fast', prompt: 'Send {{' + `${tag}-draft` + '}}', deps: [`${tag}-draft`] },
      { id: `${tag}-archive`, model: 'fast', prompt: 'Archive it.', deps: [`${tag}-classify`], when: { not: { task: `${tag}-classify`, path: 'urgency', in: ['high'] } } },
      {
        id: `${tag}-log`,
        model: 'fast',
        prompt: `Log: draft=[{{${tag}-draft}}] archive=[{{${tag}-archive}}]`,
        deps: [`${tag}-draft`, `${tag}-archive`, `${tag}-classify`],
        after: 'any',
      },
    ],
  };
}

/** The text of a request's last user message (Anthropic's shape: the sim's default protocol). */
function userText(r: RecordedRequest): string {
  const messages = r.body.messages as { role: string; content: string | { type: string; text?: string }[] }[];
  const last = messages.filter((m) => m.role === 'user').at(-1)!;
  return typeof last.content === 'string' ? last.content : last.content.map((b) => b.text ?? '').join('\n');
}

const statuses = (tasks: Record<string, { status: string; cause?: string }>, tag: string) =>
  Object.fromEntries(Object.entries(tasks).map(([id, t]) => [id.slice(tag.length + 1), t.cause ? `${t.status} (${t.cause})` : t.status]));

describe('a classifier branches two ways; a join runs once', () => {
  it.each([
    ['high', { classify: 'completed', draft: 'completed', send: 'completed', archive: 'skipped (condition)', log: 'completed' }],
    ['low', { classify: 'completed', draft: 'skipped (condition)', send: 'skipped (dependency)', archive: 'completed', log: 'completed' }],
  ] as const)('urgency %s', async (level, expected) => {
    const tag = `t-${level}`;
    const swarm = createSwarm({ seed: 1, store: false, backoff: { baseMs: 1, maxMs: 2 } });
    const run = swarm.run(triage(tag, level));
    const events: RunEvent[] = [];
    run.events.on('*', (_type: string, e: RunEvent) => events.push(e));
    const result = await run.result;
    await swarm.close();

    expect(statuses(result.tasks, tag)).toEqual(expected);
    expect(result.status).toBe('partial');
    expect(result.tasks[`${tag}-classify`]!.output).toEqual({ urgency: level });
    const skipped = level === 'high' ? 'archive' : 'draft';
    expect(events.filter((e) => e.type === 'task:skipped').map(({ at: _at, ...e }: RunEvent & { at?: number }) => e)).toEqual([
      {
        type: 'task:skipped',
        taskId: `${tag}-${skipped}`,
        cause: 'condition',
        reason:
          level === 'high'
            ? `its condition is false: not (${tag}-classify.urgency in ["high"]); ${tag}-classify.urgency is "high"`
            : `its condition is false: ${tag}-classify.urgency equals "high"; ${tag}-classify.urgency is "low"`,
      },
      ...(level === 'low' ? [{ type: 'task:skipped', taskId: `${tag}-send`, cause: 'dependency', reason: `depends on "${tag}-draft", which was skipped` }] : []),
    ]);
    // No request ever went out for a skipped task; the join went out once.
    const calls = (id: string) => proxy.requests.filter((r) => r.call.split(';')[0] === `${tag}-${id}`);
    expect(calls(skipped)).toEqual([]);
    expect(events.filter((e) => e.type === 'task:started' && e.taskId === `${tag}-log`)).toHaveLength(1);
    expect(calls('log')).toHaveLength(1);
    // The skipped branch reads as nothing, and gets no <dep> block; the classifier, unplaced, does.
    const prompt = userText(calls('log')[0]!);
    const ran = result.tasks[`${tag}-${level === 'high' ? 'draft' : 'archive'}`]!.output as string;
    expect(prompt).toContain(level === 'high' ? `draft=[${ran}] archive=[]` : `draft=[] archive=[${ran}]`);
    expect(prompt).not.toContain(`<dep id="${tag}-${skipped}">`);
    expect(prompt).toContain(`<dep id="${tag}-classify">\n{"urgency":"${level}"}\n</dep>`);
  });
});

describe('branches in the journal', () => {
  it('a resume keeps the condition\'s skip (the join then runs once), a retry finds nothing to run again, the journal page says the cause', async () => {
    const file = join(dir, 'resume.db');
    const tag = 'j';
    const swarm = createSwarm({ seed: 2, store: file, backoff: { baseMs: 1, maxMs: 2 } });
    const run = swarm.run(triage(tag, 'high'));
    const first: RunEvent[] = [];
    run.events.on('*', (_type: string, e: RunEvent) => {
      first.push(e);
      // The classifier's completion skips the archive in the same step: the run stops right after.
      if (e.type === 'task:completed' && e.taskId === `${tag}-classify`) run.cancel('stopped to resume');
    });
    const stopped = await run.result;
    await swarm.close();
    expect(stopped.status).toBe('cancelled');
    expect(statuses(stopped.tasks, tag)).toMatchObject({ classify: 'completed', archive: 'skipped (condition)', log: 'cancelled' });

    const again = createSwarm({ seed: 2, store: file, backoff: { baseMs: 1, maxMs: 2 } });
    const resumed = again.resume(run.id);
    const second: RunEvent[] = [];
    resumed.events.on('*', (_type: string, e: RunEvent) => second.push(e));
    const result = await resumed.result;
    expect(statuses(result.tasks, tag)).toEqual({ classify: 'completed', draft: 'completed', send: 'completed', archive: 'skipped (condition)', log: 'completed' });
    // The archive was judged once, in the first life; the join started once over both.
    expect(second.filter((e) => e.type === 'task:skipped')).toEqual([]);
    expect([...first, ...second].filter((e) => e.type === 'task:started' && e.taskId === `${tag}-log`)).toHaveLength(1);

    let refused: unknown;
    try {
      again.retry(run.id);
    } catch (error) {
      refused = error;
    }
    await again.close();
    expect(refused).toBeInstanceOf(RetryError);
    expect(refused).toMatchObject({ code: 'NOTHING_TO_RETRY', message: `run ${run.id}: every task completed or was skipped by a condition; there is nothing to retry` });

    const store = new SqliteStore(file);
    const record = store.getRun(run.id)!;
    const page = journalReport(record, store.loadTasks(run.id), store.loadAttempts(run.id), record.status);
    store.close();
    let out = '';
    const io = { out: new Writable({ write: (chunk, _enc, done) => ((out += String(chunk)), done()) }), err: new Writable({ write: (_c, _e, done) => done() }) };
    expect(await runCommand(show, [run.id, '--store', file, '--json'], io)).toBe(0);
    const shown = (JSON.parse(out) as { tasks: { id: string; status: string; cause?: string; reason: string | null }[] }).tasks;
    expect(shown.filter((t) => t.status === 'skipped')).toEqual([
      expect.objectContaining({ id: `${tag}-archive`, cause: 'condition', reason: `its condition is false: not (${tag}-classify.urgency in ["high"]); ${tag}-classify.urgency is "high"` }),
    ]);
    expect(page.events.filter((e) => e.type === 'task:skipped').map((e) => ({ ...e, at: 0 }))).toEqual([
      { type: 'task:skipped', taskId: `${tag}-archive`, cause: 'condition', reason: `its condition is false: not (${tag}-classify.urgency in ["high"]); ${tag}-classify.urgency is "high"`, at: 0 },
    ]);
  });
});
