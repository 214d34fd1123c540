/**
 * Tool sharing: 100 independent agents, each making 10 parallel calls of one in-process,
 * read-only (so shareable) tool that takes 20 ms of real time. 30% of the calls draw their
 * arguments from a small pool common to all agents (seeded), the other 70% are unique. Prints
 * one JSON line.
 *   node --import tsx test/bench/tools.ts on|off
 *
 * - `on`: the default bus (identical calls in flight share one execution, results are cached).
 * - `off`: `createSwarm({ shareTools: false })`, every call runs.
 * Everything else is the plan's default tool settings (batch window 10 ms, batch size 16, 8
 * executions at once on the `local` server). The simulator answers at once with no limits; each
 * agent's first reply holds its 10 tool calls (one `[[sim:tool]]` directive each), its second
 * is text.
 */
import { createSwarm } from '../../src/index.js';
import type { ToolDefinition } from '../../src/index.js';
import { startSim } from '../../src/sim/index.js';
import { nextRandom } from '../../machines/random.js';
import type { ToolBusStats } from '../../machines/toolBus.machine.js';

export const AGENTS = 100;
export const CALLS_PER_AGENT = 10;
export const SHARED_FRACTION = 0.3;
export const POOL = 20;
export const TOOL_MS = 20;
const SEED = 42;
const MAX_IN_FLIGHT = 100;

/**
 * The arguments of every agent's calls: exactly round(30%) of all calls, at seeded positions,
 * take a seeded key from the common pool; the rest have a key of their own.
 */
export function workload(agents: number, seed: number): { keys: string[][]; shared: number; distinctShared: number } {
  let state = seed;
  const random = () => {
    const [value, next] = nextRandom(state);
    state = next;
    return value;
  };
  const total = agents * CALLS_PER_AGENT;
  const slots = Array.from({ length: total }, (_, i) => i);
  // Fisher-Yates: the first `shared` slots of the permutation are the shared calls.
  for (let i = total - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [slots[i], slots[j]] = [slots[j]!, slots[i]!];
  }
  const shared = Math.round(total * SHARED_FRACTION);
  const keys = Array.from({ length: agents }, (_, a) => Array.from({ length: CALLS_PER_AGENT }, (_, c) => `u-${a}-${c}`));
  const used = new Set<string>();
  for (const slot of slots.slice(0, shared)) {
    const key = `s-${Math.floor(random() * POOL)}`;
    keys[Math.floor(slot / CALLS_PER_AGENT)]![slot % CALLS_PER_AGENT] = key;
    used.add(key);
  }
  return { keys, shared, distinctShared: used.size };
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

async function main(mode: 'on' | 'off') {
  let handled = 0;
  const lookup: ToolDefinition<{ key: string }> = {
    name: 'lookup',
    description: 'Look a record up by key',
    inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    annotations: { readOnlyHint: true },
    handler: async ({ key }, { signal }) => {
      handled++;
      await sleep(TOOL_MS, signal);
      return `record ${key}`;
    },
  };
  const sim = await startSim({ seed: 1 });
  const swarm = createSwarm({ seed: 1, tools: [lookup], ...(mode === 'off' ? { shareTools: false } : {}) });

  const planOf = (prefix: string, keys: string[][]) => ({
    providers: { p: { type: 'sim' as const, baseURL: sim.url, keys: ['sk-bench'] } },
    models: { fast: { provider: 'p', model: 'sim-fast', maxTokens: 1024 } },
    defaults: { maxInFlight: MAX_IN_FLIGHT },
    tasks: keys.map((k, i) => ({
      id: `${prefix}${i}`,
      model: 'fast',
      tools: ['lookup'],
      prompt: `Task ${prefix}${i}: look these up.\n${k.map((key) => `[[sim:tool lookup ${JSON.stringify({ key })}]]`).join('\n')}`,
    })),
  });

  // Warm-up (JIT, connections) on keys of its own: the bus and its cache are per run.
  const warm = await swarm.run(planOf('w', Array.from({ length: 10 }, (_, a) => Array.from({ length: CALLS_PER_AGENT }, (_, c) => `w-${a}-${c}`)))).result;
  if (warm.totals.completed !== 10) throw new Error(`warm-up: ${warm.totals.completed}/10 completed`);
  handled = 0;
  sim.resetStats();

  const { keys, shared, distinctShared } = workload(AGENTS, SEED);
  const run = swarm.run(planOf('t', keys));
  let stats: ToolBusStats | undefined;
  let toolResults = 0;
  let sharedCalls = 0;
  let cachedCalls = 0;
  // The bus keeps its counters in one object mutated in place: hold on to it while it lives.
  run.events.on('tool:called', (e) => {
    stats ??= (run.actor?.system.get('toolBus')?.getSnapshot().context as { stats: ToolBusStats } | undefined)?.stats;
    if (e.cached) cachedCalls++;
    else if (e.shared) sharedCalls++;
  });
  run.events.on('tool:result', () => toolResults++);
  const t0 = performance.now();
  const result = await run.result;
  const wallMs = performance.now() - t0;
  await swarm.close();
  const requests = sim.stats().requests;
  await sim.close();
  if (!stats) throw new Error('no tool bus stats');

  const requested = AGENTS * CALLS_PER_AGENT;
  const expectedExecuted = mode === 'on' ? requested - shared + distinctShared : requested;
  console.log(
    JSON.stringify({
      share: mode === 'on' ? 1 : 0,
      agents: AGENTS,
      completed: result.totals.completed,
      requested,
      busRequested: stats.requested,
      executed: handled,
      busExecuted: stats.executed,
      expectedExecuted,
      saved: requested - handled,
      deduplicated: stats.deduplicated,
      cached: stats.cached,
      sharedEvents: sharedCalls,
      cachedEvents: cachedCalls,
      executions: stats.executions,
      toolResultEvents: toolResults,
      failed: stats.failed,
      timedOut: stats.timedOut,
      modelRequests: result.totals.requests,
      simRequests: requests,
      sharedCalls: shared,
      distinctShared,
      wallMs,
    }),
  );
}

const mode = process.argv[2];
if (mode !== 'on' && mode !== 'off') throw new Error('usage: tools.ts on|off');
await main(mode);
