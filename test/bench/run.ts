/**
 * `npm run bench [-- <name>...]`: runs the benchmarks, each size in a fresh process (so peak RSS
 * is that run's own), and writes their tables into docs/benchmarks.md between markers.
 */
import { availableDrivers } from '../../src/store/driver.js';
import { child, DOC, machineLine, writeSection } from './report.js';
import { fnStepsBench } from './fnStepsTable.js';
import { importBench } from './importTable.js';
import { inflightBench } from './inflightTable.js';
import { pacingBench } from './pacingTable.js';
import { schedulerBench } from './schedulerTable.js';
import { throughputBench } from './throughputTable.js';

const benches: Record<string, () => void> = {
  scheduler: schedulerBench,

  tools() {
    const configs = [
      { name: 'sharing on (default)', arg: 'on' },
      { name: 'sharing off (`shareTools: false`)', arg: 'off' },
    ];
    const rows = configs.map((c) => ({ ...c, r: child('test/bench/tools.ts', [c.arg]) }));
    const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
    // The tool's only limit is the local server's 8 concurrent executions: each one is 20 ms.
    const floor = (r: Record<string, number>) => (r.executions! * 20) / 8;
    for (const { arg, r } of rows) {
      console.log(`tools ${arg}: ${r.requested} requested, ${r.executed} executed (expected ${r.expectedExecuted}), ${r.executions} executions, ${r.modelRequests} model requests, ${s(r.wallMs!)}`);
    }
    const [on, off] = rows.map((x) => x.r) as [Record<string, number>, Record<string, number>];
    const ratio = (k: string) => `${(on[k]! / off[k]!).toFixed(2)}×`;
    writeSection(
      'tools',
      `## Tool sharing

100 independent agents, each with one reply of 10 parallel calls (one \`[[sim:tool]]\` directive
each) of an in-process, read-only tool that waits 20 ms, then a text reply. 30% of the 1,000
calls (300, at seeded positions) take their argument from a pool of 20 shared by all agents
(seeded: ${on.distinctShared} of them drawn), the other 700 are unique. The simulator answers at once with no limits;
\`maxInFlight\` 100; the plan's default tool settings (batch window 10 ms, batch size 16, cache
300 s, 8 executions at once on the \`local\` server). *Executed* counts the tool handler's
invocations; *bus executions* are the bus's executor children (the tool has no batch handler, so
one per executed call); *model round trips* are requests to the simulator. Each configuration
runs in a fresh process after a 10-agent warm-up. ${machineLine()}.

| configuration | agents completed | tool calls requested | executed | saved by sharing (joined in flight + from cache) | bus executions | model round trips | wall time | floor (executions × 20 ms / 8) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.map(({ name, r }) => `| ${name} | ${r.completed} / ${r.agents} | ${r.requested} | ${r.executed} | ${r.saved} (${r.deduplicated} + ${r.cached}) | ${r.executions} | ${r.modelRequests} | ${s(r.wallMs!)} | ${s(floor(r))} |`).join('\n')}
| on / off | | | ${ratio('executed')} | | ${ratio('executions')} | ${ratio('modelRequests')} | ${ratio('wallMs')} | ${(floor(on) / floor(off)).toFixed(2)}× |

Sharing ran exactly the ${on.expectedExecuted} distinct calls (700 unique + the ${on.distinctShared} pool entries drawn), each
other call either joining an identical one in flight or read from the cache, and since the
server's 8 slots are the bottleneck, wall time fell about in proportion to the executions
(${ratio('wallMs')} against ${(floor(on) / floor(off)).toFixed(2)}× for the floor) while the model round trips (2 per agent) did not change.`,
    );
  },
};

benches.budget = () => {
  const r = child('test/bench/budget.ts', []) as unknown as Record<string, number | string>;
  const n = (k: string) => Number(r[k]);
  console.log(`budget: spent $${n('spentUsd').toFixed(4)} of $${n('budgetUsd')}, ${r.completed} completed, ${r.refused} refused`);
  const ok = n('spentUsd') <= n('budgetUsd') && n('completedWithOutput') === n('completed') && n('requests') === n('completed');
  writeSection(
    'budget',
    `## Budget (issue 6)

100 independent tasks on the embedded simulator whose calls cost about $0.02 each (200 output
tokens at $100 per million), about $${n('wouldCostUsd').toFixed(2)} in all, under a $${n('budgetUsd')} run budget, \`maxInFlight\` 5.
Every call reserves its worst case (256 output tokens, input estimate with a margin) before it is
sent; a request that only outstanding reservations block waits for them to settle. ${machineLine()}.

| budget | would cost | spent | completed (all with output) | refused, never sent | requests | status | met |
|---:|---:|---:|---:|---:|---:|---|---|
| $${n('budgetUsd')} | $${n('wouldCostUsd').toFixed(2)} | $${n('spentUsd').toFixed(4)} | ${r.completed} (${r.completedWithOutput}) | ${r.refused} | ${r.requests} | ${r.status} | ${ok ? 'yes' : '**NO**'} |`,
  );
};

