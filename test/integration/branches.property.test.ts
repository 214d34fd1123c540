/**
 * Property: on random DAGs run by the real runtime (an in-process scripted provider), with random
 * `when` conditions on random outputs, random joins (`after: "any"`) and some tasks failing, every
 * task ends as a reference model says, computed here by its own means, task by task in plan
 * order. That model's rules are the semantics: a task waits for all its deps (one that did not
 * complete skips it: cause `dependency`), a join for all of them to end with one completed (none:
 * skipped, `dependency`); then its condition is judged on its deps' outputs (false: skipped,
 * `condition`), and only then does it run. So no task whose condition is false sends a request,
 * a join runs at most once, and the run finishes with every task final.
 *
 * The runs are sized to reach the cases (8 to 30 tasks, up to 3 deps each, half with a
 * condition, half of those with 2 or more deps joining, 1 in 8 failing), and how often each is
 * reached is asserted. fast-check prints its seed when a run fails. `BRANCH_RUNS=600` runs more.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm, ProviderError, type RunEvent } from '../../src/index.js';

const RUNS = Number(process.env.BRANCH_RUNS ?? 60);
const VS = ['a', 'b', 'c'] as const;
const TEXTS = ['yes', 'no'] as const;

/** A classifier's output. `opt` is an optional field: `exists` tests read it. */
interface Verdict {
  v: (typeof VS)[number];
  n: number;
  opt?: boolean;
}

type Cond = { task: string; path?: string; equals?: unknown; notEquals?: unknown; in?: unknown[]; exists?: boolean } | { all: Cond[] } | { any: Cond[] } | { not: Cond };

interface TaskShape {
  deps: number[];
  /** Answers JSON with a schema (a verdict) or text (one of TEXTS). */
  classifier: boolean;
  verdict: Verdict;
  text: (typeof TEXTS)[number];
  fails: boolean;
  join: boolean;
  when?: Cond;
}

const verdictSchema = {
  type: 'object',
  properties: { v: { type: 'string', enum: [...VS] }, n: { type: 'integer' }, opt: { type: 'boolean' } },
  required: ['v', 'n'],
};

/** A test of one of `deps` (classifiers get paths into their schema, text tasks are read whole). */
function testArb(deps: readonly number[], shapes: readonly { classifier: boolean }[]): fc.Arbitrary<Cond> {
  return fc.constantFrom(...deps).chain((d): fc.Arbitrary<Cond> => {
    const task = `t${d}`;
    if (!shapes[d]!.classifier) {
      return fc.oneof<fc.Arbitrary<Cond>[]>(
        fc.constantFrom(...TEXTS).map((x) => ({ task, equals: x })),
        fc.constantFrom(...TEXTS).map((x) => ({ task, notEquals: x })),
        fc.subarray([...TEXTS], { minLength: 1 }).map((x) => ({ task, in: x })),
        fc.boolean().map((x) => ({ task, exists: x })),
      );
    }
    return fc.oneof<fc.Arbitrary<Cond>[]>(
      fc.constantFrom(...VS).map((x) => ({ task, path: 'v', equals: x })),
      fc.constantFrom(...VS).map((x) => ({ task, path: 'v', notEquals: x })),
      fc.subarray([...VS], { minLength: 1, maxLength: 2 }).map((x) => ({ task, path: 'v', in: x })),
      fc.integer({ min: 0, max: 2 }).map((x) => ({ task, path: 'n', in: [x, x + 1] })),
      fc.boolean().map((x) => ({ task, path: 'opt', exists: x })),
      fc.constantFrom(...VS).map((x) => ({ task, equals: { v: x, n: 1 } })),
    );
  });
}

function condArb(deps: readonly number[], shapes: readonly { classifier: boolean }[], depth: number): fc.Arbitrary<Cond> {
  const test = testArb(deps, shapes);
  if (depth === 0) return test;
  const inner = condArb(deps, shapes, depth - 1);
  return fc.oneof(
    { weight: 4, arbitrary: test },
    { weight: 1, arbitrary: fc.array(inner, { minLength: 1, maxLength: 3 }).map((all) => ({ all })) },
    { weight: 1, arbitrary: fc.array(inner, { minLength: 1, maxLength: 3 }).map((any) => ({ any })) },
    { weight: 1, arbitrary: inner.map((not) => ({ not })) },
  );
}

