/**
 * Rate-limit pacing: 500 independent tasks on the simulated provider, 4 keys × 120 rpm each,
 * 200 ms to first token, in real time. Prints one JSON line.
 *   node --import tsx test/bench/ratelimit.ts stated|learned
 *
 * - `stated`: the plan says `limits: { rpm: 120 }`, so the key actors pace themselves.
 * - `learned`: the plan says nothing; the runtime only has the rate-limit headers and the 429s.
 * In both the server enforces 120 rpm per key (a bucket refilling continuously at 2/s).
 *
 * The simulator is started here (not embedded by the registry) so its stats and request log can
 * be read; the plan's `sim` provider points at it with `baseURL`, which goes through the same
 * Anthropic adapter over real HTTP as an embedded one.
 */
import { createSwarm } from '../../src/index.js';
import { startSim } from '../../src/sim/index.js';
import type { SimLogEntry } from '../../src/sim/index.js';

export const TASKS = 500;
export const KEYS = 4;
export const RPM = 120;
const TTFT_MS = 200;
const WINDOW_MS = 60_000;

/** The most entries of one key's log whose arrival times fit in one WINDOW_MS window. */
export function maxPerWindow(entries: readonly Pick<SimLogEntry, 'at' | 'key'>[]): number {
  const byKey = new Map<string, number[]>();
  for (const e of entries) {
    const list = byKey.get(e.key) ?? [];
    list.push(e.at);
    byKey.set(e.key, list);
  }
  let max = 0;
  for (const times of byKey.values()) {
    times.sort((a, b) => a - b);
    // Two pointers: [times[i], times[i] + WINDOW_MS) for every i.
    for (let i = 0, j = 0; i < times.length; i++) {
      while (j < times.length && times[j]! < times[i]! + WINDOW_MS) j++;
      max = Math.max(max, j - i);
    }
  }
  return max;
}

async function main(mode: 'stated' | 'learned') {
  const secrets = Array.from({ length: KEYS }, (_, i) => `sk-bench-${i}`);
  const sim = await startSim({
    seed: 1,
    keys: Object.fromEntries(secrets.map((s) => [s, { rpm: RPM }])),
    latency: { ttftMs: TTFT_MS, tokensPerSecond: 10_000 },
  });
  const plan = {
    providers: {
      p: {
        type: 'sim' as const,
        baseURL: sim.url,
        keys: secrets,
        ...(mode === 'stated' ? { limits: { rpm: RPM } } : {}),
      },
    },
    models: { fast: { provider: 'p', model: 'sim-fast', maxTokens: 64 } },
    defaults: { maxInFlight: 64 },
    tasks: Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}`, model: 'fast', prompt: `task ${i}` })),
  };

  const swarm = createSwarm({ seed: 1 });
  const run = swarm.run(plan);
  let backoffs = 0;
  let retries = 0;
  run.events.on('key:backoff', () => backoffs++);
  run.events.on('task:retry', () => retries++);
  // When the runtime started each call (right after its key granted the lease), by key.
  const calls: { at: number; key: string }[] = [];
  run.events.on('model:request', (e) => calls.push({ at: Date.now(), key: e.keyId }));
  const t0 = performance.now();
  const result = await run.result;
  const makespanMs = performance.now() - t0;
  await swarm.close();

  const stats = sim.stats();
  await sim.close();
  const admitted = stats.log.filter((e) => e.status !== 429);
  // Diagnostics on stderr: requests per second of the run, and how long a call took from its
  // start in the runtime to its arrival at the server (the runtime paces the first, the server
  // counts the second).
  const first = Math.min(...stats.log.map((e) => e.at));
  const perSecond: Record<number, { sent: number; r429: number }> = {};
  for (const e of stats.log) {
    const s = Math.floor((e.at - first) / 1000);
    const b = (perSecond[s] ??= { sent: 0, r429: 0 });
    b.sent++;
    if (e.status === 429) b.r429++;
  }
  // Start-to-arrival lag: the k-th call a key started against the k-th request the server saw from it.
  const lags: number[] = [];
  for (const fp of new Set(stats.log.map((e) => e.key))) {
    const started = calls.filter((c) => c.key === `p:${fp}`).map((c) => c.at).sort((a, b) => a - b);
    const arrived = stats.log.filter((e) => e.key === fp).map((e) => e.at).sort((a, b) => a - b);
    started.forEach((t, k) => arrived[k] !== undefined && lags.push(arrived[k]! - t));
  }
  lags.sort((a, b) => a - b);
  console.error(`ratelimit ${mode}: start-to-arrival lag ms min ${lags[0]} median ${lags[lags.length >> 1]} p99 ${lags[Math.floor(lags.length * 0.99)]} max ${lags[lags.length - 1]}`);
  console.error(`ratelimit ${mode}: requests per second of the run ${JSON.stringify(perSecond)}`);

  // The continuous-rate bound (tasks / total rpm) or the critical path (one call), whichever is longer.
  const lowerBoundMs = Math.max((TASKS / (KEYS * RPM)) * WINDOW_MS, TTFT_MS);
  console.log(
    JSON.stringify({
      stated: mode === 'stated' ? 1 : 0,
      tasks: TASKS,
      completed: result.totals.completed,
      failed: result.totals.failed,
      makespanMs,
      lowerBoundMs,
      ratio: makespanMs / lowerBoundMs,
      requests: stats.requests,
      rateLimited: stats.byStatus['429'] ?? 0,
      requestsPerTask: stats.requests / Math.max(1, result.totals.completed),
      maxSentPerKeyWindow: maxPerWindow(stats.log),
      maxAdmittedPerKeyWindow: maxPerWindow(admitted),
      maxStartedPerKeyWindow: maxPerWindow(calls),
      keyBackoffs: backoffs,
      taskRetries: retries,
    }),
  );
}

const mode = process.argv[2];
if (mode !== 'stated' && mode !== 'learned') throw new Error('usage: ratelimit.ts stated|learned');
await main(mode);
