/**
 * `npm run bench -- fnSteps`: what a code step (`kind: "fn"`) costs against a model task on an
 * instant provider and against a plain program running the same functions (test/bench/fnSteps.ts
 * runs each size and journal), written into docs/benchmarks.md.
 */
import { child, machineLine, writeSection } from './report.js';

type Out = {
  fnCpuUs: number; modelCpuUs: number; plainCpuUs: number; fnWallUs: number; modelWallUs: number;
  overModel: number; overPlain: number; wallOverModel: number; bareCpuUs: number; maxRssMb: number;
  cpu: { fn: number[]; model: number[]; plain: number[] };
};

export function fnStepsBench(): void {
  const sizes = [1_000, 10_000];
  const journals = ['none', 'sqlite'] as const;
  const label = { none: 'none (`store: false`)', sqlite: 'SQLite file (the default)' };
  const runs: Array<{ tasks: number; journal: (typeof journals)[number]; r: Out }> = [];
  // One fresh process per size and journal; the three programs alternate inside it, so their ratio
  // is measured under the same load of this shared machine.
  for (const tasks of sizes) {
    for (const journal of journals) {
      const r = child('test/bench/fnSteps.ts', [String(tasks), journal]) as unknown as Out;
      console.log(`fnSteps ${tasks} tasks, journal ${journal}: fn ${r.fnCpuUs.toFixed(0)} us CPU per step, ${r.overModel.toFixed(2)}x model task (${r.modelCpuUs.toFixed(0)} us), ${r.overPlain.toFixed(0)}x plain program (${r.plainCpuUs.toFixed(1)} us)`);
      runs.push({ tasks, journal, r });
    }
  }
  const us = (x: number) => `${x.toFixed(0)} µs`;
  const rows = runs.map(({ tasks, journal, r }) => {
    const rounds = r.cpu.fn.map((f, i) => `${f.toFixed(0)} / ${r.cpu.model[i]!.toFixed(0)} / ${r.cpu.plain[i]!.toFixed(1)}`).join('; ');
    return `| ${tasks.toLocaleString('en')} | ${label[journal]} | ${us(r.fnCpuUs)} | ${r.overModel.toFixed(2)}× (${us(r.modelCpuUs)}) | ${r.overPlain.toFixed(0)}× (${r.plainCpuUs.toFixed(1)} µs) | ${rounds} µs | ${us(r.fnWallUs)} (${r.wallOverModel.toFixed(2)}× model) |`;
  });
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  const big = sizes[1]!;
  const goals = journals.map((journal) => {
    const r = runs.find((x) => x.tasks === big && x.journal === journal)!.r;
    return `| a code step costs no more CPU than a model task on an instant provider (≤ 1.0×), ${big.toLocaleString('en')} tasks, journal ${label[journal]} | ${r.overModel.toFixed(2)}× | ${ok(r.overModel <= 1.0)} |`;
  });
  const bare = Math.min(...runs.map((x) => x.r.bareCpuUs));
  const at = (journal: string) => runs.find((x) => x.tasks === big && x.journal === journal)!.r;
  // Why the journal weighs more on a code step, when it does (a CPU profile of the 10,000-task run at the time of writing).
  const journalNote =
    at('sqlite').overModel > at('none').overModel
      ? `\n\nWith no journal a code step costs ${at('none').overModel.toFixed(2)}× a model task, with SQLite ${at('sqlite').overModel.toFixed(2)}×: before a function
runs, the runtime commits what is pending in the journal (src/run/start.ts, \`beforeCall\`), so each
code step is one SQLite transaction, where a model call commits only when spend is pending and
otherwise rides the batch of its macrotask. A CPU profile of the ${big.toLocaleString('en')}-task SQLite run put the
journal's \`transact\` first in self time (about 19% of the process, against about 1% for the model tasks).`
      : '';
  writeSection(
    'fnSteps',
    `## Code steps (issue 26)

What a code step (\`kind: "fn"\`) costs in the runtime. The scheduler benchmark's layered DAG
(100 tasks per layer, deps on 1-3 tasks of the layer before, seeded, \`maxInFlight\` 50), every
task \`{ "kind": "fn", "fn": "step" }\` whose function answers at once with a small JSON value
(its depth in the DAG and its number of deps; the last task's depth is checked), against two
programs run in the same process: **the model task**, the same DAG with every task a model call
on an instant in-process provider (the scheduler benchmark's run, \`test/bench/measure.ts\`), and
**a plain program**: the same function awaited as soon as its deps have resolved, at most 50 at
once (a p-limit-like limiter of a dozen lines). Each size and journal runs in a fresh process:
a warm-up of each program (2,000 tasks, or the size), then three rounds, each starting with
another program. Per step is the process's CPU time (user + system) over the run, divided by the
tasks; the ratios are taken per round (the runs of a round are close in time) and their median
counts, since on this shared machine the absolute figures move by a third from round to round.
For scale, one bare XState actor lifecycle took ${bare.toFixed(1)} µs of CPU in the fastest of these processes.
${machineLine()}.

| tasks | journal | fn step CPU (median) | × model task (same DAG, same process) | × plain program | runs (CPU per step: fn / model / plain) | fn step wall (median) |
|---:|---|---:|---:|---:|---|---:|
${rows.join('\n')}

| goal | result | met |
|---|---|---|
${goals.join('\n')}

The plain program is the peer's cost, what "just calling the functions" takes, not a floor the
runtime could reach: a code step is a task like any other, so it is scheduled, goes out as an
actor with its deadline and its AbortSignal, is retried, reported (\`task:started\`, \`task:completed\`
and the rest, progress, spans) and journaled, and its value is checked to be JSON and kept as
text for its dependents' prompts, which a plain program does none of.${journalNote}`,
  );
}