const shapesArb: fc.Arbitrary<TaskShape[]> = fc
  .array(
    fc.record({
      // Each a share of the tasks before it: every position has as many deps to pick from.
      deps: fc.array(fc.integer({ min: 0, max: 999 }), { maxLength: 3 }),
      classifier: fc.boolean(),
      verdict: fc.record({ v: fc.constantFrom(...VS), n: fc.integer({ min: 0, max: 3 }), opt: fc.option(fc.boolean(), { nil: undefined }) }),
      text: fc.constantFrom(...TEXTS),
      fails: fc.integer({ min: 0, max: 7 }).map((x) => x === 0),
      join: fc.boolean(),
      conditioned: fc.boolean(),
      seed: fc.integer(),
    }),
    { minLength: 8, maxLength: 30 },
  )
  .chain((raw) => {
    // Deps only on earlier tasks: a DAG.
    const base = raw.map((r, i) => ({ ...r, deps: i === 0 ? [] : [...new Set(r.deps.map((d) => Math.floor((d / 1000) * i)))] }));
    const conds = base.map((t) => (t.conditioned && t.deps.length > 0 ? condArb(t.deps, base, 2).map((c): Cond | undefined => c) : fc.constant<Cond | undefined>(undefined)));
    return fc.tuple(...conds).map((whens) =>
      base.map(({ conditioned: _c, seed: _s, ...t }, i): TaskShape => {
        const shape: TaskShape = { ...t, join: t.join && t.deps.length >= 2 };
        if (whens[i] !== undefined) shape.when = whens[i];
        return shape;
      }),
    );
  });

function planOf(shapes: readonly TaskShape[], maxInFlight: number) {
  return {
    providers: { p: { type: 'sim' } },
    models: { m: { provider: 'p', model: 'scripted', maxTokens: 64 } },
    defaults: { maxRetries: 0, maxInFlight },
    tasks: shapes.map((s, i) => ({
      id: `t${i}`,
      model: 'm',
      prompt: `task ${i}`,
      ...(s.deps.length > 0 ? { deps: s.deps.map((d) => `t${d}`) } : {}),
      ...(s.classifier ? { output: { schema: verdictSchema } } : {}),
      ...(s.when ? { when: s.when } : {}),
      ...(s.join ? { after: 'any' } : {}),
    })),
  };
}

const answerOf = (s: TaskShape) => (s.classifier ? JSON.stringify(s.verdict) : s.text);

// ---------------------------------------------------------------------------------------------
// The reference model: its own reading of a condition and of the DAG
// ---------------------------------------------------------------------------------------------

type Outcome = 'completed' | 'failed' | 'skipped (condition)' | 'skipped (dependency)';

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}
function sorted(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(sorted);
  if (x !== null && typeof x === 'object') return Object.fromEntries(Object.keys(x).sort().map((k) => [k, sorted((x as Record<string, unknown>)[k])]));
  return x;
}

/** What the test reads of a dep: its value (parsed verdict, or text) at the path, or `none`. */
function read(shapes: readonly TaskShape[], outcome: readonly Outcome[], test: { task: string; path?: string }): { v: unknown } | 'none' {
  const i = Number(test.task.slice(1));
  if (outcome[i] !== 'completed') return 'none';
  const s = shapes[i]!;
  if (test.path === undefined) return { v: s.classifier ? { ...s.verdict } : s.text };
  const field = (s.verdict as unknown as Record<string, unknown>)[test.path];
  return field === undefined ? 'none' : { v: field };
}

function truth(c: Cond, shapes: readonly TaskShape[], outcome: readonly Outcome[]): boolean {
  if ('all' in c) return c.all.every((x) => truth(x, shapes, outcome));
  if ('any' in c) return c.any.some((x) => truth(x, shapes, outcome));
  if ('not' in c) return !truth(c.not, shapes, outcome);
  const got = read(shapes, outcome, c);
  if (c.exists !== undefined) return (got !== 'none') === c.exists;
  if (c.in !== undefined) return got !== 'none' && c.in.some((x) => same(got.v, x));
  if (c.notEquals !== undefined) return got === 'none' || !same(got.v, c.notEquals);
  return got !== 'none' && same(got.v, c.equals);
}

