/**
 * Many agents in flight: N independent tasks against a simulator in its own process (1 s to the
 * first token, no limits), so the CPU this process spends is the runtime's alone. Prints one JSON
 * line: makespan, the ideal (ceil(N / maxInFlight) calls of ~1 s), runtime CPU per task, the
 * simulator's CPU and the most calls it held at once, peak RSS.
 *   node --import tsx test/bench/inflight.ts <tasks> <maxInFlight>
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createSwarm } from '../../src/index.js';

const TTFT_MS = 1_000;

if (process.argv[2] === '--server') {
  const { startSim } = await import('../../src/sim/index.js');
  const sim = await startSim({ seed: 1, latency: { ttftMs: TTFT_MS, tokensPerSecond: 1_000_000 } });
  process.send!({ url: sim.url });
  process.on('message', (m: string) => {
    if (m === 'cpu') process.send!({ cpu: process.cpuUsage(), peakInFlight: sim.stats().peakInFlight });
  });
  process.on('disconnect', () => void sim.close().then(() => process.exit(0)));
} else {
  const n = Number(process.argv[2] ?? 3_000);
  const maxInFlight = Number(process.argv[3] ?? 100);
  const server = fork(fileURLToPath(import.meta.url), ['--server'], { execArgv: ['--import', 'tsx'] });
  const url = await new Promise<string>((resolve) => server.once('message', (m: { url: string }) => resolve(m.url)));
  const plan = (count: number, inFlight: number) => ({
    providers: { p: { type: 'sim', baseURL: url } },
    models: { m: { provider: 'p', model: 'sim-fast', maxTokens: 16 } },
    defaults: { maxInFlight: inFlight, taskTimeoutMs: 600_000 },
    tasks: Array.from({ length: count }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `Task ${i}.` })),
  });
  const swarm = createSwarm({ store: false, seed: 1 });
  await swarm.run(plan(50, 50)).result; // warm-up: JIT, the HTTP pool
  let simPeakInFlight = 0; // the most calls the simulator held at once
  const serverCpu = () =>
    new Promise<number>((resolve) => {
      server.once('message', (m: { cpu: NodeJS.CpuUsage; peakInFlight: number }) => {
        simPeakInFlight = m.peakInFlight;
        resolve((m.cpu.user + m.cpu.system) / 1000);
      });
      server.send('cpu');
    });
  const server0 = await serverCpu();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const result = await swarm.run(plan(n, maxInFlight)).result;
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const serverCpuMs = (await serverCpu()) - server0;
  await swarm.close();
  server.disconnect();
  if (result.totals.completed !== n) throw new Error(`only ${result.totals.completed} of ${n} completed`);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const idealMs = Math.ceil(n / maxInFlight) * TTFT_MS;
  console.log(JSON.stringify({ tasks: n, maxInFlight, ms, idealMs, cpuMs, cpuUsPerTask: (cpuMs * 1000) / n, serverCpuMs, simPeakInFlight, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
}
