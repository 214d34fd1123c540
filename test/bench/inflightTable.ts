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
  const rows = runs.map((r) => child('test/bench/inflight.ts', [String(r.tasks), String(r.maxInFlight)]));
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  for (const r of rows) console.log(`inflight: ${r.tasks} tasks at ${r.maxInFlight}: ${s(r.ms!)} (ideal ${s(r.idealMs!)}), ${r.cpuUsPerTask!.toFixed(0)} µs CPU/task, ${r.maxRssMb!.toFixed(0)} MB`);
  const at = (m: number) => rows.find((r) => r.tasks === 3_000 && r.maxInFlight === m)!;
  const growth = at(3_000).cpuUsPerTask! / at(100).cpuUsPerTask!;
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  writeSection(
    'inflight',
    `## Thousands of agents in flight (issue 17)

Independent tasks against the simulator in its own process (1 s to the first token, no rate
limits, 16 output tokens), so the CPU of the runtime's process is the runtime's alone (the
simulator's is the "server CPU" column; on this 2-core machine the two share the cores, so a
busy simulator also slows the runtime's wall time). \`taskTimeoutMs\` 600,000, no journal
(\`store: false\`), a 50-task warm-up first. The ideal is ceil(tasks / maxInFlight) calls of 1 s.
Each row runs in a fresh process. ${machineLine()}; load average ${os.loadavg()[0]!.toFixed(1)} when the
last row ended. On a loaded machine the makespan measures the load (the runtime's and the
simulator's CPU together are a fraction of it): the runtime's CPU per task is the figure to compare.

| tasks | maxInFlight | makespan | ideal | makespan / ideal | runtime CPU | CPU per task | server CPU | peak RSS |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.map((r) => `| ${r.tasks!.toLocaleString('en')} | ${r.maxInFlight!.toLocaleString('en')} | ${s(r.ms!)} | ${s(r.idealMs!)} | ${(r.ms! / r.idealMs!).toFixed(2)}× | ${s(r.cpuMs!)} | ${r.cpuUsPerTask!.toFixed(0)} µs | ${s(r.serverCpuMs!)} | ${r.maxRssMb!.toFixed(0)} MB |`).join('\n')}

| goal (3,000 tasks) | result | met |
|---|---|---|
| runtime CPU per task at maxInFlight 3,000 within 1.5× of that at 100 | ${growth.toFixed(2)}× | ${ok(growth <= 1.5)} |
| makespan at maxInFlight 3,000 within 2× of the ideal | ${(at(3_000).ms! / at(3_000).idealMs!).toFixed(2)}× | ${ok(at(3_000).ms! <= 2 * at(3_000).idealMs!)} |

Before agents ran under group actors (every agent a child of the supervisor, each with its own
\`after\` deadline), the same benchmark on this machine measured, for 3,000 tasks at maxInFlight
100 / 300 / 1,000 / 3,000: makespans 34.8 / 13.2 / 38.2 / 34.3 s (ideal 30 / 10 / 3 / 1 s), runtime CPU
2,042 / 2,624 / 7,379 / 5,097 µs per task (3,000 within 2.50× of 100), peak RSS 243 / 259 / 339 / 355
MB.`,
  );
}