function expectedOutcomes(shapes: readonly TaskShape[]): Outcome[] {
  const outcome: Outcome[] = [];
  shapes.forEach((s, i) => {
    const done = s.deps.filter((d) => outcome[d] === 'completed').length;
    if (s.join ? done === 0 : done < s.deps.length) outcome[i] = 'skipped (dependency)';
    else if (s.when && !truth(s.when, shapes, outcome)) outcome[i] = 'skipped (condition)';
    else outcome[i] = s.fails ? 'failed' : 'completed';
  });
  return outcome;
}

describe('branches (property)', () => {
  it(`random DAGs with random conditions, joins and failures end as the reference model says (${RUNS} runs)`, async () => {
    const reached = { conditionFalse: 0, conditionTrue: 0, joinMixed: 0, joinNoneCompleted: 0, joinAfterFailure: 0, skippedBehindCondition: 0 };
    await fc.assert(
      fc.asyncProperty(shapesArb, fc.integer({ min: 1, max: 4 }), async (shapes, maxInFlight) => {
        const calls = new Map<string, number>();
        const provider = createScriptedProvider({
          reply: (req) => {
            const id = req.meta.taskId;
            calls.set(id, (calls.get(id) ?? 0) + 1);
            const s = shapes[Number(id.slice(1))]!;
            if (s.fails) throw new ProviderError('bad_request', 'scripted 400', { status: 400 });
            return answerOf(s);
          },
        });
        const swarm = createSwarm({ providers: { p: provider }, store: false, seed: 3, backoff: { baseMs: 1, maxMs: 2 } });
        const run = swarm.run(planOf(shapes, maxInFlight));
        const started = new Map<string, number>();
        run.events.on('task:started', (e: Extract<RunEvent, { type: 'task:started' }>) => started.set(e.taskId, (started.get(e.taskId) ?? 0) + 1));
        const result = await run.result;
        await swarm.close();

        const expected = expectedOutcomes(shapes);
        const actual = shapes.map((_, i) => {
          const t = result.tasks[`t${i}`]!;
          return t.status === 'skipped' ? `skipped (${t.cause})` : t.status;
        });
        // Every task final, each as the model says.
        expect(actual).toEqual(expected);
        shapes.forEach((s, i) => {
          const id = `t${i}`;
          // Only a task the model runs sends a request, once (no retries): a false condition never does.
          const runs = expected[i] === 'completed' || expected[i] === 'failed' ? 1 : 0;
          expect(calls.get(id) ?? 0, id).toBe(runs);
          expect(started.get(id) ?? 0, id).toBe(runs);
        });

        const seen = new Set<keyof typeof reached>();
        shapes.forEach((s, i) => {
          if (s.when && expected[i] === 'skipped (condition)') seen.add('conditionFalse');
          if (s.when && (expected[i] === 'completed' || expected[i] === 'failed')) seen.add('conditionTrue');
          if (!s.join && expected[i] === 'skipped (dependency)' && s.deps.some((d) => expected[d] === 'skipped (condition)')) seen.add('skippedBehindCondition');
          if (!s.join) return;
          const ran = expected[i] === 'completed' || expected[i] === 'failed' || expected[i] === 'skipped (condition)';
          const depsEnded = s.deps.map((d) => expected[d]);
          if (ran && depsEnded.some((o) => o !== 'completed')) seen.add('joinMixed');
          if (ran && depsEnded.includes('failed')) seen.add('joinAfterFailure');
          if (expected[i] === 'skipped (dependency)') seen.add('joinNoneCompleted');
        });
        for (const k of seen) reached[k] += 1;
      }),
      { numRuns: RUNS },
    );
    // Each case is reached in a good share of the runs.
    console.log('branches property: cases reached', reached);
    for (const [k, times] of Object.entries(reached)) expect(times, `${k} reached in ${times} of ${RUNS} runs`).toBeGreaterThanOrEqual(RUNS * 0.15);
  }, 240_000);
});
