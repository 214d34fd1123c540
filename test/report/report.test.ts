/**
 * The HTML report of a real run (sim provider over loopback, a scripted provider, a shared tool):
 * one bar per model call, every outcome class coloured, the header's numbers, the tool bus and
 * stage tables, and no markup from the stream reaching the page.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { analyze, buildReport, OUTCOMES, stageOf } from '../../src/report/index.js';
import type { TimedRunEvent } from '../../src/index.js';
import { HOSTILE, recordRun, type RecordedRun } from './fixture.js';

const count = (html: string, needle: string) => html.split(needle).length - 1;

describe('the report of a real run', () => {
  let run: RecordedRun;
  let html: string;
  beforeAll(async () => {
    run = await recordRun();
    html = buildReport({ events: run.events, result: run.result });
  });

  it('draws exactly one bar per model:request', () => {
    const requests = run.events.filter((e) => e.type === 'model:request').length;
    expect(requests).toBeGreaterThan(10);
    expect(count(html, 'data-call="')).toBe(requests);
    expect(new Set([...html.matchAll(/data-call="(\d+)"/g)].map((m) => m[1])).size).toBe(requests);
  });

  it('pairs every request with its reply and colours each outcome class', () => {
    const model = analyze(run.events, run.result);
    expect(model.calls.every((c) => !c.open)).toBe(true);
    // A finished run has no call in flight.
    for (const outcome of OUTCOMES.filter((o) => o !== 'inflight')) {
      expect(model.calls.some((c) => c.outcome === outcome), outcome).toBe(true);
      expect(html).toContain(`class="o-${outcome}"`);
    }
    const errors = run.events.filter((e) => e.type === 'model:error').length;
    expect(model.calls.filter((c) => c.outcome !== 'ok').length).toBe(errors);
  });

  it('shows a message carrying markup as text, never as markup', () => {
    expect(run.events.some((e) => e.type === 'task:failed' && e.error.message.includes(HOSTILE))).toBe(true);
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<script>alert');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;');
    // Two script elements of our own (the data block and the code), and no other closing tag.
    expect(count(html, '</script>')).toBe(2);
  });

  it('heads the page with the run id, status, requests, 429s, retries and the result cost', () => {
    const model = analyze(run.events, run.result);
    expect(html).toContain(run.result.runId);
    expect(html).toContain('<span class="badge partial">partial</span>');
    expect(model.requests).toBe(run.result.totals.requests);
    expect(model.retries).toBe(run.result.totals.retries);
    expect(model.byStatus).toMatchObject({ completed: 7, failed: 1, skipped: 1 });
    expect(model.spend.costUsd).toBeCloseTo(run.result.totals.costUsd!, 8);
    expect(html).toContain(`$${run.result.totals.costUsd!.toFixed(4)}`);
    const card = (k: string) => html.match(new RegExp(`<div class="k">${k}</div><div class="v">([^<]*)</div>`))?.[1];
    expect(card('model requests')).toBe(String(model.requests));
    expect(card('429s')).toBe(String(run.events.filter((e) => e.type === 'model:error' && e.error.code === 'rate_limited').length));
    expect(card('retries')).toBe(String(model.retries));
  });

  it('counts tool calls requested against executions per tool', () => {
    const model = analyze(run.events, run.result);
    const lookup = model.tools.find((t) => t.name === 'lookup')!;
    expect(lookup.called).toBe(run.events.filter((e) => e.type === 'tool:called').length);
    expect(lookup.executions).toBe(run.events.filter((e) => e.type === 'tool:result').length);
    expect(lookup.cached + lookup.shared).toBeGreaterThan(0);
    expect(lookup.called - lookup.executions).toBe(lookup.cached + lookup.shared);
    expect(html).toContain('<h2>Tool bus</h2>');
  });

  it('lists breaker transitions of the route that failed twice, and the key that backed off', () => {
    const model = analyze(run.events, run.result);
    const edge = model.routes.find((r) => r.route === 'edge/edge-1')!;
    expect(edge.transitions.map((t) => t.to).slice(0, 2)).toEqual(['open', 'halfOpen']);
    expect(edge.open.length).toBeGreaterThan(0);
    expect(html).toContain('<b>open</b> after 2 failures');
    expect(model.keys.some((k) => k.backoff.length > 0 && k.outcomes.rate_limited > 0)).toBe(true);
    expect(count(html, 'class="backoff"')).toBeGreaterThan(1); // the legend's swatch and at least one span
  });

  it('groups tasks by stage with counts by status and prices cache reads', () => {
    const model = analyze(run.events, run.result);
    const stages = Object.fromEntries(model.stages.map((s) => [s.stage, s]));
    expect(stages['fetch']!.tasks).toBe(3);
    expect(stages['fetch']!.byStatus.completed).toBe(3);
    expect(stages['edge']!.byStatus).toMatchObject({ completed: 1, failed: 1 });
    expect(stages['after']!.byStatus.skipped).toBe(1);
    expect(stages['final']!.tasks).toBe(1); // "final" has no dot: a stage of its own, named by the id
    const edgeSpend = model.byModel.find(([name]) => name === 'edge')![1];
    expect(edgeSpend.usage.cacheReadTokens).toBe(120);
    // The reply, and the timeout and the reset before it, each charged its worst case: a bound of
    // 25 input tokens ("x": 1 byte + 8 + 16) at the cache-write price (1.25 x 0.5) and 128 output at
    // 2 ($0.000271625 each; the report keeps sums to 8 decimals).
    expect(edgeSpend.costUsd).toBeCloseTo((40 * 0.5 + 8 * 2 + 120 * 0.05) / 1e6 + (2 * (25 * 0.625 + 128 * 2)) / 1e6, 7);
  });
});

describe('stages, pairing and keys on a hand-written stream', () => {
  const origin = 1_700_000_000_000;
  const ev = (at: number, e: Record<string, unknown>) => ({ ...e, at: origin + at }) as unknown as TimedRunEvent;
  const call = (at: number, taskId: string, keyId: string, extra: Record<string, unknown> = {}) =>
    ev(at, { type: 'model:request', taskId, attempt: 1, turn: 0, provider: 'p', model: 'm', keyId, ...extra });
  const ok = (at: number, taskId: string, keyId: string) =>
    ev(at, { type: 'model:response', taskId, attempt: 1, turn: 0, provider: 'p', model: 'm', keyId, usage: { inputTokens: 10, outputTokens: 5, cacheWriteTokens: 0, cacheReadTokens: 0 } });

  it('takes the stage from the id after its first dot, or the whole id when it has none', () => {
    expect(stageOf('kettle.translate.fr', 'fast')).toBe('translate.fr');
    expect(stageOf('kettle.extract', 'fast')).toBe('extract');
    expect(stageOf('report', 'smart')).toBe('report'); // its id, not its model's name (which hid the task)
    expect(stageOf('trailing.', undefined)).toBe('trailing.');
  });

  it('pairs a retried call with its own reply and leaves an unanswered one open to the end', () => {
    const events = [
      ev(0, { type: 'run:started', runId: 'r1', tasks: 1, keys: { 'p:k1': { rpm: 10 } }, models: { fast: { provider: 'p', model: 'm', price: { input: 1, output: 1 } } } }),
      ev(1, { type: 'task:started', taskId: 't.a', attempt: 1, model: 'fast' }),
      call(10, 't.a', 'p:k1'),
      ev(20, { type: 'model:error', taskId: 't.a', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:k1', error: { code: 'overloaded', message: 'busy', retryable: true } }),
      call(30, 't.a', 'p:k1'),
      ok(45, 't.a', 'p:k1'),
      call(50, 't.a', 'p:k1', { turn: 1 }),
    ];
    // A saved stream that stops there: the run was cut short, the last call had no reply.
    const model = analyze(events, undefined, undefined, { ended: true });
    expect(model.calls.map((c) => [c.start, c.end, c.outcome, c.open])).toEqual([
      [10, 20, 'server', false],
      [30, 45, 'ok', false],
      [50, 50, 'other', true],
    ]);
    expect(model.calls[1]!.costUsd).toBeCloseTo(15 / 1e6, 12);
    expect(model.status).toBe('unfinished');
    // The same events while the run goes: the call is in flight, the run running.
    const live = analyze(events);
    expect(live.calls[2]!.outcome).toBe('inflight');
    expect(live.status).toBe('running');
  });

  it('measures a key against its rpm limit over its busiest 60 s window', () => {
    const events = [ev(0, { type: 'run:started', runId: 'r2', tasks: 1, keys: { 'p:k1': { rpm: 4 } } })];
    // 3 calls in the first minute, then 4 within 30 s: the busiest window holds 4.
    for (const at of [0, 20_000, 40_000, 90_000, 100_000, 110_000, 120_000]) events.push(call(at, `t${at}`, 'p:k1'), ok(at + 1000, `t${at}`, 'p:k1'));
    events.push(ev(130_000, { type: 'run:completed', status: 'completed' }));
    const key = analyze(events).keys[0]!;
    expect(key.peak60).toBe(4);
    expect(key.busyMs).toBe(7000);
    expect(key.tracks).toBe(1);
    expect(buildReport({ events })).toContain('<td class="n">4 / 4</td>');
  });

  it('names a key set aside (and one revoked) in the keys section, with how long it met nothing but 429s', () => {
    const limited = (at: number, keyId: string) =>
      ev(at, { type: 'model:error', taskId: 'a', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId, error: { code: 'rate_limited', message: '429', retryable: true } });
    const events = [
      ev(0, { type: 'run:started', runId: 'r3', tasks: 1, keys: { 'p:k1': {}, 'p:k2': {}, 'p:k3': {} } }),
      call(10, 'a', 'p:k1'),
      limited(20, 'p:k1'),
      call(30, 'a', 'p:k1'),
      limited(40, 'p:k1'),
      ev(120_040, { type: 'key:state', keyId: 'p:k1', state: 'setAside' }),
      ev(120_040, { type: 'key:set-aside', keyId: 'p:k1', provider: 'p', rateLimitedMs: 120_020, responses: 2 }),
      ev(120_050, { type: 'key:revoked', keyId: 'p:k2' }),
      call(120_060, 'a', 'p:k3'),
      ok(120_070, 'a', 'p:k3'),
      ev(120_080, { type: 'run:completed', status: 'completed' }),
    ];
    const model = analyze(events);
    expect(model.keys.map((k) => [k.keyId, k.setAside, k.revokedAt])).toEqual([
      ['p:k1', { at: 120_040, rateLimitedMs: 120_020, responses: 2 }, undefined],
      ['p:k2', undefined, 120_050],
      ['p:k3', undefined, undefined],
    ]);
    const page = buildReport({ events });
    const keys = page.slice(page.indexOf('<h2>Keys</h2>'), page.indexOf('</section>', page.indexOf('<h2>Keys</h2>')));
    expect(keys).toContain('<td class="id">p:k1 (set aside after 2 min 00 s of nothing but 429s, 2 responses)</td>');
    expect(keys).toContain('<td class="id">p:k2 (revoked)</td>');
    expect(keys).toContain('<td class="id">p:k3</td>');
    // The key machine's chart counts it in its state.
    expect(model.machineStates['key']).toEqual({ 'key.setAside': 1, 'key.ready': 2 });
  });

  it('escapes key ids, routes, tool names and reasons from a stream that was tampered with', () => {
    const bad = '"><svg onload=alert(1)>';
    const events = [
      ev(0, { type: 'run:started', runId: bad, tasks: 1, keys: { [bad]: { rpm: bad, concurrency: bad } }, maxInFlight: bad }),
      call(1, bad, bad, { provider: bad, model: bad }),
      ev(2, { type: 'tool:called', taskId: bad, name: bad, shared: false }),
      ev(3, { type: 'breaker:open', route: bad, cooldownMs: 10, failures: bad }),
      ev(4, { type: 'task:skipped', taskId: 'x.y', reason: bad }),
      ev(5, { type: 'run:cancelled', reason: bad }),
    ];
    const page = buildReport({ events, title: bad });
    expect(page).not.toContain('<svg onload');
    // Outside the JSON data block (where `<` is \u003c) every occurrence is escaped text.
    const markup = page.replace(/<script type="application\/json"[^]*?<\/script>/, '');
    expect(count(markup, 'onload')).toBe(count(markup, '&quot;&gt;&lt;svg onload=alert(1)&gt;'));
    expect(page).toContain('\\u003csvg onload');
    expect(page).toContain('&quot;&gt;&lt;svg onload=alert(1)&gt;');
  });

  it('keeps a run of 5,000 calls small: one short element per bar', () => {
    const events = [ev(0, { type: 'run:started', runId: 'big', tasks: 5000, keys: { 'p:k1': { concurrency: 8 }, 'p:k2': { concurrency: 8 } } })];
    for (let i = 0; i < 5000; i++) {
      const key = i % 2 ? 'p:k1' : 'p:k2';
      events.push(call(i * 10, `item${i}.step`, key), ok(i * 10 + 35, `item${i}.step`, key));
    }
    const page = buildReport({ events });
    expect(count(page, 'data-call="')).toBe(5000);
    // About 750 kB of bars; the drawn DAG (400 tasks at most) and the task list (1,000 rows at most) add a capped 300 kB.
    expect(page.length).toBeLessThan(1_300_000);
    expect(count(page, 'class="dag-node')).toBe(400);
    expect(count(page, '<details class="task"')).toBe(1000);
  });

  it('renders an empty stream without throwing', () => {
    const page = buildReport({ events: [] });
    expect(page).toContain('No model calls in this stream.');
    expect(count(page, 'data-call="')).toBe(0);
  });
});
