/**
 * The report's approvals and function steps: a row per decision (who, when, note, what it did),
 * a waiting approval's question and draft (no buttons in a file), and a timeline lane of its own
 * for each function of the function steps, which hold no key. From a real run on the simulator
 * (approvals decided from code) and from literal streams.
 */
import { describe, expect, it } from 'vitest';
import { buildReport } from '../../src/report/index.js';
import { createSwarm, type TimedRunEvent } from '../../src/index.js';

const ev = (at: number, e: Record<string, unknown>) => ({ ...e, at }) as unknown as TimedRunEvent;
const T0 = Date.UTC(2026, 0, 5, 10, 20, 30);
const count = (s: string, sub: string) => s.split(sub).length - 1;

describe('approvals in the report', () => {
  it('has a row per decision of a real run: who, when, note, outcome', async () => {
    const swarm = createSwarm({ seed: 1, store: false });
    try {
      const run = swarm.run(
        {
          providers: { sim: { type: 'sim' } },
          models: { fast: { provider: 'sim', model: 'sim-fast' } },
          tasks: [
            { id: 'draft', model: 'fast', prompt: 'draft [[sim:reply DRAFT]]' },
            { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send <this> reply?' },
          ],
        },
        { holdApprovals: true },
      );
      const events: TimedRunEvent[] = [];
      run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
      run.events.on('approval:requested', (e) => queueMicrotask(() => run.approve('ok', e.round === 1 ? { approved: false, note: 'too <long>' } : { approved: true, output: 'SHORT' })));
      const result = await run.result;
      expect(result.status).toBe('completed');
      const page = buildReport({ events, result });
      const section = page.slice(page.indexOf('<section id="approvals">'), page.indexOf('</section>', page.indexOf('<section id="approvals">')));
      expect(section).toContain('<h2>Approvals <span class="count">0 waiting</span></h2>');
      const rows = [...section.matchAll(/<tr><td class="id">([^<]*)<\/td><td class="id">([^<]*)<\/td><td>([^<]*)<\/td><td>([^<]*)<\/td><td>([^<]*)<\/td><td>([^<]*)<\/td><td class="msg">([^<]*)<\/td><td>([^<]*)<\/td><\/tr>/g)].map((m) => m.slice(1));
      expect(rows.map((r) => [r[0], r[1], r[2], r[3], r[4], r[6], r[7]])).toEqual([
        ['ok', 'draft', '1 of 2', 'rejected: sent back', 'code', 'too &lt;long&gt;', ''],
        ['ok', 'draft', '2 of 2', 'approved', 'code', '', 'yes'],
      ]);
      for (const r of rows) expect(r[5]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
      // A file has no buttons.
      expect(page).not.toContain('class="approve-form"');
    } finally {
      await swarm.close();
    }
  });

  it('shows a waiting approval with its question and draft, and how to decide it', () => {
    const events = [
      ev(T0, { type: 'run:started', runId: 'r-wait', tasks: 2, models: {}, keys: {}, deps: { draft: [], ok: ['draft'] } }),
      ev(T0 + 5, { type: 'task:completed', taskId: 'draft', attempt: 1, output: 'the <b>draft</b>', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } }),
      ev(T0 + 6, { type: 'approval:requested', taskId: 'ok', attempt: 1, approves: 'draft', prompt: 'Send it?', draft: 'the <b>draft</b>', round: 1, maxRounds: 2 }),
      ev(T0 + 7, { type: 'run:completed', status: 'paused' }),
    ];
    const page = buildReport({ events });
    expect(page).toContain('<h2>Approvals <span class="count">1 waiting</span></h2>');
    expect(page).toContain('<h3><code>ok</code> waits: Send it?</h3><p class="note">The draft of <code>draft</code>:</p><pre class="output">the &lt;b&gt;draft&lt;/b&gt;</pre>');
    expect(page).toContain('<p class="note">No decision yet.</p>');
    expect(page).toContain('Decide with <code>swarmstate approve &lt;runId&gt; &lt;taskId&gt; [--reject] [--note &lt;text&gt;]</code>');
    expect(page).not.toContain('class="approve-form"');
  });

  it('a run without approvals has no Approvals section', () => {
    const page = buildReport({ events: [ev(T0, { type: 'run:started', runId: 'r-none', tasks: 0, models: {}, keys: {} })] });
    expect(page).not.toContain('id="approvals"');
  });
});

describe('function steps on the timeline', () => {
  it('gives each function a lane of its own, a bar per attempt, stacked when they overlap', () => {
    const events = [
      ev(T0, { type: 'run:started', runId: 'r-fn', tasks: 3, models: {}, keys: {}, deps: { a: [], b: [], c: [] } }),
      ev(T0 + 100, { type: 'task:started', taskId: 'a', attempt: 1, model: 'fn:fetch', route: 'fn/fetch', fn: 'fetch' }),
      ev(T0 + 150, { type: 'task:started', taskId: 'b', attempt: 1, model: 'fn:fetch', route: 'fn/fetch', fn: 'fetch' }),
      ev(T0 + 300, { type: 'task:failed', taskId: 'a', attempt: 1, error: { code: 'fn_error', message: 'boom <x>', retryable: true }, willRetry: true }),
      ev(T0 + 400, { type: 'task:completed', taskId: 'b', attempt: 1, output: '1', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } }),
      ev(T0 + 500, { type: 'task:started', taskId: 'a', attempt: 2, model: 'fn:fetch', route: 'fn/fetch', fn: 'fetch' }),
      ev(T0 + 600, { type: 'task:completed', taskId: 'a', attempt: 2, output: '2', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } }),
      ev(T0 + 650, { type: 'task:started', taskId: 'c', attempt: 1, model: 'fn:write', route: 'fn/write', fn: 'write' }),
      ev(T0 + 900, { type: 'task:completed', taskId: 'c', attempt: 1, output: 'null', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } }),
      ev(T0 + 1000, { type: 'run:completed', status: 'completed' }),
    ];
    const page = buildReport({ events });
    expect(page).not.toContain('No model calls in this stream');
    expect(page).toContain('<text class="grp" x="10" y="38">function steps</text>');
    expect(page).toContain('<text x="10" y="58">fn/fetch</text><text class="meta" x="10" y="70">3 steps</text>');
    expect(page).toMatch(/<text x="10" y="\d+">fn\/write<\/text><text class="meta" x="10" y="\d+">1 step<\/text>/);
    expect(count(page, 'fn-step')).toBe(4);
    // The failed attempt: its own colour, its error in the tip, escaped; the overlapping `b` a track below.
    expect(page).toContain('<rect class="o-other fn-step" x="104" y="52" width="208" height="10" data-tip="a · attempt 1 · fn/fetch · 0.10 s to 0.30 s (200 ms) · fn_error: boom &lt;x&gt;"/>');
    expect(page).toContain('<rect class="o-ok fn-step" x="156" y="64" width="260" height="10" data-tip="b · attempt 1 · fn/fetch · 0.15 s to 0.40 s (250 ms) · completed"/>');
    expect(page).toContain('Function steps hold no key: one lane per function, a bar per attempt.');
    // A model task on a provider named `fn` (route `fn/<model>`) is not a function step.
    const modelOnFn = buildReport({
      events: [
        ev(T0, { type: 'run:started', runId: 'r-fn2', tasks: 1, models: {}, keys: {}, deps: { m: [] } }),
        ev(T0 + 100, { type: 'task:started', taskId: 'm', attempt: 1, model: 'small', route: 'fn/sim-fast' }),
        ev(T0 + 400, { type: 'task:completed', taskId: 'm', attempt: 1, output: 'x', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 } }),
        ev(T0 + 500, { type: 'run:completed', status: 'completed' }),
      ],
    });
    expect(count(modelOnFn, 'fn-step')).toBe(0);
    expect(modelOnFn).not.toContain('function steps</text>');
  });
});