benches.journal = () => {
  // Three runs of each, alternating, to see past the noise of a 2-core machine; the median counts.
  // SQLite on every driver this Node loads (better-sqlite3, node:sqlite), each on a fresh file.
  const kinds = ['memory', ...availableDrivers()];
  const rows: Array<{ kind: string; us: number }> = [];
  for (let i = 0; i < 3; i++) {
    for (const kind of kinds) {
      const r = kind === 'memory' ? child('test/bench/scheduler.ts', ['10000', 'memory']) : child('test/bench/scheduler.ts', ['10000', 'sqlite'], { SWARMSTATE_SQLITE: kind });
      rows.push({ kind, us: r.usPerTask! });
    }
  }
  const usOf = (kind: string) => rows.filter((r) => r.kind === kind).map((r) => r.us).sort((a, b) => a - b);
  const median = (kind: string) => usOf(kind)[1]!;
  const mem = median('memory');
  const label = (kind: string) => (kind === 'memory' ? 'in memory' : `SQLite file, ${kind}`);
  const lines = kinds.map((kind) => `| ${label(kind)} | ${median(kind).toFixed(1)} µs | ${kind === 'memory' ? '' : `${(median(kind) / mem).toFixed(2)}×`} | ${rows.filter((r) => r.kind === kind).map((r) => r.us.toFixed(0)).join(', ')} µs |`);
  const goals = kinds.filter((k) => k !== 'memory').map((kind) => {
    const ratio = median(kind) / mem;
    return `| SQLite on ${kind} ≤ 1.5× the in-memory store | ${ratio.toFixed(2)}× | ${ratio <= 1.5 ? 'yes' : '**NO**'} |`;
  });
  for (const kind of kinds) console.log(`journal: ${label(kind)} ${median(kind).toFixed(1)} us/task`);
  writeSection(
    'journal',
    `## Journaling overhead (issue 7; both SQLite drivers: issue 15)

The scheduler benchmark above (10,000 tasks, layered DAG, instant provider, \`maxInFlight\` 50)
with a journal: the in-memory store, and SQLite (WAL, \`synchronous=NORMAL\`) on a fresh file on
each driver this Node loads (better-sqlite3; Node's built-in node:sqlite from Node 22.13), as
every durable run writes it: each task's start, attempt, completion with output and usage, the
run's counters. Writes are batched into one transaction per macrotask (or per 512 writes); spend is committed before
each model call. Three runs of each in fresh processes, alternating; the median counts.
${machineLine()}.

| journal | overhead per task (median) | × in memory | runs |
|---|---:|---:|---|
${lines.join('\n')}

| goal | result | met |
|---|---|---|
${goals.join('\n')}

Committing every completion at once (one transaction per task) cost about 1.8× here: the
completions ride the batch instead, and a crash loses at most one macrotask of them (a resume
runs those tasks again).`,
  );
};

