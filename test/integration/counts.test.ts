/**
 * Counts that add up on every surface, on real SQLite journals (an in-process scripted provider):
 * a retry adds its attempts and requests to its tasks and to the totals, and a map or reduce that
 * expands is a container, not a task: no attempts, no requests, counted apart. The result
 * (`--json`), the journal's rows, `show`, the summary and the report say the same numbers.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm, ProviderError } from '../../src/index.js';
import { MemoryStore } from '../../src/store/index.js';
import type { TimedRunEvent } from '../../src/swarm.js';
import { journalOracle, jsonSurface, reportCards, showSurface, summarySurface } from '../helpers/surfaces.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-counts-'));
const env = { COUNTS_KEY: 'sk-counts-test-key' };

const base = {
  providers: { p: { type: 'anthropic', keys: [{ env: 'COUNTS_KEY' }] } },
  models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 } },
  defaults: { maxRetries: 0, maxInFlight: 2 },
};

async function collect(run: { events: { on(type: '*', fn: (type: string, e: unknown) => void): void }; result: Promise<unknown> }) {
  const events: TimedRunEvent[] = [];
  run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
  const result = (await run.result) as import('../../machines/tasks/results.js').RunResult;
  return { events, result };
}

describe('a retry', () => {
  it('adds its attempts and requests to the task and the totals, in the result, the journal, show, the summary and the report', async () => {
    const file = join(dir, 'retry.db');
    let life = 1;
    // `b` is refused (a 400, not retried) in the first life only: `c` after it is skipped.
    const provider = createScriptedProvider({
      reply: (req) => {
        if (req.meta.taskId === 'b' && life === 1) throw new ProviderError('bad_request', 'refused once', { status: 400 });
        return `answer of ${req.meta.taskId}`;
      },
    });
    const plan = {
      ...base,
      tasks: [
        { id: 'a', model: 'm', prompt: 'first' },
        { id: 'b', model: 'm', deps: ['a'], prompt: 'second' },
        { id: 'c', model: 'm', deps: ['b'], prompt: 'third {{b}}' },
        { id: 'd', model: 'm', deps: ['a'], prompt: 'fourth' },
      ],
    };
    const swarm = createSwarm({ env, providers: { p: provider }, store: file, backoff: { baseMs: 1, maxMs: 2 } });
    const first = await collect(swarm.run(plan));
    expect(first.result.status).toBe('partial');
    expect(journalOracle(file, first.result.runId)).toMatchObject({ tasks: 4, completed: 2, failed: 1, skipped: 1, attempts: 3, requests: 3 });
    expect(journalOracle(file, first.result.runId).perTask.b).toEqual({ status: 'failed', container: false, attempts: 1, requests: 1, retries: 0 });

    life = 2;
    const again = await collect(swarm.retry(first.result.runId));
    await swarm.close();
    const runId = again.result.runId;
    const expected = { tasks: 4, completed: 4, failed: 0, skipped: 0, cancelled: 0, containers: 0, attempts: 5, requests: 5, retries: 0 };
    const b = { status: 'completed', container: false, attempts: 2, requests: 2, retries: 0 };

    expect(journalOracle(file, runId)).toMatchObject(expected);
    expect(journalOracle(file, runId).perTask.b).toEqual(b);
    const json = jsonSurface(again.result);
    expect(json.totals).toMatchObject(expected);
    expect(json.perTask.b).toEqual(b);
    expect(again.result.totals.requests).toBe(first.result.totals.requests + 2);
    expect(summarySurface(again.result, again.events)).toMatchObject(expected);
    const shown = await showSurface(file, runId);
    expect(shown.totals).toMatchObject(expected);
    expect(shown.perTask.b).toEqual(b);
    // The report of the retry's own events (the page a person opens on it) counts the whole run.
    const cards = reportCards(again.events);
    expect(cards).toMatchObject({ tasks: 4, requests: 5, attempts: 5, retries: 0, status: 'completed' });
    expect(cards.breakdown).toEqual({ completed: 4 });
    expect(reportCards(again.events, again.result)).toMatchObject({ tasks: 4, requests: 5, attempts: 5 });
    // Every surface's cost is the journal's spend (shown to 4 digits: the report and the summary round).
    const usd = journalOracle(file, runId).costUsd!;
    expect(usd).toBeGreaterThan(0);
    expect(again.result.totals.costUsd).toBeCloseTo(usd, 8);
    expect(shown.totals.costUsd).toBeCloseTo(usd, 8);
  });
});

describe('the in-memory journal', () => {
  it('keeps a failed attempt\'s requests as the SQLite one does: a retry adds to them', async () => {
    const store = new MemoryStore();
    let life = 1;
    const provider = createScriptedProvider({
      reply: (req) => {
        if (req.meta.taskId === 'b' && life === 1) throw new ProviderError('bad_request', 'refused once', { status: 400 });
        return 'fine';
      },
    });
    const swarm = createSwarm({ env, providers: { p: provider }, store });
    const plan = { ...base, tasks: [{ id: 'a', model: 'm', prompt: 'first' }, { id: 'b', model: 'm', prompt: 'second' }] };
    const first = await swarm.run(plan).result;
    expect(store.loadTasks(first.runId).find((r) => r.taskId === 'b')).toMatchObject({ status: 'failed', requests: 1, retries: 0 });
    life = 2;
    const again = await swarm.retry(first.runId).result;
    await swarm.close();
    expect(store.loadTasks(first.runId).find((r) => r.taskId === 'b')).toMatchObject({ status: 'completed', requests: 2 });
    expect(again.tasks.b).toMatchObject({ attempts: 2, requests: 2 });
    expect(again.totals).toMatchObject({ tasks: 2, attempts: 3, requests: 3 });
  });
});

describe('map and reduce containers', () => {
  it('run no attempt and send no request: they are counted apart from the tasks, their items and groups are the tasks', async () => {
    const file = join(dir, 'containers.db');
    const provider = createScriptedProvider({ reply: (req) => `out ${req.meta.taskId}` });
    const plan = {
      ...base,
      tasks: [
        { id: 'a', model: 'm', prompt: 'alone' },
        { id: 'mp', kind: 'map', model: 'm', items: { values: ['x', 'y', 'z'] }, prompt: 'item {{item}}' },
        { id: 'rd', kind: 'reduce', model: 'm', over: 'mp', fanIn: 2, prompt: 'merge' },
      ],
    };
    const swarm = createSwarm({ env, providers: { p: provider }, store: file });
    const { events, result } = await collect(swarm.run(plan));
    await swarm.close();
    expect(result.status).toBe('completed');
    // a, mp/0..2, rd/L1/0, rd/L1/1, rd/L2/0: seven tasks, one request each; mp and rd contain them.
    const expected = { tasks: 7, completed: 7, failed: 0, skipped: 0, cancelled: 0, containers: 2, attempts: 7, requests: 7, retries: 0 };
    const container = { status: 'completed', container: true, attempts: 0, requests: 0, retries: 0 };
    expect(journalOracle(file, result.runId)).toMatchObject(expected);
    const json = jsonSurface(result);
    expect(json.totals).toMatchObject(expected);
    expect(json.perTask.mp).toEqual(container);
    expect(json.perTask.rd).toEqual(container);
    expect(json.perTask['mp/0']).toEqual({ status: 'completed', container: false, attempts: 1, requests: 1, retries: 0 });
    expect(summarySurface(result, events)).toMatchObject(expected);
    const shown = await showSurface(file, result.runId);
    expect(shown.totals).toMatchObject(expected);
    expect(shown.perTask.mp).toEqual(container);
    expect(shown.text.split('\n')[0]).toMatch(/^run \S+ {2}completed {2}7\/7 done {2}\$/);
    const cards = reportCards(events);
    expect(cards).toMatchObject({ tasks: 7, requests: 7, attempts: 7, status: 'completed' });
    expect(cards.breakdown).toEqual({ completed: 7 });
  });
});
