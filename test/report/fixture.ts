/**
 * A small real run to build reports from: the embedded sim provider over loopback HTTP (two keys,
 * one shared read-only tool, `[[sim:error ...]]` faults: a 500, a 429, a 529) and a scripted
 * provider for what the simulator cannot be told to do on cue (a timeout, a network error, and a
 * bad request whose message carries markup). Time runs 20x faster so the 429's Retry-After and
 * the breaker's cool-down take milliseconds.
 */
import { createScriptedProvider, createSwarm, ProviderError, type RunResult, type TimedRunEvent } from '../../src/index.js';
import { scaledClock } from '../helpers/scaledClock.js';

/** Markup an error message carries: the report must show it as text. */
export const HOSTILE = '<img src=x onerror=alert(1)></script><script>alert(2)</script>';

export interface RecordedRun {
  events: TimedRunEvent[];
  result: RunResult;
}

export async function recordRun(): Promise<RecordedRun> {
  const sku = (s: string) => `[[sim:tool lookup {"sku":"${s}"}]]`;
  const plan = {
    providers: {
      sim: { type: 'sim', keys: ['sim-report-a', 'sim-report-b'], limits: { rpm: 600, concurrency: 2 }, sim: { ttftMs: [5, 25] } },
      edge: { type: 'sim', keys: ['edge-report-key'], limits: { rpm: 600 } },
    },
    models: {
      fast: { provider: 'sim', model: 'sim-haiku', maxTokens: 128, price: { input: 1, output: 5 } },
      edge: { provider: 'edge', model: 'edge-1', maxTokens: 128, price: { input: 0.5, output: 2, cacheRead: 0.05 } },
    },
    defaults: { maxInFlight: 6, maxRetries: 4 },
    tasks: [
      { id: 'a.fetch', model: 'fast', tools: ['lookup'], prompt: `Fetch a. ${sku('1')} [[sim:error 500 1]]` },
      { id: 'b.fetch', model: 'fast', tools: ['lookup'], prompt: `Fetch b. ${sku('1')} [[sim:error 429 1]]` },
      { id: 'c.fetch', model: 'fast', tools: ['lookup'], prompt: `Fetch c. ${sku('2')} [[sim:error 529 1]]` },
      { id: 'a.summarize', model: 'fast', deps: ['a.fetch'], prompt: 'Summarize a.' },
      { id: 'b.summarize', model: 'fast', deps: ['b.fetch', 'c.fetch'], prompt: 'Summarize b and c.' },
      { id: 'x.edge', model: 'edge', prompt: 'x' },
      { id: 'y.edge', model: 'edge', prompt: 'y' },
      { id: 'y.after', model: 'fast', deps: ['y.edge'], prompt: 'never runs' },
      { id: 'final', model: 'fast', deps: ['a.summarize', 'b.summarize'], prompt: 'Join.' },
    ],
  };
  const seen = new Map<string, number>();
  const edge = createScriptedProvider({
    latencyMs: 5,
    reply: (req) => {
      const n = seen.get(req.meta.taskId) ?? 0;
      seen.set(req.meta.taskId, n + 1);
      if (req.meta.taskId === 'y.edge') throw new ProviderError('bad_request', `rejected: ${HOSTILE}`, { status: 400 });
      if (n === 0) throw new ProviderError('timeout', 'no headers within 60000 ms');
      if (n === 1) throw new ProviderError('network', 'ECONNRESET');
      return { text: 'edge ok', usage: { inputTokens: 40, outputTokens: 8, cacheReadTokens: 120, cacheWriteTokens: 0 } };
    },
  });
  const swarm = createSwarm({
    clock: scaledClock(20),
    seed: 3,
    providers: { edge },
    backoff: { baseMs: 20, maxMs: 200 },
    breaker: { failureThreshold: 2, cooldownMs: 200 },
    tools: [
      {
        name: 'lookup',
        description: 'Find a product by SKU',
        inputSchema: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
        annotations: { readOnlyHint: true },
        handler: ({ sku: s }: { sku: string }) => `product ${s}`,
      },
    ],
  });
  try {
    const run = swarm.run(plan);
    const events: TimedRunEvent[] = [];
    run.events.on('*', (_type, e) => events.push(e as TimedRunEvent));
    const result = await run.result;
    return { events, result };
  } finally {
    await swarm.close();
  }
}
