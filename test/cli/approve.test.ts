/**
 * `swarmstate approve` and the `paused` run end to end: the built CLI as child processes on a
 * real SQLite journal in a temp dir (npm run build first). A run whose only task left is an
 * approval ends `paused` (exit 5) and says how to go on; `approve` writes the decision to the
 * journal (an edited output from a file), `show` has it, `resume` applies it (exit 0). Bad
 * requests are one line each with their exit code, and change nothing.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, start, until } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-approve-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sim = { providers: { sim: { type: 'sim' } }, models: { fast: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 5 } } } };

const plan = {
  ...sim,
  tasks: [
    { id: 'draft', model: 'fast', prompt: 'draft a reply [[sim:reply DRAFT]]' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
    { id: 'send', model: 'fast', deps: ['ok', 'draft'], prompt: 'send {{draft}} [[sim:reply SENT]]' },
    { id: 'other', model: 'fast', prompt: 'unrelated [[sim:reply OTHER]]' },
  ],
};

function planFile(name: string, p: unknown = plan): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(p));
  return file;
}

type Shown = { status: string; tasks: { id: string; status: string; approval?: Record<string, unknown> }[] };
const showJson = async (runId: string, store: string) => JSON.parse((await cli(['show', runId, '--store', store, '--json'])).stdout) as Shown;

describe('swarmstate approve', () => {
  it('a run that pauses exits 5 and says what to run; approve with an edited output, then resume, finishes it (exit 0)', async () => {
    const store = join(dir, 'pause.db');
    const file = planFile('pause.json');
    const run = await cli(['run', file, '--store', store]);
    expect(run.code).toBe(5);
    const runId = /^run (\S+)/m.exec(run.stderr)![1]!;
    // The log line of the request, the summary and the way on.
    expect(run.stderr).toContain('waiting for approval: ok approves draft — Send this reply?');
    expect(run.stdout).toMatch(new RegExp(`^status +paused \\(run ${runId}\\)$`, 'm'));
    expect(run.stdout).toMatch(/^ {2}waiting +1 \(approval waiting for a decision\)$/m);
    expect(run.stdout).toMatch(/^ {2}pending +1 \(not started: behind an approval\)$/m);
    expect(run.stderr).toContain(`paused: 1 approval waits: ok (approves draft: Send this reply?)`);
    expect(run.stderr).toContain(`decide: swarmstate approve ${runId} ok [--reject] [--note <text>] [--output <file>] --store ${store}`);
    expect(run.stderr).toContain(`then:   swarmstate resume ${runId} --store ${store}`);

    // runs and show say it: paused, the approval waiting with its question.
    const runs = await cli(['runs', '--store', store]);
    expect(runs.stdout).toMatch(new RegExp(`^${runId} +paused +2/4 `, 'm'));
    const shown = await cli(['show', runId, '--store', store]);
    expect(shown.stdout).toMatch(new RegExp(`^run ${runId}  paused  2/4 done`));
    expect(shown.stdout).toMatch(/^ok +waiting +0 +0 +- +waiting for approval: Send this reply\?$/m);

    // Refusals: one line each, nothing written.
    const other = await cli(['approve', runId, 'other', '--store', store]);
    expect(other).toEqual({ code: 1, stdout: '', stderr: `swarmstate approve: task "other" of run ${runId} is not waiting for approval (it is completed)\n` });
    const pending = await cli(['approve', runId, 'send', '--store', store]);
    expect(pending).toEqual({ code: 1, stdout: '', stderr: `swarmstate approve: task "send" of run ${runId} is not waiting for approval (it is pending)\n` });
    const ghost = await cli(['approve', runId, 'ghost', '--store', store]);
    expect(ghost).toEqual({ code: 2, stdout: '', stderr: `swarmstate approve: run ${runId} has no task "ghost" (\`swarmstate show ${runId}\` lists its tasks)\n` });
    const nope = await cli(['approve', 'nope', 'ok', '--store', store]);
    expect(nope).toEqual({ code: 2, stdout: '', stderr: `swarmstate approve: no run nope in ${store} (\`swarmstate runs\` lists its runs)\n` });
    const missing = await cli(['approve', runId, 'ok', '--output', join(dir, 'absent.txt'), '--store', store]);
    expect(missing).toEqual({ code: 2, stdout: '', stderr: `swarmstate approve: cannot read --output ${join(dir, 'absent.txt')}: ENOENT\n` });
    const both = await cli(['approve', runId, 'ok', '--reject', '--output', file, '--store', store]);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe('swarmstate approve: --output is an edited output to approve: not with --reject (see swarmstate approve --help)\n');
    expect((await showJson(runId, store)).tasks.find((t) => t.id === 'ok')!.approval).toEqual({ approves: 'draft', prompt: 'Send this reply?' });

    // The decision, with an edited output; the journal has it until a resume applies it.
    const edited = join(dir, 'edited.txt');
    writeFileSync(edited, 'EDITED REPLY');
    const approved = await cli(['approve', runId, 'ok', '--note', 'ship it', '--output', edited, '--store', store]);
    expect(approved.code).toBe(0);
    expect(approved.stderr).toBe('');
    expect(approved.stdout).toBe(`approved "ok" of run ${runId} (note: ship it; edited output of "draft" from ${edited}): continue it with swarmstate resume ${runId} --store ${store}\n`);
    const waitingDecision = (await showJson(runId, store)).tasks.find((t) => t.id === 'ok')!.approval as { pending: Record<string, unknown> };
    expect(waitingDecision.pending).toMatchObject({ approved: true, note: 'ship it', by: 'cli', edited: true });
    const again = await cli(['approve', runId, 'ok', '--reject', '--store', store]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(new RegExp(`^swarmstate approve: task "ok" of run ${runId} already has a decision not yet applied \\(approved by cli at \\d{4}-.*Z\\): the run applies it when it continues\\n$`));

    const resumed = await cli(['resume', runId, '--store', store]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`^status +completed \\(run ${runId}\\)$`, 'm'));
    expect(resumed.stderr).toContain('approved ok by cli: ship it (edited output)');
    const finished = (await showJson(runId, store)) as { status: string; tasks: { id: string; status: string; output: string }[] };
    expect(finished.status).toBe('completed');
    expect(finished.tasks.find((t) => t.id === 'draft')!.output).toBe('EDITED REPLY');
    expect(finished.tasks.find((t) => t.id === 'send')).toMatchObject({ status: 'completed', output: 'SENT' });

    const after = await cli(['show', runId, 'ok', '--store', store]);
    expect(after.stdout).toMatch(/^decision: approved by cli at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: ship it \(edited output\)$/m);
    const done = await cli(['approve', runId, 'ok', '--store', store]);
    expect(done).toEqual({ code: 1, stdout: '', stderr: `swarmstate approve: task "ok" of run ${runId} is not waiting for approval (it is completed)\n` });
  });

  it('--json results carry `paused`; a rejection with a note is journaled and a resume sends the draft back', async () => {
    const store = join(dir, 'reject.db');
    const file = planFile('reject.json');
    const run = await cli(['run', file, '--store', store, '--json']);
    expect(run.code).toBe(5);
    const result = JSON.parse(run.stdout) as { runId: string; status: string; tasks: Record<string, { status: string }> };
    expect(result.status).toBe('paused');
    expect(result.tasks.ok!.status).toBe('waiting');
    expect(run.stderr).toMatch(new RegExp(`^run ${result.runId} paused: 2/4 tasks completed, 1 waiting`, 'm'));

    const rejected = await cli(['approve', result.runId, 'ok', '--reject', '--note', 'too long', '--store', store, '--json']);
    expect(rejected.code).toBe(0);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ runId: result.runId, taskId: 'ok', approved: false, note: 'too long', by: 'cli', next: 'resume' });

    const resumed = await cli(['resume', result.runId, '--store', store]);
    // The draft goes back with the note and the approval asks again: paused once more.
    expect(resumed.code).toBe(5);
    expect(resumed.stderr).toContain('rejected ok by cli: too long — "draft" goes back for another attempt');
    expect(resumed.stderr).toContain('waiting for approval: ok approves draft — Send this reply? (round 2 of 2)');
  });

  it('an edited output that fails the approved task\'s schema is refused in one line, and nothing is written', async () => {
    const store = join(dir, 'schema.db');
    const schemaPlan = {
      ...plan,
      tasks: plan.tasks.map((t) => (t.id === 'draft' ? { ...t, prompt: 'draft [[sim:reply {"text":"hi"}]]', output: { schema: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } } } } : t)),
    };
    const run = await cli(['run', planFile('schema.json', schemaPlan), '--store', store, '--json']);
    expect(run.code).toBe(5);
    const runId = (JSON.parse(run.stdout) as { runId: string }).runId;
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"txt": 1}');
    const refused = await cli(['approve', runId, 'ok', '--output', bad, '--store', store]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.split('\n')).toHaveLength(2);
    expect(refused.stderr).toMatch(new RegExp(`^swarmstate approve: --output ${bad.replace(/[.\\/]/g, '\\$&')}: the edited output of "draft" fails its checks: .*text`));
    expect((await showJson(runId, store)).tasks.find((t) => t.id === 'ok')!.approval).not.toHaveProperty('pending');
  });

  it('a run still going picks up a decision made by another process at once', async () => {
    const store = join(dir, 'live.db');
    const events = join(dir, 'live.ndjson');
    // `other` is slow (its reply takes a minute): the run goes on while the approval waits.
    const livePlan = {
      providers: { sim: { type: 'sim' }, slow: { type: 'sim', sim: { ttftMs: 60_000 } } },
      models: { fast: { provider: 'sim', model: 'sim-fast' }, slow: { provider: 'slow', model: 'sim-fast' } },
      tasks: plan.tasks.map((t) => (t.id === 'other' ? { ...t, model: 'slow' } : t)),
    };
    const child = start(['run', planFile('live.json', livePlan), '--quiet', '--events', events, '--store', store]);
    const lines = () => readFileSync(events, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; taskId?: string; runId?: string; by?: string });
    await until(() => { try { return lines().some((e) => e.type === 'approval:requested'); } catch { return false; } }, 'the approval request');
    const runId = lines()[0]!.runId!;
    const approved = await cli(['approve', runId, 'ok', '--store', store]);
    expect(approved.code).toBe(0);
    expect(approved.stdout).toBe(`approved "ok" of run ${runId}: the process running it picks it up now\n`);
    await until(() => lines().some((e) => e.type === 'task:completed' && e.taskId === 'send'), 'send to complete after the decision');
    expect(lines().find((e) => e.type === 'approval:decided')).toMatchObject({ taskId: 'ok', by: 'cli', outcome: 'approved' });
    child.child.kill('SIGTERM');
    await child.exit;
  });
});
