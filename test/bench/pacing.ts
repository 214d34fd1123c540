/**
 * Pacing against a server that enforces its limits as the providers document them: a token
 * bucket per key refilling at `rpm` a minute, enforced over short intervals (a bucket of one
 * second's worth), with 5xx/529/connection-reset faults. Three programs on the same server and
 * the same tasks, one after another in this process, each on a fresh simulator:
 *
 * - swarmstate (`createSwarm`, default `maxInFlight` 5);
 * - a LangGraph.js program: a StateGraph whose node calls ChatAnthropic, `graph.batch(...,
 *   { maxConcurrency: 5 })`, keys round-robin, library defaults for retries;
 * - the official Anthropic SDK with p-limit(5), keys round-robin, SDK defaults for retries.
 *
 * Prints one JSON line: per scenario and program, tasks completed, makespan, 429 share, requests
 * per task, and the lower bound max(one call, (N - total burst) / total rate).
 *   node --import tsx test/bench/pacing.ts [scenario...]
 */
import Anthropic from '@anthropic-ai/sdk';
import { ChatAnthropic } from '@langchain/anthropic';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import pLimit from 'p-limit';
import { createSwarm } from '../../src/index.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { countTokens } from '../../src/sim/tokenizer.js';
import { lowerBoundMs, SCENARIOS, TTFT_MS, type Scenario } from './pacingScenarios.js';

const FAULTS = { http500: 0.02, http529: 0.02, reset: 0.01 };
const MAX_TOKENS = 64;
const prompt = (i: number) => `Write one sentence about product ${i}.`;

interface Outcome {
  completed: number;
  makespanMs: number;
  requests: number;
  rateLimited: number;
}

async function onSim(s: Scenario, seed: number, program: (url: string, keys: string[]) => Promise<number>): Promise<Outcome> {
  const keys = Array.from({ length: s.keys }, (_, i) => `sk-pacing-${seed}-${i}`);
  const valid = keys.slice(0, s.keys - s.revoked);
  const sim: SimServer = await startSim({
    seed,
    keys: Object.fromEntries(valid.map((k) => [k, { rpm: s.rpm, ...(s.burst !== undefined ? { burst: { rpm: s.burst } } : {}) }])),
    headers: s.headers,
    latency: { ttftMs: TTFT_MS, tokensPerSecond: 2_000 },
    faults: FAULTS,
  });
  try {
    const t0 = performance.now();
    const completed = await program(sim.url, keys);
    const makespanMs = performance.now() - t0;
    const stats = sim.stats();
    return { completed, makespanMs, requests: stats.requests, rateLimited: stats.byStatus['429'] ?? 0 };
  } finally {
    await sim.close();
  }
}

async function swarmstate(s: Scenario, url: string, keys: string[]): Promise<number> {
  const swarm = createSwarm({ seed: 1, store: false });
  try {
    const result = await swarm.run({
      providers: { p: { type: 'sim', baseURL: url, keys, ...(s.stated ? { limits: { rpm: s.rpm, ...(s.statedBurst ? { burst: { rpm: s.burst } } : {}) } } : {}) } },
      models: { fast: { provider: 'p', model: 'sim-fast', maxTokens: MAX_TOKENS } },
      tasks: Array.from({ length: s.tasks }, (_, i) => ({ id: `t${i}`, model: 'fast', prompt: prompt(i) })),
    }).result;
    return result.totals.completed;
  } finally {
    await swarm.close();
  }
}

async function langgraph(s: Scenario, url: string, keys: string[]): Promise<number> {
  const models = keys.map((apiKey) => new ChatAnthropic({ model: 'sim-fast', apiKey, anthropicApiUrl: url, maxTokens: MAX_TOKENS }));
  const State = Annotation.Root({ i: Annotation<number>, output: Annotation<string> });
  const graph = new StateGraph(State)
    .addNode('write', async ({ i }) => ({ output: String((await models[i % models.length]!.invoke(prompt(i))).content) }))
    .addEdge(START, 'write')
    .addEdge('write', END)
    .compile();
  const inputs = Array.from({ length: s.tasks }, (_, i) => ({ i, output: '' }));
  const results = await graph.batch(inputs, { maxConcurrency: 5 }, { returnExceptions: true });
  return results.filter((r) => !(r instanceof Error) && typeof (r as { output?: unknown }).output === 'string').length;
}

async function sdk(s: Scenario, url: string, keys: string[]): Promise<number> {
  const clients = keys.map((apiKey) => new Anthropic({ apiKey, baseURL: url }));
  const limit = pLimit(5);
  const results = await Promise.allSettled(
    Array.from({ length: s.tasks }, (_, i) =>
      limit(() => clients[i % clients.length]!.messages.create({ model: 'sim-fast', max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: prompt(i) }] })),
    ),
  );
  return results.filter((r) => r.status === 'fulfilled').length;
}

const ALL = { swarmstate, langgraph, sdk } as const;
/** `PACING_PROGRAMS=swarmstate` runs only those (for a quick look; the table needs all three). */
const PROGRAMS = Object.fromEntries(Object.entries(ALL).filter(([name]) => !process.env.PACING_PROGRAMS || process.env.PACING_PROGRAMS.split(',').includes(name)));
/** Runs per program and scenario (`PACING_REPS`); the median stands. */
const REPS = Math.max(1, Number(process.env.PACING_REPS ?? 3));

async function main(names: string[]) {
  countTokens('warm up'); // the simulator's tokenizer loads once per process: not in the first program's time
  // Each program once on a small plan with no limits, so no program pays the process's JIT warm-up
  // (or its libraries' first load) inside a measured run.
  const warm: Scenario = { name: 'warm-up', what: '', tasks: 10, keys: 2, revoked: 0, rpm: 60_000, stated: false, headers: true, maxShare: 1, maxOverBound: Infinity };
  for (const program of Object.values(PROGRAMS)) await onSim(warm, 1, (url, keys) => program(warm, url, keys));
  const out: Record<string, Record<string, Outcome & { boundMs: number; makespansMs: number[]; completedRuns: number[]; rateLimitedRuns: number[]; requestsRuns: number[] }>> = {};
  for (const s of SCENARIOS.filter((x) => names.length === 0 || names.includes(x.name))) {
    // Each program REPS times, interleaved (so a busy moment of the machine falls on all of them);
    // the median run by makespan stands for the program.
    const runs: Record<string, Outcome[]> = {};
    for (let rep = 0; rep < REPS; rep++) {
      for (const [name, program] of Object.entries(PROGRAMS)) {
        const r = await onSim(s, 7 + rep, (url, keys) => program(s, url, keys));
        (runs[name] ??= []).push(r);
        console.error(`pacing ${s.name} ${name} #${rep + 1}: ${r.completed}/${s.tasks} in ${(r.makespanMs / 1000).toFixed(1)} s, ${r.rateLimited}/${r.requests} 429`);
      }
    }
    out[s.name] = {};
    for (const [name, list] of Object.entries(runs)) {
      const sorted = [...list].sort((a, b) => a.makespanMs - b.makespanMs);
      const median = sorted[Math.floor(sorted.length / 2)]!;
      out[s.name]![name] = { ...median, boundMs: lowerBoundMs(s), makespansMs: list.map((r) => r.makespanMs), completedRuns: list.map((r) => r.completed), rateLimitedRuns: list.map((r) => r.rateLimited), requestsRuns: list.map((r) => r.requests) };
    }
  }
  console.log(JSON.stringify(out));
}

await main(process.argv.slice(2));
