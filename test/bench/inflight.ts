/**
 * Many agents in flight: N independent tasks against a simulator in its own process (1 s to the
 * first token, no limits), so the CPU this process spends is the runtime's alone. Beside the
 * runtime, a plain program (./inflightPeer.ts) makes the same N calls at the same bound against
 * the same simulator: the reachable lower bound, where the ideal (ceil(N / maxInFlight) calls of
 * ~1 s) leaves out the simulator's and the connections' cost. The two alternate for `rounds`
 * rounds (runtime first, then peer) and each figure is the median over the rounds. Each phase
 * makes its calls on connections of its own and closes them before its CPU is read: a kept-alive
 * connection closed by the simulator (5 s idle) costs its client CPU (the socket's close, undici's
 * error for it), and without this that bill fell into whichever phase ran 5 s later, mostly the
 * runtime's. The makespan is read before the close. Prints one JSON line: makespan, ideal, peer makespan, runtime and peer CPU per task, the simulator's CPU
 * during each and the most calls it held at once, peak RSS.
 *   node --import tsx test/bench/inflight.ts <tasks> <maxInFlight> [rounds]
 */
import { Pool } from 'undici';
import { createSwarm } from '../../src/index.js';
import { peerRun } from './inflightPeer.js';
import { forkSim } from './simProcess.js';

const TTFT_MS = 1_000;
const MAX_TOKENS = 16;

const n = Number(process.argv[2] ?? 3_000);
const maxInFlight = Number(process.argv[3] ?? 100);
const rounds = Number(process.argv[4] ?? 1);
const server = await forkSim({ ttftMs: TTFT_MS, tokensPerSecond: 1_000_000 });
const url = server.url;
const prompt = (i: number) => `Task ${i}.`;
// The peer's prompts have the same shape but other words: the simulator remembers the token
// counts of texts it has seen, so the second of two phases sending the same texts would be
// served for less than the first.
const peerPrompt = (i: number) => `Call ${i}.`;
const plan = (count: number, inFlight: number, text = prompt) => ({
  providers: { p: { type: 'sim', baseURL: url } },
  models: { m: { provider: 'p', model: 'sim-fast', maxTokens: MAX_TOKENS } },
  defaults: { maxInFlight: inFlight, taskTimeoutMs: 600_000 },
  tasks: Array.from({ length: count }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: text(i) })),
});
const serverCpu = () => server.cpuMs();
/**
 * Wall time, this process's CPU and the simulator's CPU of one phase, in ms. `phase` makes the
 * calls and returns the close of its connections: the wall time stops before it, the CPU after.
 */
const measure = async (phase: () => Promise<() => Promise<void>>) => {
  const server0 = await serverCpu();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const close = await phase();
  const ms = performance.now() - t0;
  await close();
  const cpu = process.cpuUsage(cpu0);
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000, serverCpuMs: (await serverCpu()) - server0 };
};

// Warm-up of both (JIT), on connections of their own that are closed before the rounds, at up
// to 1,000 calls at once: after a warm-up of 50 the first round still paid the JIT of the code
// paths many calls in flight take (the runtime's first round ~2x its later ones), and the
// runtime, going first, warmed undici's for the peer.
const warmN = Math.min(n, 1_000);
const warmSwarm = createSwarm({ store: false, seed: 1 });
// Words the rounds do not send (the simulator would serve those for less afterwards).
await warmSwarm.run(plan(warmN, Math.min(maxInFlight, warmN), (i) => `Warm ${i}.`)).result;
await warmSwarm.close();
const warmPool = new Pool(url);
await peerRun(warmPool, warmN, Math.min(maxInFlight, warmN), (i) => `Warmup ${i}.`, MAX_TOKENS);
await warmPool.close();
const runtime: Awaited<ReturnType<typeof measure>>[] = [];
const peer: Awaited<ReturnType<typeof measure>>[] = [];
for (let round = 0; round < rounds; round++) {
  const swarm = createSwarm({ store: false, seed: 1 });
  runtime.push(
    await measure(async () => {
      const result = await swarm.run(plan(n, maxInFlight)).result;
      if (result.totals.completed !== n) throw new Error(`only ${result.totals.completed} of ${n} completed`);
      return () => swarm.close();
    }),
  );
  const pool = new Pool(url);
  peer.push(
    await measure(async () => {
      await peerRun(pool, n, maxInFlight, peerPrompt, MAX_TOKENS);
      return () => pool.close();
    }),
  );
}
server.close();
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const ms = median(runtime.map((r) => r.ms));
const cpuMs = median(runtime.map((r) => r.cpuMs));
const peerMs = median(peer.map((r) => r.ms));
const peerCpuMs = median(peer.map((r) => r.cpuMs));
const idealMs = Math.ceil(n / maxInFlight) * TTFT_MS;
console.log(
  JSON.stringify({
    tasks: n,
    maxInFlight,
    rounds,
    ms,
    idealMs,
    peerMs,
    cpuMs,
    cpuUsPerTask: (cpuMs * 1000) / n,
    peerCpuUsPerTask: (peerCpuMs * 1000) / n,
    // Each round's figures, in order: the first round of a size also pays the JIT and heap
    // growth of that size (mostly the runtime's: it goes first and warms undici for the peer).
    cpuUsPerTaskRounds: runtime.map((r) => Math.round((r.cpuMs * 1000) / n)),
    peerCpuUsPerTaskRounds: peer.map((r) => Math.round((r.cpuMs * 1000) / n)),
    serverCpuMs: median(runtime.map((r) => r.serverCpuMs)),
    peerServerCpuMs: median(peer.map((r) => r.serverCpuMs)),
    simPeakInFlight: server.peakInFlight(),
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  }),
);
