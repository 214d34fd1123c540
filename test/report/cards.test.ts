/**
 * The cards at the top of the report and of the live page, on a run caught midway: the tasks card
 * is the sum of its breakdown (a map's items counted, the map itself a container said apart), a
 * run in progress says `running`, and a call without a reply yet is in flight, not "no reply".
 * The same events saved and read back when the run was cut short say `unfinished` and no reply.
 */
import { describe, expect, it } from 'vitest';
import { analyze, buildReport, renderReport } from '../../src/report/index.js';
import type { TimedRunEvent } from '../../src/swarm.js';
import { cardsOf } from '../helpers/surfaces.js';

const usage = { inputTokens: 100, outputTokens: 20, cacheWriteTokens: 0, cacheReadTokens: 0 };
const ev = (at: number, e: Record<string, unknown>) => ({ ...e, at }) as unknown as TimedRunEvent;
const call = { provider: 'p', model: 'm', keyId: 'p:k' };

/** `a` and the map `mp` (4 items, `rd` reduces them): mp/0 done, mp/1 and `a` have a call out, the rest wait. */
const events: TimedRunEvent[] = [
  ev(0, { type: 'run:started', runId: 'r-live', tasks: 3, models: { m: { provider: 'p', model: 'm', price: { input: 1, output: 5 } } }, keys: { 'p:k': {} }, deps: { a: [], mp: [], rd: ['mp'] } }),
  ev(1, { type: 'task:queued', taskId: 'a' }),
  ev(1, { type: 'task:queued', taskId: 'mp' }),
  ev(2, { type: 'task:started', taskId: 'a', attempt: 1, model: 'm' }),
  ev(3, { type: 'model:request', taskId: 'a', attempt: 1, turn: 0, ...call }),
  ev(4, { type: 'task:planned', taskId: 'mp', attempt: 1, subtasks: ['mp/0', 'mp/1', 'mp/2', 'mp/3'], depth: 1, container: true }),
  ...['mp/0', 'mp/1', 'mp/2', 'mp/3'].map((id) => ev(4, { type: 'task:queued', taskId: id })),
  ev(5, { type: 'task:started', taskId: 'mp/0', attempt: 1, model: 'm' }),
  ev(6, { type: 'model:request', taskId: 'mp/0', attempt: 1, turn: 0, ...call }),
  ev(20, { type: 'model:response', taskId: 'mp/0', attempt: 1, turn: 0, ...call, usage, costUsd: 0.0002, modelName: 'm' }),
  ev(21, { type: 'task:completed', taskId: 'mp/0', attempt: 1, output: 'x', usage }),
  ev(22, { type: 'task:started', taskId: 'mp/1', attempt: 1, model: 'm' }),
  ev(23, { type: 'model:request', taskId: 'mp/1', attempt: 1, turn: 0, ...call }),
];

describe('the cards of a run in progress', () => {
  it('the tasks card is the sum of its breakdown; the badge says running; calls without a reply are in flight', () => {
    const { main } = renderReport({ events });
    const cards = cardsOf(main);
    // a, mp/0..3 and rd: six tasks; the map is a container, said apart.
    expect(cards.tasks).toBe(6);
    expect(cards.breakdown).toEqual({ completed: 1, running: 2, waiting: 3 });
    expect(Object.values(cards.breakdown).reduce((a, n) => a + n, 0)).toBe(cards.tasks);
    expect(main).toContain('and 1 container');
    expect(cards.status).toBe('running');
    expect(cards).toMatchObject({ requests: 3, attempts: 3, costUsd: 0.0002 });
    expect(main).toMatch(/<div class="k">model requests<\/div><div class="v">3<\/div><div class="d">0 failed, 2 in flight<\/div>/);
    const model = analyze(events);
    expect(model.calls.map((c) => c.outcome)).toEqual(['inflight', 'ok', 'inflight']);
    expect(model.keys[0]!.outcomes).toMatchObject({ ok: 1, other: 0, inflight: 2 });
    // The key and route tables count them in a column of their own.
    expect(main).toMatch(/>in flight<\/th>/);
  });

  it('the same stream saved and read back (the run was cut short): unfinished, and the calls had no reply', () => {
    const cards = cardsOf(buildReport({ events }));
    expect(cards.tasks).toBe(6);
    expect(cards.breakdown).toEqual({ completed: 1, unfinished: 5 });
    expect(cards.status).toBe('unfinished');
    const model = analyze(events, undefined, undefined, { ended: true });
    expect(model.calls.map((c) => c.outcome)).toEqual(['other', 'ok', 'other']);
    expect(buildReport({ events })).not.toMatch(/>in flight<\/th>/);
  });
});
