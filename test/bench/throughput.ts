/**
 * Throughput with nothing limiting: N independent one-call tasks, at most `maxInFlight` at once,
 * against a simulator in its own process that answers at once (0 ms to the first token, no token
 * pacing, no faults, no rate limits), so the program's CPU is the only thing that can slow it.
 * One program per process (the table writer, ./throughputTable.ts, runs each in a fresh one):
 *
 * - `swarmstate-none`: createSwarm({ store: false }), provider type 'sim' at the simulator's URL;
 * - `swarmstate-sqlite`: the same with the default journal, SQLite (WAL), on a fresh file;
 * - `plain`: p-limit(maxInFlight) around the inflight benchmark's undici call (./inflightPeer.ts);
 * - `langgraph`: a LangGraph.js StateGraph, a start node fanning out with `Send` to one worker
 *   per task, each calling ChatAnthropic at the simulator, invoked with `{ maxConcurrency }`.
 *
 * The program runs `warmups` times first (other prompts), then `measured` times: every program
 * here still gets markedly cheaper from its first run to its third or fourth in one process (the
 * JIT, the heap's growth), the plain one too, so one warm-up run would measure the warm-up; and a
 * run of a second or two on this shared machine can fall on a busy moment, so the process's
 * figure is the median of its measured runs. Wall time covers a run; CPU time (this process's,
 * user + system) the run and the close of its connections. Prints one JSON line: tasks/s, CPU µs
 * per task, the simulator's CPU µs per task (its own process), each measured run's, peak RSS.
 *   node --import tsx test/bench/throughput.ts <program> [tasks] [maxInFlight] [warmups] [measured]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChatAnthropic } from '@langchain/anthropic';
import { Annotation, END, START, Send, StateGraph } from '@langchain/langgraph';
import pLimit from 'p-limit';
import { Pool } from 'undici';
import { createSwarm } from '../../src/index.js';
import { peerCall } from './inflightPeer.js';
import { forkSim } from './simProcess.js';

const MAX_TOKENS = 16;

/** One run of a program: makes the `n` calls (prompt i: `prompt(i)`), returns the close of its connections. */
type Program = (url: string, n: number, maxInFlight: number, prompt: (i: number) => string) => Promise<() => Promise<void>>;

const swarmstate =
  (store: () => string | false): Program =>
  async (url, n, maxInFlight, prompt) => {
    const swarm = createSwarm({ store: store(), seed: 1 });
    const result = await swarm.run({
      providers: { p: { type: 'sim', baseURL: url } },
      models: { m: { provider: 'p', model: 'sim-fast', maxTokens: MAX_TOKENS } },
      defaults: { maxInFlight },
      tasks: Array.from({ length: n }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: prompt(i) })),
    }).result;
    if (result.totals.completed !== n) throw new Error(`swarmstate: only ${result.totals.completed} of ${n} completed`);
    return () => swarm.close();
  };

const plain: Program = async (url, n, maxInFlight, prompt) => {
  const pool = new Pool(url);
  const limit = pLimit(maxInFlight);
  const texts = await Promise.all(Array.from({ length: n }, (_, i) => limit(() => peerCall(pool, prompt(i), MAX_TOKENS))));
  if (texts.some((t) => t === '')) throw new Error('plain: an empty reply');
  return () => pool.close();
};

const langgraph: Program = async (url, n, maxInFlight, prompt) => {
  const model = new ChatAnthropic({ model: 'sim-fast', apiKey: 'langgraph', anthropicApiUrl: url, maxTokens: MAX_TOKENS });
  const State = Annotation.Root({
    tasks: Annotation<number>,
    outputs: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  });
  const Work = Annotation.Root({ i: Annotation<number> });
  const graph = new StateGraph(State)
    .addNode('plan', () => ({}))
    .addNode('work', async ({ i }: typeof Work.State) => ({ outputs: [String((await model.invoke(prompt(i))).content)] }), { input: Work })
    .addEdge(START, 'plan')
    .addConditionalEdges('plan', ({ tasks }) => Array.from({ length: tasks }, (_, i) => new Send('work', { i })), ['work'])
    .addEdge('work', END)
    .compile();
  const state = await graph.invoke({ tasks: n }, { maxConcurrency: maxInFlight });
  if (state.outputs.length !== n || state.outputs.some((t) => t === '')) throw new Error(`langgraph: ${state.outputs.length} outputs of ${n}`);
  // ChatAnthropic's calls go through the Anthropic SDK on the global fetch, whose connections the
  // program does not own: they stay open (the warm-up's are the measured run's).
  return async () => {};
};

const name = process.argv[2] ?? 'swarmstate-none';
const n = Number(process.argv[3] ?? 2_000);
const maxInFlight = Number(process.argv[4] ?? 50);
const warmups = Number(process.argv[5] ?? 3);
const measured = Number(process.argv[6] ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-throughput-'));
let files = 0;
const programs: Record<string, Program> = {
  'swarmstate-none': swarmstate(() => false),
  'swarmstate-sqlite': swarmstate(() => join(dir, `runs-${files++}.db`)),
  plain,
  langgraph,
};
const program = programs[name];
if (!program) throw new Error(`unknown program "${name}"; known: ${Object.keys(programs).join(', ')}`);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sim = await forkSim({ ttftMs: 0, tokensPerSecond: Infinity });
try {
  // Other words than the measured runs': the simulator remembers the texts it has counted.
  for (let w = 0; w < warmups; w++) {
    const closeWarm = await program(sim.url, n, maxInFlight, (i) => `Warm ${w} ${i}.`);
    await closeWarm();
  }
  const runs: Array<{ ms: number; cpuUs: number; simUs: number }> = [];
  for (let m = 0; m < measured; m++) {
    const sim0 = await sim.cpuMs();
    const requests0 = sim.requests();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const close = await program(sim.url, n, maxInFlight, (i) => `Task ${m} ${i}.`);
    const ms = performance.now() - t0;
    await close();
    const cpu = process.cpuUsage(cpu0);
    const simMs = (await sim.cpuMs()) - sim0;
    const requests = sim.requests() - requests0;
    if (requests !== n) throw new Error(`${name}: ${requests} requests for ${n} tasks`);
    runs.push({ ms, cpuUs: cpu.user + cpu.system, simUs: simMs * 1000 });
  }
  console.log(
    JSON.stringify({
      program: name,
      tasks: n,
      maxInFlight,
      warmups,
      // The median of the measured runs, and each.
      tasksPerSec: median(runs.map((r) => n / (r.ms / 1000))),
      cpuUsPerTask: median(runs.map((r) => r.cpuUs / n)),
      simCpuUsPerTask: median(runs.map((r) => r.simUs / n)),
      tasksPerSecRuns: runs.map((r) => n / (r.ms / 1000)),
      cpuUsPerTaskRuns: runs.map((r) => r.cpuUs / n),
      maxRssMb: process.resourceUsage().maxRSS / 1024,
    }),
  );
} finally {
  sim.close();
  rmSync(dir, { recursive: true, force: true });
}
