/**
 * Property: on random runs of the real runtime (an in-process scripted provider, a SQLite journal
 * file in a temp dir), every surface counts what the journal holds. After each life of a run (the
 * run, a resume after a cancel, a retry of its failures) the journal's rows, read with SQL, are
 * the oracle; `--json` (the result), the summary, `show`, the report (from the events alone and
 * with the result), the live page and the progress state must say the same tasks by status,
 * containers, attempts, requests, retries and cost, task by task where they list tasks.
 *
 * The runs are sized to reach what the counts depend on, and the shares are asserted: in-attempt
 * retries (a 500), new attempts (an invalid answer), 429s, maps, reduces (split into groups), a
 * review that sends its draft back, a resume after a cancel, and a retry of a failed task: each
 * in half the runs or more (a cancel may cut one short), asserted in at least 20%. 25 runs, about
 * 3 s; fast-check's seed is printed when one fails.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RunResult } from '../../machines/tasks/results.js';
import { analyze } from '../../src/report/index.js';
import { createScriptedProvider, createSwarm, ProviderError, type RunHandle } from '../../src/index.js';
import type { TimedRunEvent } from '../../src/swarm.js';
import { journalOracle, journalPageCards, jsonSurface, pageCards, progressSurface, reportCards, runsSurface, showSurface, summarySurface, type Oracle } from '../helpers/surfaces.js';

const RUNS = 25;
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-counts-prop-'));
const env = { COUNTS_KEY: 'sk-counts-property-key', COUNTS_KEY_Q: 'sk-counts-property-other' };

interface Spec {
  /** Plain tasks, each with deps on earlier ones. */
  deps: number[][];
  /** The task (index, modulo their number) whose first call is a 500: retried within the attempt. */
  server: number | null;
  /** The task whose first answer is not the JSON its schema asks for: a new attempt. */
  invalid: number | null;
  /** The task refused (a 400, not retried) until the run is retried: it fails, its dependents are skipped. */
  refuse: number | null;
  /** A map of 3 to 5 items, and a reduce over them (fanIn 2: split into groups). */
  map: 'none' | 'map' | 'mapReduce';
  items: number;
  /** A review of the first task that sends it back once. */
  review: boolean;
  /**
   * A task whose first call is answered 429, on a key of its own: a 429 cuts its key's pace
   * (adaptive), which would hold every later call of the run for seconds on a shared key.
   */
  rate: boolean;
  /** Cancel the run at its first completion, then resume it. */
  resume: boolean;
}

/** True 3 times in 5. */
const often = fc.integer({ min: 0, max: 4 }).map((n) => n < 3);
// A task 2 times in 3 (fast-check's option is nil 1 time in `freq`).
const sometimesTask = fc.option(fc.nat(4), { freq: 3 });
const specArb: fc.Arbitrary<Spec> = fc
  .record({
    deps: fc.array(fc.array(fc.nat(4), { maxLength: 2 }), { minLength: 2, maxLength: 5 }),
    server: sometimesTask,
    invalid: sometimesTask,
    refuse: sometimesTask,
    map: fc.constantFrom<Spec['map']>('none', 'map', 'mapReduce', 'mapReduce'),
    items: fc.integer({ min: 3, max: 5 }),
    review: often,
    rate: often,
    resume: often,
  })
  // Deps only on earlier tasks: a DAG.
  .map((s) => ({ ...s, deps: s.deps.map((d, i) => [...new Set(d.filter((x) => x < i))]) }));

/** Which plain task each misbehaviour falls on. */
const at = (spec: Spec, which: number | null) => (which === null ? undefined : `t${which % spec.deps.length}`);

function planOf(spec: Spec) {
  const invalid = at(spec, spec.invalid);
  const tasks: Record<string, unknown>[] = spec.deps.map((deps, i) => ({
    id: `t${i}`,
    model: 'm',
    prompt: `task ${i}${deps.map((d) => ` {{t${d}}}`).join('')}`,
    ...(deps.length > 0 ? { deps: deps.map((d) => `t${d}`) } : {}),
    ...(invalid === `t${i}` ? { output: { schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } } } : {}),
  }));
  if (spec.map !== 'none') {
    tasks.push({ id: 'mp', kind: 'map', model: 'm', items: { values: Array.from({ length: spec.items }, (_, i) => `item ${i}`) }, prompt: 'do {{item}}' });
    if (spec.map === 'mapReduce') tasks.push({ id: 'rd', kind: 'reduce', model: 'm', over: 'mp', fanIn: 2, prompt: 'merge these' });
  }
  if (spec.review) tasks.push({ id: 'rv', kind: 'review', model: 'm', reviews: 't0', maxRounds: 2, prompt: 'review it' });
  if (spec.rate) tasks.push({ id: 'rl', model: 'q', prompt: 'limited' });
  return {
    providers: { p: { type: 'anthropic', keys: [{ env: 'COUNTS_KEY' }] }, q: { type: 'anthropic', keys: [{ env: 'COUNTS_KEY_Q' }] } },
    models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 }, q: { provider: 'q', model: 'claude-haiku-4-5', maxTokens: 64 } },
    defaults: { maxRetries: 1, maxInFlight: 3 },
    tasks,
  };
}

