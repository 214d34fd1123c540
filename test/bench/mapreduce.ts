/**
 * Map and reduce overhead: 10,000 items through a map, then a reduce (fanIn 16) over it, on an
 * instant in-process provider, against the plain scheduler's 10,000-task layered DAG measured in
 * the same process (alternating, after a warm-up of each). Prints one JSON line.
 *   node --import tsx test/bench/mapreduce.ts [items]
 */
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { layeredPlan } from './plans.js';

const FAN_IN = 16;

function mapReducePlan(n: number) {
  return {
    providers: { p: { type: 'sim' as const } },
    models: { fast: { provider: 'p', model: 'instant' } },
    defaults: { maxInFlight: 50 },
    tasks: [
      { id: 'describe', kind: 'map', items: { values: Array.from({ length: n }, (_, i) => ({ sku: `p${i}` })) }, maxItems: n, model: 'fast', prompt: 'describe {{item.sku}}' },
      { id: 'summary', kind: 'reduce', over: 'describe', fanIn: FAN_IN, model: 'fast', prompt: 'merge {{inputs}}' },
    ],
  };
}

async function once(plan: unknown) {
  const provider = createScriptedProvider({ reply: () => 'ok' });
  const swarm = createSwarm({ providers: { p: provider }, store: false });
  const t0 = performance.now();
  const result = await swarm.run(plan).result;
  const ms = performance.now() - t0;
  await swarm.close();
  if (result.status !== 'completed') throw new Error(`run ended ${result.status}`);
  return { ms, result };
}

const n = Number(process.argv[2] ?? 10_000);
// JIT warm-up of both paths, so the sizes compare the runtime, not the compiler.
await once(layeredPlan(200));
await once(mapReducePlan(200));
const plain: number[] = [];
const mapped: number[] = [];
let depth = 0;
let groups = 0;
let mapRssMb = 0;
for (let round = 0; round < 3; round++) {
  const m = await once(mapReducePlan(n));
  mapped.push(m.ms);
  const ids = Object.keys(m.result.tasks).filter((id) => id.startsWith('summary/'));
  groups = ids.length;
  depth = Math.max(...ids.map((id) => Number(/\/L(\d+)\//.exec(id)![1])));
  // The first round's peak is the map's own: the plain runs have not gone yet.
  if (round === 0) mapRssMb = process.resourceUsage().maxRSS / 1024;
  plain.push((await once(layeredPlan(n))).ms);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mapMs = median(mapped);
const plainMs = median(plain);
console.log(
  JSON.stringify({
    items: n,
    fanIn: FAN_IN,
    mapMs,
    plainMs,
    usPerItem: (mapMs * 1000) / n,
    usPerTaskPlain: (plainMs * 1000) / n,
    ratio: mapMs / plainMs,
    groups,
    depth,
    expectedDepth: Math.ceil(Math.log(n) / Math.log(FAN_IN)),
    mapRssMb,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  }),
);
