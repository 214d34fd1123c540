/**
 * `npm run bench -- import` (issue 27): the cold import of the built package, `import('swarmstate')`
 * (dist/src/index.js; `npm run build` first), against a process that imports what every run with
 * an HTTP provider loads anyway, xstate and undici. Each import in a fresh child process, the two
 * interleaved (the order swapped each round) after a warm-up of each, so a busy moment of the
 * machine falls on both; medians. A recording run of each (test/fixtures/record-modules.mjs)
 * counts the modules it loads, by package. Prints one JSON line.
 *
 * Usage: node --import tsx test/bench/importTime.ts [rounds]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = process.cwd();
const rounds = Number(process.argv[2] ?? 9);

/** What each program imports, in order. */
const programs = { swarmstate: ['swarmstate'], baseline: ['xstate', 'undici'] } as const;
type Program = keyof typeof programs;

/**
 * One fresh process importing `specs`: the import's wall and CPU time (ms), and the process's
 * whole life up to the end of the import (Node's own start included).
 */
function importOnce(specs: readonly string[]): { ms: number; cpuMs: number; processMs: number } {
  const script = `
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (const s of ${JSON.stringify(specs)}) await import(s);
    const ms = performance.now() - t0;
    const c = process.cpuUsage(c0);
    console.log(JSON.stringify({ ms, cpuMs: (c.user + c.system) / 1000, processMs: performance.now() }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return JSON.parse(out.trim().split('\n').pop()!) as { ms: number; cpuMs: number; processMs: number };
}

/** The modules one import of `specs` loads: in all, and by package (`swarmstate` for this package's own files). */
function modulesOf(specs: readonly string[]): { total: number; byPackage: Record<string, number> } {
  const dir = mkdtempSync(join(tmpdir(), 'swarmstate-import-'));
  try {
    const file = join(dir, 'modules.txt');
    const script = `for (const s of ${JSON.stringify(specs)}) await import(s);`;
    execFileSync(process.execPath, ['--import', join(ROOT, 'test/fixtures/record-modules.mjs'), '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, SWARMSTATE_RECORD_MODULES: file },
    });
    const urls = new Set(readFileSync(file, 'utf8').split('\n').filter((u) => u.startsWith('file:')));
    const byPackage: Record<string, number> = {};
    for (const url of urls) {
      const name = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? 'swarmstate';
      byPackage[name] = (byPackage[name] ?? 0) + 1;
    }
    return { total: urls.size, byPackage };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const names = Object.keys(programs) as Program[];
for (const name of names) importOnce(programs[name]); // warm-up: the files into the OS cache
const samples = Object.fromEntries(names.map((n) => [n, [] as Array<{ ms: number; cpuMs: number; processMs: number }>])) as Record<Program, Array<{ ms: number; cpuMs: number; processMs: number }>>;
for (let round = 0; round < rounds; round++) {
  for (const name of round % 2 === 0 ? names : [...names].reverse()) samples[name].push(importOnce(programs[name]));
}
const stat = (name: Program, key: 'ms' | 'cpuMs' | 'processMs') => median(samples[name].map((s) => s[key]));
const summary = (name: Program) => ({
  specs: programs[name],
  ms: stat(name, 'ms'),
  cpuMs: stat(name, 'cpuMs'),
  processMs: stat(name, 'processMs'),
  runs: samples[name].map((s) => s.ms),
  modules: modulesOf(programs[name]),
});
const swarmstate = summary('swarmstate');
const baseline = summary('baseline');
// The two imports of a round ran close in time: their ratio, then the median over the rounds.
const paired = median(samples.swarmstate.map((s, i) => s.ms / samples.baseline[i]!.ms));
console.log(JSON.stringify({ rounds, swarmstate, baseline, ratio: swarmstate.ms / baseline.ms, pairedRatio: paired, cpuRatio: swarmstate.cpuMs / baseline.cpuMs }));