/** The provider of one run, over all its lives: each task's calls misbehave as its spec says. */
function providerOf(spec: Spec, phase: { retried: boolean }) {
  const calls = new Map<string, number>();
  const [server, invalid, refuse] = [at(spec, spec.server), at(spec, spec.invalid), at(spec, spec.refuse)];
  return createScriptedProvider({
    reply: (req) => {
      const id = req.meta.taskId;
      // Refused calls are not counted: a task refused in the first life misbehaves after the retry as it would have.
      if (id === refuse && !phase.retried) throw new ProviderError('bad_request', 'scripted 400', { status: 400 });
      const n = calls.get(id) ?? 0;
      calls.set(id, n + 1);
      if (id === 'rv') return n === 0 ? 'REVISE: say more' : 'APPROVE';
      if (id === 'rl' && n === 0) throw new ProviderError('rate_limited', 'scripted 429', { status: 429, retryAfterMs: 1 });
      if (id === server && n === 0) throw new ProviderError('server_error', 'scripted 500', { status: 500 });
      if (id === invalid) return n <= (id === server ? 1 : 0) ? 'not JSON at all' : '{"ok": true}';
      return `answer of ${id}`;
    },
  });
}

/** One life of the run: its events and result. */
async function life(run: RunHandle, cancelAtFirstCompletion = false): Promise<{ events: TimedRunEvent[]; result: RunResult }> {
  const events: TimedRunEvent[] = [];
  run.events.on('*', (_t: string, e: unknown) => {
    events.push(e as TimedRunEvent);
    if (cancelAtFirstCompletion && (e as TimedRunEvent).type === 'task:completed') run.cancel('the property cancels it');
  });
  return { events, result: await run.result };
}

const COUNT_KEYS = ['tasks', 'completed', 'failed', 'skipped', 'cancelled', 'containers', 'attempts', 'requests', 'retries'] as const;
const countsOf = (o: Oracle) => Object.fromEntries(COUNT_KEYS.map((k) => [k, o[k]]));

/** Every surface against the journal after one life. */
async function checkSurfaces(file: string, { events, result }: { events: TimedRunEvent[]; result: RunResult }, what: string) {
  const oracle = journalOracle(file, result.runId);
  const expected = countsOf(oracle);
  const json = jsonSurface(result);
  expect(json.totals, `${what}: --json`).toMatchObject(expected);
  expect(json.perTask, `${what}: --json tasks`).toEqual(oracle.perTask);
  expect(summarySurface(result, events), `${what}: summary`).toMatchObject({ ...expected, containers: oracle.containers });
  const shown = await showSurface(file, result.runId);
  expect(shown.totals, `${what}: show`).toMatchObject(expected);
  expect(shown.perTask, `${what}: show tasks`).toEqual(oracle.perTask);
  for (const [surface, model] of [
    ['report (events)', analyze(events, undefined, undefined, { ended: true })],
    ['report (events and result)', analyze(events, result)],
    ['live page', analyze(events)],
  ] as const) {
    const c = model.counts;
    expect({ tasks: c.tasks, ...c.byStatus, containers: c.containers, attempts: c.attempts, requests: c.requests, retries: c.retries }, `${what}: ${surface}`).toMatchObject(expected);
    expect(c.costUsd ?? 0, `${what}: ${surface} cost`).toBeCloseTo(oracle.costUsd ?? 0, 7);
  }
  for (const [surface, cards] of [
    ['report cards', reportCards(events)],
    ['report cards (with the result)', reportCards(events, result)],
    ['live page cards', pageCards(events)],
    ['journal page cards', journalPageCards(file, result.runId)],
  ] as const) {
    expect(cards, `${what}: ${surface}`).toMatchObject({ tasks: oracle.tasks, attempts: oracle.attempts, requests: oracle.requests, retries: oracle.retries, status: result.status });
    expect(Object.values(cards.breakdown).reduce((a, n) => a + n, 0), `${what}: ${surface} breakdown`).toBe(oracle.tasks);
  }
  const listed = await runsSurface(file, result.runId);
  expect({ tasksDone: listed.tasksDone, tasksTotal: listed.tasksTotal }, `${what}: runs --json`).toEqual({ tasksDone: oracle.completed, tasksTotal: oracle.tasks });
  expect(listed.costUsd, `${what}: runs --json cost`).toBeCloseTo(oracle.costUsd ?? 0, 7);
  const progress = progressSurface(events);
  expect(
    { tasks: progress.total, completed: progress.counts.completed, failed: progress.counts.failed, skipped: progress.counts.skipped, cancelled: progress.counts.cancelled, attempts: progress.attempts, requests: progress.requests, retries: progress.retries },
    `${what}: progress`,
  ).toMatchObject({ tasks: oracle.tasks, completed: oracle.completed, failed: oracle.failed, skipped: oracle.skipped, cancelled: oracle.cancelled, attempts: oracle.attempts, requests: oracle.requests, retries: oracle.retries });
  expect(progress.costUsd, `${what}: progress cost`).toBeCloseTo(oracle.costUsd ?? 0, 7);
  expect(result.totals.costUsd ?? 0, `${what}: --json cost`).toBeCloseTo(oracle.costUsd ?? 0, 7);
  expect(shown.totals.costUsd ?? 0, `${what}: show cost`).toBeCloseTo(oracle.costUsd ?? 0, 7);
  return oracle;
}

