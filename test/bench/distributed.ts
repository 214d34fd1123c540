/**
 * Distributed scaling: the same 2,000-task plan run by a coordinator (`swarmstate run --redis`)
 * and 1, 2 or 4 worker processes (`swarmstate worker --concurrency 16`) on a private Redis,
 * against the simulated provider in this process (500 ms to first token, 10 keys that the server
 * limits to 2,000 requests per minute each, limits the plan states too). Prints one JSON line.
 *   node --import tsx test/bench/distributed.ts <workers> [rpm per key] [tasks] [keys]
 * With a low rpm the keys are the bottleneck: the run shows whether limits hold across workers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startSim } from '../../src/index.js';
import { startRedis } from '../helpers/redis.js';

const WORKERS = Number(process.argv[2] ?? 1);
const RPM = Number(process.argv[3] ?? 2000);
const TASKS = Number(process.argv[4] ?? 2000);
const KEY_COUNT = Number(process.argv[5] ?? 10);
const CONCURRENCY = 16;
const KEYS = Object.fromEntries(Array.from({ length: KEY_COUNT }, (_, i) => [`BENCH_KEY_${i}`, `sk-bench-${i}-${'x'.repeat(12)}`]));

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-dist-bench-'));
const redis = await startRedis();
const sim = await startSim({ seed: 1, keys: Object.fromEntries(Object.values(KEYS).map((k) => [k, { rpm: RPM }])), latency: { ttftMs: 500 } });
const file = join(dir, 'plan.json');
writeFileSync(
  file,
  JSON.stringify({
    providers: { p: { type: 'anthropic', baseURL: sim.url, keys: Object.keys(KEYS).map((env) => ({ env })), limits: { rpm: RPM } } },
    models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 32 } },
    defaults: { maxInFlight: 4 * CONCURRENCY * 2 },
    tasks: Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `task ${i}` })),
  }),
);

const env = { ...process.env, ...KEYS, SWARMSTATE_STORE: 'memory' };
const bin = resolve('bin/swarmstate.js');
const children: ChildProcess[] = [];
function cli(args: string[]) {
  const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  return { child, stderr: () => stderr, done: new Promise<{ code: number | null; stdout: string; stderr: string }>((r) => child.on('close', (code) => r({ code, stdout, stderr }))) };
}

try {
  const workers = Array.from({ length: WORKERS }, () => cli(['worker', '--redis', redis.url, '--concurrency', String(CONCURRENCY)]));
  while (!workers.every((w) => w.stderr().includes('worker ready'))) await new Promise((r) => setTimeout(r, 20));
  const t0 = performance.now();
  const run = await cli(['run', file, '--redis', redis.url, '--json']).done;
  const wallMs = performance.now() - t0;
  if (run.code !== 0) throw new Error(`the coordinator exited ${run.code}: ${run.stderr}`);
  const result = JSON.parse(run.stdout) as { totals: { completed: number; durationMs: number } };
  // Rate-limit accuracy: the most requests any key had answered in any 60 s window (arrival time).
  const log = sim.stats().log;
  const byKey = new Map<string, number[]>();
  for (const e of log) (byKey.get(e.key) ?? byKey.set(e.key, []).get(e.key)!).push(e.at);
  let maxWindow = 0;
  for (const times of byKey.values()) {
    times.sort((a, b) => a - b);
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i]! - times[j]! >= 60_000) j++;
      maxWindow = Math.max(maxWindow, i - j + 1);
    }
  }
  console.log(
    JSON.stringify({
      workers: WORKERS,
      tasks: TASKS,
      completed: result.totals.completed,
      makespanMs: result.totals.durationMs,
      wallMs,
      tasksPerSec: TASKS / (result.totals.durationMs / 1000),
      requests: log.length,
      rateLimited: sim.stats().byStatus[429] ?? 0,
      maxPerKeyWindow: maxWindow,
      rpm: RPM,
      keys: KEY_COUNT,
    }),
  );
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await sim.close();
  await redis.close();
}
