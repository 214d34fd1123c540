/**
 * The simulator in a process of its own, so the CPU a benchmark reads from its own process is the
 * program's alone (the simulator's is asked for separately). `forkSim` starts this file with
 * `--sim-process` and the simulator's latency; the child answers `cpu` with its CPU time and the
 * most calls it held at once, and stops when the parent disconnects (or exits).
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface SimLatency {
  ttftMs: number;
  tokensPerSecond: number;
}

export interface SimProcess {
  url: string;
  /** The simulator process's CPU time (user + system) so far, in ms. */
  cpuMs(): Promise<number>;
  /** The most model requests the simulator held at once, as of the last `cpuMs()`. */
  peakInFlight(): number;
  /** Requests the simulator had answered, as of the last `cpuMs()`. */
  requests(): number;
  /** Stops the simulator (its process exits once its connections are cut). */
  close(): void;
}

type Report = { cpu: NodeJS.CpuUsage; peakInFlight: number; requests: number };

/** Forks the simulator (seed 1, no limits, no faults) with `latency`. `SPROF=<dir>` profiles it (`--cpu-prof`). */
export async function forkSim(latency: SimLatency): Promise<SimProcess> {
  const prof = process.env.SPROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SPROF}`] : [];
  // JSON has no Infinity: it goes over as null.
  const child = fork(fileURLToPath(import.meta.url), ['--sim-process', JSON.stringify(latency)], { execArgv: ['--import', 'tsx', ...prof] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m: { url: string }) => resolve(m.url));
    child.once('exit', (code) => reject(new Error(`the simulator process exited (${code}) before it listened`)));
  });
  let peak = 0;
  let requests = 0;
  return {
    url,
    cpuMs: () =>
      new Promise<number>((resolve) => {
        child.once('message', (m: Report) => {
          peak = Math.max(peak, m.peakInFlight);
          requests = m.requests;
          resolve((m.cpu.user + m.cpu.system) / 1000);
        });
        child.send('cpu');
      }),
    peakInFlight: () => peak,
    requests: () => requests,
    close: () => child.disconnect(),
  };
}

if (process.argv[2] === '--sim-process') {
  const { startSim } = await import('../../src/sim/index.js');
  const given = JSON.parse(process.argv[3]!) as { ttftMs: number; tokensPerSecond: number | null };
  const sim = await startSim({ seed: 1, latency: { ttftMs: given.ttftMs, tokensPerSecond: given.tokensPerSecond ?? Infinity } });
  process.send!({ url: sim.url });
  process.on('message', (m: string) => {
    if (m !== 'cpu') return;
    const stats = sim.stats();
    process.send!({ cpu: process.cpuUsage(), peakInFlight: stats.peakInFlight, requests: stats.requests } satisfies Report);
  });
  process.on('disconnect', () => void sim.close().then(() => process.exit(0)));
}