describe('counts on every surface (property)', () => {
  it(`equal what the journal holds, after a run, a resume and a retry (${RUNS} random runs)`, async () => {
    const reached = { inAttemptRetry: 0, newAttempt: 0, rateLimited: 0, map: 0, reduceGroups: 0, revision: 0, resume: 0, retry: 0 };
    let n = 0;
    await fc.assert(
      fc.asyncProperty(specArb, async (spec) => {
        const file = join(dir, `run-${n++}.db`);
        const phase = { retried: false };
        const provider = providerOf(spec, phase);
        const swarmOf = () => createSwarm({ env, providers: { p: provider, q: provider }, store: file, backoff: { baseMs: 1, maxMs: 2 }, seed: 7 });
        const plan = planOf(spec);
        const seen = new Set<string>();
        const note = (events: TimedRunEvent[]) => {
          for (const e of events) {
            if (e.type === 'task:retry') seen.add('inAttemptRetry');
            if (e.type === 'task:failed' && e.willRetry) seen.add('newAttempt');
            if (e.type === 'model:error' && e.error.code === 'rate_limited') seen.add('rateLimited');
            if (e.type === 'task:planned' && e.taskId === 'mp') seen.add('map');
            if (e.type === 'task:planned' && e.taskId === 'rd') seen.add('reduceGroups');
            if (e.type === 'task:reviewed' && e.verdict === 'revise' && !e.final) seen.add('revision');
          }
        };

        let swarm = swarmOf();
        let last = await life(swarm.run(plan), spec.resume);
        await swarm.close();
        note(last.events);
        await checkSurfaces(file, last, 'the run');
        const runId = last.result.runId;
        if (last.result.status === 'cancelled') {
          seen.add('resume');
          swarm = swarmOf();
          last = await life(swarm.resume(runId));
          await swarm.close();
          note(last.events);
          await checkSurfaces(file, last, 'the resume');
        }
        if (last.result.status === 'partial' || last.result.status === 'failed') {
          seen.add('retry');
          phase.retried = true;
          const before = journalOracle(file, runId);
          swarm = swarmOf();
          last = await life(swarm.retry(runId));
          await swarm.close();
          note(last.events);
          const after = await checkSurfaces(file, last, 'the retry');
          // A retry adds: nothing it counted before is lost.
          expect(after.requests).toBeGreaterThan(before.requests);
          expect(after.attempts).toBeGreaterThan(before.attempts);
        }
        for (const k of seen) reached[k as keyof typeof reached] += 1;
      }),
      { numRuns: RUNS },
    );
    // Each case the counts depend on was reached in a good share of the runs.
    for (const [k, times] of Object.entries(reached)) expect(times, `${k} reached in ${times} of ${RUNS} runs`).toBeGreaterThanOrEqual(RUNS * 0.2);
  }, 120_000);
});
