/**
 * `createSwarm({ retention })`: the swarm prunes its journal once, when its first run (or resume,
 * or retry) has started and holds its lock, so that run is never a candidate; then VACUUM. On a
 * real SQLite file with a scripted provider.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { rawDb } from '../helpers/sqlite.js';
import { tempDir, usage } from './helpers.js';

const DAY = 86_400_000;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const PLAN = {
  providers: { llm: { type: 'custom' } },
  models: { fast: { provider: 'llm', model: 'small' } },
  tasks: [{ id: 'a', model: 'fast', prompt: 'hi' }],
};

/** A journal of old runs, newest first: d3 (3 days), gone (4 days, interrupted), d5, d7 (each with 100 KB of output). */
function journal(): string {
  const dir = tempDir();
  dirs.push(dir);
  const file = path.join(dir, 'runs.db');
  const store = new SqliteStore(file);
  const now = Date.now();
  for (const [id, days] of [['d7', 7], ['d5', 5], ['gone', 4], ['d3', 3]] as const) {
    store.createRun({ id, plan: PLAN, options: {}, tasksTotal: 1, createdAt: now - days * DAY });
    store.taskCompleted(id, 'a', 1, 'x'.repeat(100_000), usage(1, 1), null, 1, 0, now);
    if (id !== 'gone') store.setRunStatus(id, 'completed');
  }
  store.close();
  return file;
}

const idsIn = (file: string) => {
  const store = new SqliteStore(file, { readOnly: true });
  const ids = store.listRuns().map((r) => r.id);
  store.close();
  return ids;
};

const freePages = (file: string) => {
  const db = rawDb(file, { readOnly: true });
  const free = db.pragma('freelist_count');
  db.close();
  return free;
};

describe('createSwarm({ retention })', () => {
  it('keep: the first run prunes all but the n newest (itself among them), never an interrupted run, then VACUUMs', async () => {
    const file = journal();
    const swarm = createSwarm({ store: file, retention: { keep: 2 }, providers: { llm: createScriptedProvider(() => 'ok') } });
    const first = await swarm.run(PLAN).result;
    expect(idsIn(file)).toEqual([first.runId, 'd3', 'gone']);
    expect(freePages(file)).toBe(0);
    // Once per swarm: its second run prunes nothing.
    const second = await swarm.run(PLAN).result;
    await swarm.close();
    expect(idsIn(file)).toEqual([second.runId, first.runId, 'd3', 'gone']);
  });

  it('olderThanMs: the runs started longer ago than that', async () => {
    const file = journal();
    const swarm = createSwarm({ store: file, retention: { olderThanMs: 4.5 * DAY }, providers: { llm: createScriptedProvider(() => 'ok') } });
    const run = await swarm.run(PLAN).result;
    await swarm.close();
    expect(idsIn(file)).toEqual([run.runId, 'd3', 'gone']);
  });

  it('nothing is pruned without it, nor before a run starts (a listing)', async () => {
    const file = journal();
    const swarm = createSwarm({ store: file, providers: { llm: createScriptedProvider(() => 'ok') } });
    await swarm.run(PLAN).result;
    await swarm.close();
    expect(idsIn(file)).toHaveLength(5);
    const lister = createSwarm({ store: file, retention: { keep: 0 } });
    expect(lister.runs()).toHaveLength(5);
    await lister.close();
    expect(idsIn(file)).toHaveLength(5);
  });

  it('a rule that is not one is refused by createSwarm', () => {
    expect(() => createSwarm({ retention: { keep: -1 } })).toThrow(new TypeError('createSwarm({ retention }): keep must be a whole number of runs, 0 or more (got -1)'));
    expect(() => createSwarm({ retention: {} })).toThrow(new TypeError('createSwarm({ retention }): a prune rule needs olderThanMs or keep'));
  });
});
