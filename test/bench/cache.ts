/**
 * Cache-aware fan-out: 20 agents whose requests share a prefix of 40,000 characters (a brief in
 * the system prompt; 7,408 tokens by the simulator's tokenizer), all ready at once, on the embedded simulator (Anthropic protocol, prompt
 * caching, 100 ms base time to first token plus 40 ms per 1,000 uncached input tokens of prompt
 * processing, 200 output tokens at 400 tokens/s). Prints one JSON line.
 *   node --import tsx test/bench/cache.ts fanout|atonce|nocache
 */
import { createSwarm } from '../../src/index.js';
import { countTokens } from '../../src/sim/tokenizer.js';

const mode = process.argv[2] ?? 'fanout';
const AGENTS = 20;
const PRICE = { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 }; // USD per million tokens
const brief = 'Shared brief. '.padEnd(40_000, 'lorem ipsum dolor sit amet ');

const plan = {
  providers: {
    sim: {
      type: 'sim' as const,
      sim: { ttftMs: 100, prefillMsPer1kTokens: 40, tokensPerSecond: 400 },
      cache: mode !== 'nocache',
      cacheFanOut: mode === 'fanout',
    },
  },
  models: { m: { provider: 'sim', model: 'sim-sonnet', maxTokens: 256, price: PRICE } },
  defaults: { maxInFlight: AGENTS },
  tasks: Array.from({ length: AGENTS }, (_, i) => ({ id: `agent${i}`, model: 'm', system: brief, prompt: `Part ${i} of the job. [[sim:length 200]]` })),
};

const swarm = createSwarm({ seed: 1 });
// Warm-up on another prefix (connections, JIT), not counted.
await swarm.run({ ...plan, tasks: plan.tasks.slice(0, 2).map((t) => ({ ...t, system: `warm-up ${brief}` })) }).result;
const t0 = performance.now();
const result = await swarm.run(plan).result;
const makespanMs = performance.now() - t0;
await swarm.close();

const tasks = Object.values(result.tasks);
const usd = (tokens: number, price: number) => (tokens * price) / 1e6;
const inputUsd = tasks.reduce((s, t) => s + usd(t.usage.inputTokens, PRICE.input) + usd(t.usage.cacheWriteTokens, PRICE.cacheWrite) + usd(t.usage.cacheReadTokens, PRICE.cacheRead), 0);
const totalInput = (t: (typeof tasks)[number]) => t.usage.inputTokens + t.usage.cacheWriteTokens + t.usage.cacheReadTokens;
// The shared prefix, as the simulator counts it (its tokenizer, cl100k): what every agent's
// request starts with. Not characters / 4: that overstated this brief by a third, and the
// "minimum" built from it came out negative.
const prefixTokens = countTokens(brief);
// Theoretical minimum: the prefix written once and read 19 times; every agent's own tail uncached.
const minimumUsd = usd(prefixTokens, PRICE.cacheWrite) + usd(prefixTokens * (AGENTS - 1), PRICE.cacheRead) + tasks.reduce((s, t) => s + usd(totalInput(t) - prefixTokens, PRICE.input), 0);
console.log(
  JSON.stringify({
    mode,
    agents: AGENTS,
    completed: tasks.filter((t) => t.status === 'completed').length,
    prefixTokens,
    inputTokens: tasks.reduce((s, t) => s + totalInput(t), 0),
    cacheWriteTokens: result.totals.usage.cacheWriteTokens,
    cacheReadTokens: result.totals.usage.cacheReadTokens,
    inputUsd,
    minimumUsd,
    ratio: inputUsd / minimumUsd,
    makespanMs,
    // The leader's time to first token (base + prefill of the whole uncached prompt).
    ttftMs: 100 + (40 * (prefixTokens + 10)) / 1000,
  }),
);
