/**
 * A map over a 1,000-line JSONL file and a reduce over it, run by the CLI (a real process) with a
 * real SQLite journal, killed with SIGKILL once the journal shows a few hundred tasks done, then
 * resumed. The journal keeps the map's items (the resume does not expand the map again) and
 * every item completes once: no completed item's call is sent again, and only the calls in flight
 * at the kill are repeated. The kill follows the journal, not the clock.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/index.js';
import { SqliteStore } from '../../src/store/index.js';
import { journaledDone } from '../helpers/journal.js';

const BIN = resolve('bin/swarmstate.js');
const N = 1000;
const IN_FLIGHT = 8;

let sim: SimServer;
let dir: string;
beforeAll(async () => {
  sim = await startSim({ seed: 9, latency: { ttftMs: [2, 10] } });
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-map-resume-'));
});
afterAll(async () => {
  await sim.close();
});

function cli(args: string[]) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, MAP_KEY: 'sk-map-resume-0123456789', SWARMSTATE_STORE: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((r) => child.on('close', (code, signal) => r({ code, signal, stdout, stderr })));
  return { child, done };
}

it('a map over 1,000 JSONL items killed mid-run and resumed runs every item once', { timeout: 300_000 }, async () => {
  writeFileSync(join(dir, 'products.jsonl'), Array.from({ length: N }, (_, i) => JSON.stringify({ sku: `p${i}`, name: `product ${i}` })).join('\n') + '\n');
  writeFileSync(
    join(dir, 'plan.json'),
    JSON.stringify({
      providers: { p: { type: 'anthropic', baseURL: sim.url, keys: [{ env: 'MAP_KEY' }] } },
      models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 32 } },
      defaults: { maxInFlight: IN_FLIGHT },
      tasks: [
        { id: 'describe', kind: 'map', items: { file: 'products.jsonl' }, key: 'sku', model: 'm', prompt: 'Describe {{item.name}} [[sim:reply ITEM-{{item.sku}}]]' },
        { id: 'summary', kind: 'reduce', over: 'describe', fanIn: 16, model: 'm', prompt: 'Merge: {{inputs}} [[sim:reply MERGED]]' },
      ],
    }),
  );
  const checked = await cli(['validate', join(dir, 'plan.json')]).done;
  expect(checked.code, checked.stderr).toBe(0);

  const db = join(dir, 'runs.db');
  const first = cli(['run', join(dir, 'plan.json'), '--json', '--store', db]);
  let ended = false;
  void first.done.then(() => (ended = true));
  while (!ended && journaledDone(db) < 300) await new Promise((r) => setTimeout(r, 20));
  first.child.kill('SIGKILL');
  const killed = await first.done;
  expect(killed.signal, killed.stderr).toBe('SIGKILL');
  let store = new SqliteStore(db);
  const runId = store.listRuns()[0]!.id;
  const doneAtKill = store.getRun(runId)!.tasksDone;
  store.close();
  expect(doneAtKill).toBeGreaterThanOrEqual(300);
  expect(doneAtKill).toBeLessThan(N);

  const resumed = await cli(['resume', runId, '--json', '--store', db]).done;
  expect(resumed.code, resumed.stderr).toBe(0);
  const result = JSON.parse(resumed.stdout) as { status: string; tasks: Record<string, { status: string; output: unknown }> };
  expect(result.status).toBe('completed');
  expect(result.tasks.describe!.output).toEqual(Array.from({ length: N }, (_, i) => `ITEM-p${i}`));
  expect(result.tasks.summary!.output).toBe('MERGED');

  store = new SqliteStore(db);
  const rows = store.loadTasks(runId);
  const attempts = store.loadAttempts(runId);
  store.close();
  // The items were journaled once, when the map expanded, and each completed once.
  const items = rows.filter((r) => r.parent === 'describe');
  expect(items).toHaveLength(N);
  expect(items.every((r) => r.status === 'completed')).toBe(true);
  const completedAt = new Map<string, number>();
  for (const a of attempts) {
    if (a.status !== 'completed' || !a.taskId.startsWith('describe/')) continue;
    expect(completedAt.has(a.taskId), `${a.taskId} completed twice`).toBe(false);
    completedAt.set(a.taskId, a.endedAt!);
  }
  expect(completedAt.size).toBe(N);

  // The simulator's log: no item's call was sent after its completion was journaled, and only
  // calls in flight at the kill (attempts the journal left open) were sent twice.
  const calls = new Map<string, number>();
  const late: string[] = [];
  for (const entry of sim.stats().log) {
    if (!entry.call) continue;
    const taskId = decodeURIComponent(entry.call.split(';')[0]!);
    if (!taskId.startsWith('describe/')) continue;
    calls.set(taskId, (calls.get(taskId) ?? 0) + 1);
    if (entry.at > completedAt.get(taskId)!) late.push(taskId);
  }
  expect(late).toEqual([]);
  expect(calls.size).toBe(N);
  const twice = [...calls].filter(([, n]) => n > 1).map(([id]) => id);
  const interrupted = new Set(attempts.filter((a) => a.endedAt === null || a.status === 'cancelled').map((a) => a.taskId));
  expect(twice.length).toBeLessThanOrEqual(IN_FLIGHT);
  expect(twice.filter((id) => !interrupted.has(id))).toEqual([]);
  expect([...calls.values()].every((n) => n <= 2)).toBe(true);
});
