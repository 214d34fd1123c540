/**
 * `run --ui` and approvals: at a terminal the run waits for the page's decision instead of
 * pausing (holdApprovals), and says where to decide; with --json, or off a terminal, it ends
 * `paused` (exit 5) as any run does. runPlan in this process with a fake terminal, the page over
 * real HTTP on 127.0.0.1.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { runPlan, type RunFlags } from '../../src/cli/runPlan.js';
import { until } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-approve-ui-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const plan = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'draft', model: 'fast', prompt: 'draft a reply [[sim:reply DRAFT]]' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
    { id: 'send', model: 'fast', deps: ['ok', 'draft'], prompt: 'send {{draft}} [[sim:reply SENT]]' },
  ],
};

function sink() {
  let text = '';
  const stream = new Writable({ write: (chunk, _enc, done) => ((text += String(chunk)), done()) });
  return { stream, text: () => text };
}

const flags = (store: string, json = false): RunFlags => ({ seed: 0, json, quiet: false, events: undefined, report: undefined, inspect: undefined, store, redis: undefined, ui: true });

describe('run --ui with an approval', () => {
  it('at a terminal, waits for the decision on the page, then completes (exit 0)', async () => {
    const store = join(dir, 'held.db');
    const out = sink();
    const err = sink();
    const code = runPlan({ plan, source: 'approve.json' }, flags(store), { out: out.stream, err: err.stream, interactive: true, untilStopped: () => Promise.resolve() });
    await until(() => err.text().includes('the run waits until you decide'), 'the run to say it waits');
    const url = /^live page: (\S+)$/m.exec(err.text())![1]!;
    const runId = /^run (\S+)/m.exec(err.text())![1]!;
    expect(err.text()).toContain(`the run waits until you decide on the live page (${url}) or with swarmstate approve ${runId} ok [--reject] [--note <text>] --store ${store}\n`);
    const answer = await fetch(url.replace('/?', '/approve?'), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ taskId: 'ok', approved: true, note: 'from the page' }) });
    expect(answer.status).toBe(200);
    expect(await code).toBe(0);
    expect(out.text()).toMatch(/^status +completed/m);
    expect(err.text()).toContain('approved ok by ui: from the page');
    expect(err.text()).not.toContain('paused');
  });

  it('with --json, or off a terminal, ends paused (exit 5): the page shows the approval but the run does not wait for it', async () => {
    for (const [interactive, json] of [[false, false], [true, true]] as const) {
      const err = sink();
      const out = sink();
      const store = join(dir, `free-${interactive}-${json}.db`);
      const code = await runPlan({ plan, source: 'approve.json' }, flags(store, json), { out: out.stream, err: err.stream, interactive, untilStopped: () => Promise.resolve() });
      expect(code, `interactive ${interactive}, json ${json}`).toBe(5);
      expect(err.text()).not.toContain('the run waits until you decide');
      if (json) expect((JSON.parse(out.text()) as { status: string }).status).toBe('paused');
      else expect(err.text()).toMatch(/^paused: 1 approval waits: ok \(approves draft: Send this reply\?\)$/m);
    }
  });
});

writeFileSync(join(dir, 'approve.json'), JSON.stringify(plan));
