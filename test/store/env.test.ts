/**
 * Which journal a swarm writes: `SWARMSTATE_STORE` is read from `process.env` unless the swarm's
 * `env` object names it. An `env` given for the plan's keys alone must not send the runs to the
 * working directory's `.swarmstate/runs.db` (as it did: each `npm test` left runs there).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { tempDir } from './helpers.js';

const dirs: string[] = [];
afterEach(() => {
  vi.unstubAllEnvs();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A journal file holding one finished run `id`. */
function journalWith(id: string): string {
  const dir = tempDir();
  dirs.push(dir);
  const file = path.join(dir, 'runs.db');
  const store = new SqliteStore(file);
  store.createRun({ id, plan: { tasks: [] }, options: {}, tasksTotal: 0, createdAt: 1 });
  store.setRunStatus(id, 'completed');
  store.close();
  return file;
}

const PLAN = {
  providers: { llm: { type: 'custom', keys: [{ env: 'LLM_KEY' }] } },
  models: { fast: { provider: 'llm', model: 'small' } },
  tasks: [{ id: 'a', model: 'fast', prompt: 'hi' }],
};

describe('SWARMSTATE_STORE', () => {
  it('comes from process.env when the env object given does not name it', async () => {
    const file = journalWith('before');
    vi.stubEnv('SWARMSTATE_STORE', file);
    const swarm = createSwarm({ env: { LLM_KEY: 'sk-test-0123456789' }, providers: { llm: createScriptedProvider(() => 'ok') } });
    expect(swarm.runs().map((r) => r.id)).toEqual(['before']);
    const result = await swarm.run(PLAN).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    const store = new SqliteStore(file, { readOnly: true });
    expect(store.listRuns().map((r) => [r.id, r.status])).toEqual([[result.runId, 'completed'], ['before', 'completed']]);
    store.close();
  });

  it('comes from the env object when it names it, whatever process.env says', () => {
    vi.stubEnv('SWARMSTATE_STORE', journalWith('from-process'));
    const swarm = createSwarm({ env: { SWARMSTATE_STORE: journalWith('from-object') } });
    expect(swarm.runs().map((r) => r.id)).toEqual(['from-object']);
  });
});