benches.distributed = () => {
  const rows = [1, 2, 4].map((n) => child('test/bench/distributed.ts', [String(n)]));
  // Keys as the bottleneck: 600 tasks, 4 keys at 100 requests per minute, 4 workers.
  const bound = child('test/bench/distributed.ts', ['4', '100', '600', '4']);
  console.log(`distributed, binding limits: ${(bound.makespanMs! / 1000).toFixed(1)} s, ${bound.rateLimited} 429s, max ${bound.maxPerKeyWindow} per key per 60 s (limit 100)`);
  for (const r of rows) console.log(`distributed: ${r.workers} worker(s) ${(r.makespanMs! / 1000).toFixed(1)} s, ${r.tasksPerSec!.toFixed(1)} tasks/s, ${r.rateLimited} 429s`);
  const one = rows[0]!;
  const speedup = (r: Record<string, number>) => one.makespanMs! / r.makespanMs!;
  const four = rows[2]!;
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  writeSection(
    'distributed',
    `## Distributed scaling (issue 8)

The same 2,000 independent tasks, each one model call, run by a coordinator process
(\`swarmstate run plan.json --redis <url>\`) and 1, 2 or 4 worker processes (\`swarmstate worker --concurrency 16\`)
through BullMQ on a private Redis (no persistence), against the simulated provider: 500 ms to
first token, 10 keys held by the server to 2,000 requests per minute each (the plan states the
same limits, so the coordinator's key actors pace every worker's calls). The coordinator's
\`maxInFlight\` is 128, so the workers' slots are the bottleneck: the ideal is 2,000 × 0.5 s /
(16 × workers). Each configuration runs in fresh processes. ${machineLine()}.

| workers | makespan | tasks/s | speed-up | ideal makespan | 429s | max requests per key in 60 s (limit 2,000) |
|---:|---:|---:|---:|---:|---:|---:|
${rows.map((r) => `| ${r.workers} | ${(r.makespanMs! / 1000).toFixed(1)} s | ${r.tasksPerSec!.toFixed(1)} | ${speedup(r).toFixed(2)}× | ${(2000 * 0.5 / (16 * r.workers!)).toFixed(1)} s | ${r.rateLimited} | ${r.maxPerKeyWindow} |`).join('\n')}

| goal | result | met |
|---|---|---|
| ≥ 3.2× at 4 workers while keys are not the bottleneck | ${speedup(four).toFixed(2)}× | ${ok(speedup(four) >= 3.2)} |
| no loss of rate-limit accuracy (0 429s; no key over its limit) | ${rows.reduce((n, r) => n + r.rateLimited!, 0)} 429s, max ${Math.max(...rows.map((r) => r.maxPerKeyWindow!))} per key per 60 s | ${ok(rows.every((r) => r.rateLimited === 0 && r.maxPerKeyWindow! <= 2000))} |

What is left of the ideal is each call's trip through Redis (a job added, taken, completed, its
result read back) and the coordinator's own work.

**When the keys are the bottleneck** (the same setup with 600 tasks, 4 keys each limited to 100
requests per minute by the server and the plan, and 4 workers): the coordinator's key actors pace
every worker's calls. The 400 calls the keys allow go at once, the last 200 when the oldest grants
leave the 60 s window, so about 60 s plus one call is the least it can take.

| makespan | 429s | max requests per key in any 60 s window (limit 100) | met |
|---:|---:|---:|---|
| ${(bound.makespanMs! / 1000).toFixed(1)} s | ${bound.rateLimited} | ${bound.maxPerKeyWindow} | ${ok(bound.rateLimited === 0 && bound.maxPerKeyWindow! <= 100)} |`,
  );
};

