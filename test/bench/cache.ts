/**
 * Cache-aware fan-out: 20 agents whose requests share a prefix of 40,000 characters (a brief in
 * the system prompt; 7,408 tokens by the simulator's tokenizer), all ready at once, on the embedded simulator (Anthropic protocol, prompt
 * caching, 100 ms base time to first token plus 40 ms per 1,000 uncached input tokens of prompt
 * processing, 200 output tokens at 400 tokens/s). Prints one JSON line.
 *   node --import tsx test/bench/cache.ts fanout|atonce|nocache|itpm
 */
import { createSwarm } from '../../src/index.js';
import { countTokens } from '../../src/sim/tokenizer.js';

const mode = process.argv[2] ?? 'fanout';
const AGENTS = 20;
const PRICE = { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 }; // USD per million tokens
const brief = 'Shared brief. '.padEnd(40_000, 'lorem ipsum dolor sit amet ');

// `itpm`: fan-out on one key with an input-token limit (the runtime's and the server's, equal).
const ITPM = 120_000;
const limited = mode === 'itpm';
const plan = {
  providers: {
    sim: {
      type: 'sim' as const,
      sim: { ttftMs: 100, prefillMsPer1kTokens: 40, tokensPerSecond: 400, ...(limited ? { limits: { itpm: ITPM } } : {}) },
      cache: mode !== 'nocache',
      cacheFanOut: mode === 'fanout' || limited,
      ...(limited ? { keys: ['k1'], limits: { itpm: ITPM } } : {}),
    },
  },
  models: { m: { provider: 'sim', model: 'sim-sonnet', maxTokens: 256, price: PRICE } },
  defaults: { maxInFlight: AGENTS },
  tasks: Array.from({ length: AGENTS }, (_, i) => ({ id: `agent${i}`, model: 'm', system: brief, prompt: `Part ${i} of the job. [[sim:length 200]]` })),
};

const swarm = createSwarm({ seed: 1 });
// Warm-up on another prefix (connections, JIT), not counted.
// (On a key of its own: the server's buckets are per key, and the runtime's live in each run.)
const warmProviders = limited ? { sim: { ...plan.providers.sim, keys: ['warm-up'] } } : plan.providers;
await swarm.run({ ...plan, providers: warmProviders, tasks: plan.tasks.slice(0, 2).map((t) => ({ ...t, system: `warm-up ${brief}` })) }).result;
const t0 = performance.now();
const run = swarm.run(plan);
let rateLimited = 0;
run.events.on('key:backoff', () => void rateLimited++);
const result = await run.result;
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
    rateLimited,
    // `itpm`: what the server's own bucket allows at best. Its burst (one second: 2,000 tokens)
    // admits the leader's prompt when full and leaves it in debt; the followers (their tails
    // only: cache reads are free) fit once the debt is repaid, then take a cached call each
    // (100 ms to first token, 200 tokens at 400/s).
    ...(limited ? { itpm: ITPM, boundMs: (Math.max(0, Math.max(...tasks.map(totalInput)) - ITPM / 60) / (ITPM / 60_000)) + 100 + 500 } : {}),
  }),
);
