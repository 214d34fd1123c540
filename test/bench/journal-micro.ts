/**
 * Micro-benchmark of the run journal's hot path: the Journal recording task:started then
 * task:completed for 10,000 tasks (a started write is batched, a completion commits at once, so
 * this is one SQLite commit per task), on SqliteStore (a file in a temp dir, WAL,
 * synchronous=NORMAL) and on MemoryStore. Also the cost of an event the journal ignores.
 * Not wired into anything; prints one JSON line.
 *   node --import tsx test/bench/journal-micro.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Usage } from '../../machines/protocol.js';
import { Journal, MemoryStore, SqliteStore, type Store } from '../../src/store/index.js';

const TASKS = 10_000;
const USAGE: Usage = { inputTokens: 1200, outputTokens: 350, cacheWriteTokens: 0, cacheReadTokens: 800 };
const OUTPUT = 'x'.repeat(1_000); // a 1 kB answer

function run(store: Store): number {
  store.createRun({ id: 'bench', plan: { tasks: TASKS }, options: {}, tasksTotal: TASKS, createdAt: Date.now() });
  const journal = new Journal(store, 'bench');
  const t0 = performance.now();
  for (let i = 0; i < TASKS; i++) {
    const taskId = `t${i}`;
    journal.record({ type: 'task:started', taskId, attempt: 1, model: 'm', route: 'p/m' });
    journal.record({ type: 'task:completed', taskId, attempt: 1, output: OUTPUT, usage: USAGE, costUsd: 0.001 });
  }
  store.flush();
  return ((performance.now() - t0) * 1000) / TASKS;
}

function ignored(store: Store): number {
  const journal = new Journal(store, 'bench');
  const event = { type: 'model:request' as const, taskId: 't', attempt: 1, turn: 1, provider: 'p', model: 'm', keyId: 'p:1' };
  const n = 1_000_000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) journal.record(event);
  return ((performance.now() - t0) * 1e6) / n;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarmstate-journal-bench-'));
try {
  const sqlite = new SqliteStore(path.join(dir, 'runs.db'));
  const sqliteUs = run(sqlite);
  sqlite.close();
  const bytes = fs.statSync(path.join(dir, 'runs.db')).size;
  const memory = new MemoryStore();
  const memoryUs = run(memory);
  const ignoredNs = ignored(memory);
  memory.close();
  console.log(
    JSON.stringify({
      tasks: TASKS,
      outputBytes: OUTPUT.length,
      sqliteUsPerTask: Number(sqliteUs.toFixed(2)),
      memoryUsPerTask: Number(memoryUs.toFixed(2)),
      ignoredEventNs: Number(ignoredNs.toFixed(1)),
      dbBytes: bytes,
    }),
  );
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