benches.cache = () => {
  const modes = [
    { name: 'cache-aware fan-out (default)', arg: 'fanout' },
    { name: 'all sent at once (`cacheFanOut: false`)', arg: 'atonce' },
    { name: 'no caching (`cache: false`)', arg: 'nocache' },
  ];
  const rows = modes.map((m) => ({ ...m, r: child('test/bench/cache.ts', [m.arg]) }));
  const limited = child('test/bench/cache.ts', ['itpm']);
  console.log(`cache itpm: ${limited.makespanMs!.toFixed(0)} ms (server's bound ${limited.boundMs!.toFixed(0)} ms), ${limited.rateLimited} 429`);
  for (const { arg, r } of rows) console.log(`cache ${arg}: $${r.inputUsd!.toFixed(4)} input (${r.ratio!.toFixed(3)}× minimum), ${r.makespanMs!.toFixed(0)} ms`);
  const [fan, once] = rows.map((x) => x.r) as [Record<string, number>, Record<string, number>];
  const growth = fan.makespanMs! - once.makespanMs!;
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  writeSection(
    'cache',
    `## Cache-aware fan-out (issue 6)

20 agents whose requests share a ${fan.prefixTokens!.toLocaleString('en')}-token prefix (a brief in the system prompt), all ready at
once (\`maxInFlight\` 20), on the embedded simulator: Anthropic protocol with prompt caching (a
prefix written by a response becomes readable when that response starts), 100 ms base time to
first token plus 40 ms per 1,000 uncached input tokens of prompt processing (so ${fan.ttftMs!.toFixed(0)} ms for a cold
prompt), 200 output tokens at 400 tokens/s. Prices per million tokens: input $3, cache write
$3.75 (1.25×), cache read $0.30 (0.1×), output $15. *Minimum*: the prefix written once and read
19 times, each agent's own tail at the input price. Usage is the simulator's own cache
accounting. Each configuration runs in a fresh process after a warm-up. ${machineLine()}.

| configuration | cache writes (tokens) | cache reads (tokens) | input cost | vs minimum ($${fan.minimumUsd!.toFixed(4)}) | makespan |
|---|---:|---:|---:|---:|---:|
${rows.map(({ name, r }) => `| ${name} | ${r.cacheWriteTokens!.toLocaleString('en')} | ${r.cacheReadTokens!.toLocaleString('en')} | $${r.inputUsd!.toFixed(4)} | ${r.ratio!.toFixed(3)}× | ${r.makespanMs!.toFixed(0)} ms |`).join('\n')}

| goal | result | met |
|---|---|---|
| input cost within 1.1× of one write + 19 reads | ${fan.ratio!.toFixed(3)}× | ${ok(fan.ratio! <= 1.1)} |
| makespan grows by at most one time to first token (${fan.ttftMs!.toFixed(0)} ms) against all at once | +${growth.toFixed(0)} ms | ${ok(growth <= fan.ttftMs!)} |

Sent all at once, the 20 requests reach the server before any response has started, so every
one of them writes the prefix: that costs more than not caching at all. With fan-out the leader
goes first; when its response starts the other 19 go and read the prefix, and since a cached
prefix needs no prompt processing their own time to first token is short, so the makespan grows
by much less than one cold time to first token.

**Under an input-token limit.** The same fan-out on one key with \`itpm\` ${limited.itpm!.toLocaleString('en')} (the key's and
the server's: a bucket of one second, ${(limited.itpm! / 60).toLocaleString('en')} tokens): ${(limited.makespanMs! / 1000).toFixed(1)} s, ${limited.rateLimited} 429s. Anthropic does
not count cache reads against ITPM, so a task of a warm group leases its key for its own tail
only; charged its whole prompt, the 19 went one at a time (17.8 s on this machine before that
change). The server's own bucket allows ${(limited.boundMs! / 1000).toFixed(1)} s at best: the leader's whole prompt
(written to the cache) puts it in debt, the followers fit once that is repaid, then take one
cached call each. The rest is the key's estimate of the leader's prompt (about 4 characters a
token: a third over the simulator's count on this text), which a refund at the leader's end gives
back only in part: the key cannot tell that the server's bucket, in debt too, lost nothing to its
cap meanwhile.`,
  );
};

benches.mapreduce = () => {
  const r = child('test/bench/mapreduce.ts', ['10000']);
  console.log(`mapreduce: ${r.items} items ${r.usPerItem!.toFixed(1)} us/item against ${r.usPerTaskPlain!.toFixed(1)} us/task plain (${r.ratio!.toFixed(2)}x), depth ${r.depth}, ${r.mapRssMb!.toFixed(0)} MB`);
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  writeSection(
    'mapreduce',
    `## Map and reduce (issue 13)

10,000 items through a \`map\` (one sub-task per item, inline \`values\`), then a \`reduce\` over it
with \`fanIn\` 16, \`maxInFlight\` 50, on the instant in-process provider and without a journal, as
the scheduler benchmark above; that benchmark's 10,000-task layered DAG runs in the same process
for the comparison. After a warm-up of each, three rounds alternate the two; the medians count.
The wall time covers everything: the map's expansion (items filled in and resolved), the items,
the ${r.groups!.toLocaleString('en')} groups of the tree (each a model call) and the map's output (a JSON array of 10,000
outputs). Peak RSS is the process's after the first map and reduce (before any plain run). The
ratio is the figure to read: both runs share the process and whatever else loads the machine.
${machineLine()}.

| run | wall time (median) | per item / task |
|---|---:|---:|
| map + reduce, 10,000 items | ${r.mapMs!.toFixed(0)} ms | ${r.usPerItem!.toFixed(1)} µs |
| plain scheduler, 10,000 tasks | ${r.plainMs!.toFixed(0)} ms | ${r.usPerTaskPlain!.toFixed(1)} µs |

| goal | result | met |
|---|---|---|
| overhead per item within 1.2× of the plain scheduler's per task | ${r.ratio!.toFixed(2)}× | ${ok(r.ratio! <= 1.2)} |
| reduce depth = ceil(log16 10,000) = ${r.expectedDepth} | ${r.depth} levels, ${r.groups!.toLocaleString('en')} groups | ${ok(r.depth === r.expectedDepth)} |
| peak RSS | ${r.mapRssMb!.toFixed(0)} MB | (no goal; the scheduler's is ≤ 400 MB) |

The first level's groups wait for the map's items themselves, so merging runs alongside the map:
there is no barrier per level, and a ready group goes before the remaining items.`,
  );
};

