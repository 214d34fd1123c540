/**
 * `npm run bench -- inflight`: many agents in flight (test/bench/inflight.ts runs each row in a
 * fresh process against a simulator in its own process), written into docs/benchmarks.md.
 */
import os from 'node:os';
import { child, machineLine, writeSection } from './report.js';

export function inflightBench(): void {
  // The issue's curve: one 3,000-task plan at rising maxInFlight, and 10,000 tasks all in flight at once.
  const runs = [
    ...[100, 300, 1_000, 3_000].map((m) => ({ tasks: 3_000, maxInFlight: m })),
    { tasks: 10_000, maxInFlight: 10_000 },
  ];
  // Three rounds (runtime and peer alternating, medians) where a round is short; one at 10,000.
  const rows = runs.map((r) => child('test/bench/inflight.ts', [String(r.tasks), String(r.maxInFlight), r.tasks >= 10_000 ? '1' : '3']));
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const x = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
  for (const r of rows) console.log(`inflight: ${r.tasks} tasks at ${r.maxInFlight}: ${s(r.ms!)} (ideal ${s(r.idealMs!)}, peer ${s(r.peerMs!)}), ${r.cpuUsPerTask!.toFixed(0)} µs CPU/task (peer ${r.peerCpuUsPerTask!.toFixed(0)}), ${r.maxRssMb!.toFixed(0)} MB`);
  const at = (m: number) => rows.find((r) => r.tasks === 3_000 && r.maxInFlight === m)!;
  const growth = at(3_000).cpuUsPerTask! / at(100).cpuUsPerTask!;
  const top = at(3_000);
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  // A runtime faster than the plain program doing the same calls means the yardstick is wrong.
  const beaten = rows.filter((r) => r.ms! < r.peerMs!);
  writeSection(
    'inflight',
    `## Thousands of agents in flight (issue 17)

Independent tasks against the simulator in its own process (1 s to the first token, no rate
limits, 16 output tokens), so the CPU of the runtime's process is the runtime's alone (the
simulator's is the "server CPU" column; on this 2-core machine the two share the cores, so a
busy simulator also slows the runtime's wall time). \`taskTimeoutMs\` 600,000, no journal
(\`store: false\`), a 50-task warm-up first. The ideal is ceil(tasks / maxInFlight) calls of 1 s:
it leaves out what the calls cost at all on this machine (the simulator spends about 0.4 ms of
CPU per call). So the same process also runs a **peer**
(\`test/bench/inflightPeer.ts\`): the same calls at the same maxInFlight made by a plain program
(an undici Pool, a p-limit-style bound, the stream read as SSE; no swarmstate code), against the
same simulator. Its makespan is the reachable lower bound; a runtime that "beats" it would mean a
wrong bound. Runtime and peer alternate, ${rows[0]!.rounds} rounds a row at 3,000 tasks (medians),
one at 10,000. Each row runs in a fresh process. ${machineLine()}; load average ${os.loadavg()[0]!.toFixed(1)} when the
last row ended. On a loaded machine the makespan measures the load: the CPU per task is the
figure to compare, the makespan / peer ratio the one that cancels the machine out. Peak RSS is
the process's (the peer's Pool included).

| tasks | maxInFlight | makespan | ideal | peer makespan | makespan / ideal | makespan / peer | runtime CPU per task | peer CPU per task | server CPU (runtime / peer) | peak RSS |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.map((r) => `| ${r.tasks!.toLocaleString('en')} | ${r.maxInFlight!.toLocaleString('en')} | ${s(r.ms!)} | ${s(r.idealMs!)} | ${s(r.peerMs!)} | ${x(r.ms!, r.idealMs!)} | ${x(r.ms!, r.peerMs!)} | ${r.cpuUsPerTask!.toFixed(0)} µs | ${r.peerCpuUsPerTask!.toFixed(0)} µs | ${s(r.serverCpuMs!)} / ${s(r.peerServerCpuMs!)} | ${r.maxRssMb!.toFixed(0)} MB |`).join('\n')}

| goal (3,000 tasks) | result | met |
|---|---|---|
| runtime CPU per task at maxInFlight 3,000 within 1.5× of that at 100 | ${growth.toFixed(2)}× | ${ok(growth <= 1.5)} |
| makespan at maxInFlight 3,000 within 2× of the ideal | ${x(top.ms!, top.idealMs!)} | ${ok(top.ms! <= 2 * top.idealMs!)} |
| makespan at maxInFlight 3,000 within 2× of the peer's (the reachable bound) | ${x(top.ms!, top.peerMs!)} | ${ok(top.ms! <= 2 * top.peerMs!)} |
${beaten.length > 0 ? `\n**The runtime beat its bound** at ${beaten.map((r) => `${r.tasks} / ${r.maxInFlight}`).join(', ')}: the peer is not a lower bound there (noise on a loaded machine, or a wrong peer).\n` : ''}
Before agents ran under group actors (every agent a child of the supervisor, each with its own
\`after\` deadline), the same benchmark on this machine measured, for 3,000 tasks at maxInFlight
100 / 300 / 1,000 / 3,000: makespans 34.8 / 13.2 / 38.2 / 34.3 s (ideal 30 / 10 / 3 / 1 s), runtime CPU
2,042 / 2,624 / 7,379 / 5,097 µs per task (3,000 within 2.50× of 100), peak RSS 243 / 259 / 339 / 355
MB.`,
  );
}
