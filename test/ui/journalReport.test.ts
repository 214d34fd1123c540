/**
 * A run's page rebuilt from its journal (a real SQLite file) against the report of the same run
 * built from its events and result: the same tasks with the same statuses and outputs, the same
 * DAG, the same cards where the journal keeps what they count.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSwarm, type RunResult, type TimedRunEvent } from '../../src/index.js';
import { renderReport } from '../../src/report/html.js';
import { openStoreToRead } from '../../src/store/index.js';
import { journalReport } from '../../src/ui/journalReport.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-journal-report-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const plan = {
  providers: { sim: { type: 'sim', keys: ['sim-journal-report'] } },
  models: { m: { provider: 'sim', model: 'sim-small', maxTokens: 64, price: { input: 1, output: 5 } } },
  tasks: [
    { id: 'a', model: 'm', prompt: 'first [[sim:length 8]]' },
    { id: 'm', kind: 'map', model: 'm', items: { values: ['x', 'y', 'z'] }, deps: ['a'], prompt: 'item {{item}} [[sim:length 4]]' },
    { id: 'bad', model: 'm', prompt: 'no [[sim:error 400]]' },
    { id: 'after', model: 'm', deps: ['bad'], prompt: 'never' },
  ],
};

/** The cards of a rendered report: label -> value. */
function cards(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<div class="card"><div class="k">([^<]*)<\/div><div class="v">([^<]*)<\/div>/g)) out[m[1]!] = m[2]!;
  return out;
}

/** Each DAG node's task and status class. */
function nodes(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/class="dag-node s-([a-z]+)"[^>]* data-task="([^"]+)"/g)) out[m[2]!] = m[1]!;
  return out;
}

describe('a run page rebuilt from the journal', () => {
  it('shows the tasks, statuses, outputs, DAG and counts the report of its events shows', async () => {
    const file = join(dir, 'runs.db');
    const swarm = createSwarm({ store: file });
    const run = swarm.run(plan);
    const events: TimedRunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
    const result: RunResult = await run.result;
    await swarm.close();
    expect(result.status).toBe('partial');

    const store = openStoreToRead(file)!;
    try {
      const record = store.getRun(run.id)!;
      const input = journalReport(record, store.loadTasks(run.id), store.loadAttempts(run.id), record.status);
      expect(input.note).toContain(`run ${run.id} is partial in the journal`);
      const fromJournal = renderReport(input).main;
      const fromEvents = renderReport({ events, result }).main;

      expect(nodes(fromJournal)).toEqual({ a: 'completed', m: 'completed', 'm/0': 'completed', 'm/1': 'completed', 'm/2': 'completed', bad: 'failed', after: 'skipped' });
      expect(nodes(fromJournal)).toEqual(nodes(fromEvents));
      const journalCards = cards(fromJournal);
      // Six tasks (the map is a container, not a task); five requests: `bad`'s one call, answered 400, is journaled with its failure.
      expect(journalCards).toMatchObject({ tasks: '6', 'model requests': '5', retries: '0' });
      for (const card of ['tasks', 'model requests', 'retries', 'cost', 'tokens', 'budget', 'cache read share']) expect(journalCards[card], card).toBe(cards(fromEvents)[card]);
      // The DAG's edges: a -> m, bad -> after, and m to each of its 3 items.
      const edges = (html: string) => (html.match(/<path class="dag-edge"/g) ?? []).length;
      expect(edges(fromJournal)).toBe(5);
      expect(edges(fromEvents)).toBe(5);
      // Outputs on click, the failure and the skip.
      expect(fromJournal).toContain(String(result.tasks['a']!.output).slice(0, 40));
      expect(fromJournal).toContain('bad_request');
      expect(fromJournal).toMatch(/<h3>Skipped tasks<\/h3>.*after/s);
    } finally {
      store.close();
    }
  });
});