benches.tracing = () => {
  type Out = {
    tasks: number; rounds: number; spansPerRun: number;
    cpuUsPerTask: Record<string, number>; runs: Record<string, number[]>; noopRatio: number; sdkRatio: number;
    tracerUsPerTask: Record<string, number>; isolatedSdkShare: number; isolatedNoopShare: number;
  };
  const r = child('test/bench/tracing.ts', ['2000', '7']) as unknown as Out;
  const us = r.cpuUsPerTask;
  const t = r.tracerUsPerTask;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  console.log(`tracing: runtime ${us.off!.toFixed(0)} us/task; tracer alone: no-op ${t.noop!.toFixed(2)} us (${pct(r.isolatedNoopShare)}), SDK ${t.sdk!.toFixed(1)} us (${pct(r.isolatedSdkShare)})`);
  const ok = (b: boolean) => (b ? 'yes' : '**NO**');
  const runs = (mode: string) => r.runs[mode]!.map((x) => x.toFixed(0)).join(', ');
  writeSection(
    'tracing',
    `## Tracing overhead (issue 15)

The scheduler benchmark's layered DAG (${r.tasks.toLocaleString('en')} tasks, \`maxInFlight\` 50, no journal) on an instant
in-process provider, so the runtime's own work is all there is, with tracing off
(\`tracer: false\`), the default (the global \`@opentelemetry/api\` tracer with no SDK registered:
a no-op), and an SDK recording every span (\`BasicTracerProvider\`, \`BatchSpanProcessor\` as an
application exports, \`InMemorySpanExporter\`: ${r.spansPerRun.toLocaleString('en')} spans a run, 3 per task and the run's).

**The tracer's own cost**: one run's ${r.tasks.toLocaleString('en')}-task event stream, recorded, then replayed through
the run tracer alone and the SDK's export of its spans (15 times each after 8 warm-up replays;
median), against the runtime's CPU time per task with tracing off (median of the runs below):

| tracing | tracer's cost per task | share of the runtime's ${us.off!.toFixed(0)} µs per task |
|---|---:|---:|
| no SDK (no-op API, the default) | ${t.noop!.toFixed(2)} µs | ${pct(r.isolatedNoopShare)} |
| in-memory SDK | ${t.sdk!.toFixed(1)} µs | ${pct(r.isolatedSdkShare)} |

| goal | result | met |
|---|---|---|
| tracing ≤ 10% over tracing off, per task: the tracer's own work and the export | ${pct(r.isolatedSdkShare)} with an SDK; ${pct(r.isolatedNoopShare)} without | ${ok(r.isolatedSdkShare <= 0.1)} |
| the same, end to end (medians below) | ${r.sdkRatio.toFixed(2)}× with an SDK; ${r.noopRatio.toFixed(2)}× without | ${ok(r.sdkRatio <= 1.1)} |

**End to end** (CPU time of the process per task; the three modes alternate in one process, ${r.rounds}
runs each after a warm-up). On this shared machine the runs of one mode differ by more than
the tracer costs; and here the in-memory exporter keeps every span of a run alive until the
run is over (garbage the collector has to walk), which an OTLP exporter, sending and dropping
them in batches, does not. ${machineLine()}.

| tracing | per task (median) | runs (µs per task) | vs off |
|---|---:|---|---:|
| off | ${us.off!.toFixed(0)} µs | ${runs('off')} | 1.00× |
| no SDK | ${us.noop!.toFixed(0)} µs | ${runs('noop')} | ${r.noopRatio.toFixed(2)}× |
| in-memory SDK | ${us.sdk!.toFixed(0)} µs | ${runs('sdk')} | ${r.sdkRatio.toFixed(2)}× |

Most of the SDK's cost is the SDK's own span bookkeeping (ids, attributes, the processor); with
\`SimpleSpanProcessor\` (one export per span) it is several times higher. A real model call takes
0.5 to 60 s: against that, microseconds per task do not show.`,
  );
};

benches.pacing = pacingBench;
benches.inflight = inflightBench;
benches.fnSteps = fnStepsBench;
benches.throughput = throughputBench;
benches.import = importBench;

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
for (const name of wanted.length ? wanted : Object.keys(benches)) {
  const bench = benches[name];
  if (!bench) throw new Error(`unknown benchmark "${name}"; known: ${Object.keys(benches).join(', ')}`);
  bench();
}
console.log(`wrote ${DOC}`);
