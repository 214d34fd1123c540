/**
 * `npm run bench [-- <name>...]`: runs the benchmarks, each size in a fresh process (so peak RSS
 * is that run's own), and writes their tables into docs/benchmarks.md between markers.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';

const DOC = 'docs/benchmarks.md';

function child(script: string, args: string[]): Record<string, number> {
  const out = execFileSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const last = out.trim().split('\n').pop()!;
  return JSON.parse(last) as Record<string, number>;
}

function machineLine(): string {
  return `Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${new Date().toISOString().slice(0, 10)}`;
}

function writeSection(name: string, body: string): void {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  let doc = existsSync(DOC) ? readFileSync(DOC, 'utf8') : '# Benchmarks\n\nWritten by `npm run bench`; each table is replaced when its benchmark runs again.\n';
  const block = `${start}\n${body.trim()}\n${end}`;
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  doc = i >= 0 && j > i ? doc.slice(0, i) + block + doc.slice(j + end.length) : `${doc.trimEnd()}\n\n${block}\n`;
  writeFileSync(DOC, doc);
}

const benches: Record<string, () => void> = {
  scheduler() {
    const sizes = [1_000, 10_000];
    const rows = sizes.map((n) => child('test/bench/scheduler.ts', [String(n)]));
    for (const r of rows) console.log(`scheduler: ${r.tasks} tasks ${r.ms!.toFixed(0)} ms, ${r.usPerTask!.toFixed(1)} us/task, ${r.maxRssMb!.toFixed(0)} MB`);
    const [small, large] = rows as [Record<string, number>, Record<string, number>];
    const growth = large.usPerTask! / small.usPerTask!;
    const ok = (b: boolean) => (b ? 'yes' : '**NO**');
    writeSection(
      'scheduler',
      `## Scheduler overhead (issue 2)

A layered DAG (100 tasks per layer, each task after the first layer depends on 1-3 tasks of the
layer before), \`maxInFlight\` 50, on an instant in-process provider: every microsecond is the
runtime's own (actors, events, leases, breakers, bookkeeping). Each size runs in a fresh process
after a 200-task warm-up. ${machineLine()}.

| tasks | wall time | tasks/s | overhead per task | peak RSS |
|---:|---:|---:|---:|---:|
${rows.map((r) => `| ${r.tasks!.toLocaleString('en')} | ${r.ms!.toFixed(0)} ms | ${r.tasksPerSec!.toFixed(0)} | ${r.usPerTask!.toFixed(1)} µs | ${r.maxRssMb!.toFixed(0)} MB |`).join('\n')}

| goal | result | met |
|---|---|---|
| ≤ 250 µs per task at 10,000 | ${large.usPerTask!.toFixed(1)} µs | ${ok(large.usPerTask! <= 250)} |
| ≤ 400 MB peak RSS at 10,000 | ${large.maxRssMb!.toFixed(0)} MB | ${ok(large.maxRssMb! <= 400)} |
| per-task overhead at 10,000 within 1.5× of 1,000 (no quadratic growth) | ${growth.toFixed(2)}× | ${ok(growth <= 1.5)} |`,
    );
  },
};

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
for (const name of wanted.length ? wanted : Object.keys(benches)) {
  const bench = benches[name];
  if (!bench) throw new Error(`unknown benchmark "${name}"; known: ${Object.keys(benches).join(', ')}`);
  bench();
}
console.log(`wrote ${DOC}`);
