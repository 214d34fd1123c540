/**
 * `npm run bench -- import` (issue 27): the cold import of the built package against xstate +
 * undici (test/bench/importTime.ts, 9 interleaved rounds), written into docs/benchmarks.md
 * after the hand-measured install section.
 */
import { child, machineLine, writeSection } from './report.js';

interface Program {
  specs: string[];
  ms: number;
  cpuMs: number;
  processMs: number;
  runs: number[];
  modules: { total: number; byPackage: Record<string, number> };
}

export function importBench(): void {
  const r = child('test/bench/importTime.ts', ['9']) as unknown as { rounds: number; swarmstate: Program; baseline: Program; ratio: number; pairedRatio: number; cpuRatio: number };
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  const packages = (p: Program) =>
    Object.entries(p.modules.byPackage)
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name} ${n}`)
      .join(', ');
  const row = (label: string, p: Program) =>
    `| ${label} | ${ms(p.ms)} | ${ms(p.cpuMs)} | ${ms(p.processMs)} | ${p.runs.map((x) => x.toFixed(0)).join(', ')} | ${p.modules.total} (${packages(p)}) |`;
  const ok = r.ratio <= 1.5;
  console.log(`import: swarmstate ${ms(r.swarmstate.ms)}, xstate + undici ${ms(r.baseline.ms)}: ${r.ratio.toFixed(2)}x (paired ${r.pairedRatio.toFixed(2)}x, CPU ${r.cpuRatio.toFixed(2)}x)`);
  writeSection(
    'import',
    `## Cold import against xstate + undici (issue 27)

\`import('swarmstate')\` (the built package, \`dist/src/index.js\`) against a process that imports
what every run with an HTTP provider loads anyway, \`xstate\` and \`undici\`. Each import in a fresh
\`node\` process (\`performance.now()\` and \`process.cpuUsage()\` around the \`await import\`; *to the
end of the import* counts Node's own start too), the two alternating in ${r.rounds} rounds (the order
swapped each round) after a warm-up of each; medians. The modules are counted in one more run
of each with a preload that records every module loaded, ES modules and CommonJS files
(\`test/fixtures/record-modules.mjs\`; *swarmstate* is this package's own files). ${machineLine()}.

| import | wall (median) | CPU (median) | to the end of the import | runs (wall, ms) | modules loaded |
|---|---:|---:|---:|---|---|
${row('`swarmstate`', r.swarmstate)}
${row('`xstate` + `undici`', r.baseline)}

| goal | result | met |
|---|---|---|
| \`import('swarmstate')\` ≤ 1.5× \`import('xstate')\` + \`import('undici')\` (wall, medians) | ${r.ratio.toFixed(2)}× (per round, median: ${r.pairedRatio.toFixed(2)}×; CPU: ${r.cpuRatio.toFixed(2)}×) | ${ok ? 'yes' : '**NO**'} |

What the import leaves out loads on first use: zod and the plan's schemas with the first plan
checked, OpenTelemetry's API with the first run's tracer, the simulator (and js-tiktoken) when
one starts, the live page, the events file reader, and, as before (issue 15), undici, ajv, the
MCP SDK, the SQLite driver, bullmq and ioredis (\`test/importLazy.test.ts\` checks the list).
Before this (\`f814817\`), the same comparison on this machine (9 rounds, a quieter moment):
swarmstate 300 ms against 135 ms (2.22×; CPU 364 against 168 ms), 361 modules (zod 95,
@opentelemetry/api 44, the simulator, the report's reader and the live page among them); after,
181 ms (1.34×), 199 modules.`,
  );
}
