import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { criticalPathRanks, findCycles, PlanCycleError, topologicalOrder, type TaskNode } from '../../src/plan/index.js';

const t = (id: string, ...deps: string[]): TaskNode => ({ id, deps });

/** The rank rule, checked directly: 1 for a sink, else 1 + the highest rank among dependents. */
function expectRankRule(tasks: readonly TaskNode[], ranks: Map<string, number>) {
  const best = new Map(tasks.map((task) => [task.id, 0]));
  for (const task of tasks) for (const d of task.deps) best.set(d, Math.max(best.get(d)!, ranks.get(task.id)!));
  for (const task of tasks) expect(ranks.get(task.id), task.id).toBe(best.get(task.id)! + 1);
}

function expectTopological(tasks: readonly TaskNode[], order: string[]) {
  expect([...order].sort()).toEqual(tasks.map((task) => task.id).sort());
  const position = new Map(order.map((id, i) => [id, i]));
  for (const task of tasks) for (const d of task.deps) expect(position.get(d)!).toBeLessThan(position.get(task.id)!);
}

describe('criticalPathRanks', () => {
  it('ranks a diamond: sink 1, middle 2, source 3', () => {
    const ranks = criticalPathRanks([t('a'), t('b', 'a'), t('c', 'a'), t('d', 'b', 'c')]);
    expect(Object.fromEntries(ranks)).toEqual({ a: 3, b: 2, c: 2, d: 1 });
  });

  it('ranks a chain by its distance from the end', () => {
    const ranks = criticalPathRanks([t('d', 'c'), t('c', 'b'), t('b', 'a'), t('a')]);
    expect(Object.fromEntries(ranks)).toEqual({ a: 4, b: 3, c: 2, d: 1 });
  });

  it('takes the longest of several chains from a task', () => {
    // a feeds a 3-chain (b -> c -> d) and directly the sink e.
    const ranks = criticalPathRanks([t('a'), t('b', 'a'), t('c', 'b'), t('d', 'c'), t('e', 'a')]);
    expect(ranks.get('a')).toBe(4);
    expect(ranks.get('e')).toBe(1);
  });

  it('ranks each tree of a forest on its own, and an isolated task 1', () => {
    const ranks = criticalPathRanks([t('x1'), t('x2', 'x1'), t('y1'), t('y2', 'y1'), t('y3', 'y2'), t('lone')]);
    expect(Object.fromEntries(ranks)).toEqual({ x1: 2, x2: 1, y1: 3, y2: 2, y3: 1, lone: 1 });
  });

  it('ranks a 10,000-deep chain without recursion', () => {
    const tasks = Array.from({ length: 10_000 }, (_, i) => t(`c${i}`, ...(i === 0 ? [] : [`c${i - 1}`])));
    const ranks = criticalPathRanks(tasks);
    expect(ranks.get('c0')).toBe(10_000);
    expect(ranks.get('c9999')).toBe(1);
    expect(ranks.get('c5000')).toBe(5_000);
  });

  it('returns an empty map for no tasks', () => {
    expect(criticalPathRanks([]).size).toBe(0);
  });

  it('follows the rank rule on random DAGs, and the topological order respects deps', () => {
    // Deps point only to earlier tasks, so every generated graph is acyclic; ids are shuffled in
    // plan order by reversing, so order and position do not coincide.
    const dag = fc
      .array(fc.array(fc.nat(), { maxLength: 4 }), { minLength: 1, maxLength: 60 })
      .map((rows) => rows.map((picks, i) => t(`n${i}`, ...(i === 0 ? [] : [...new Set(picks.map((p) => `n${p % i}`))]))).reverse());
    fc.assert(
      fc.property(dag, (tasks) => {
        expectRankRule(tasks, criticalPathRanks(tasks));
        expectTopological(tasks, topologicalOrder(tasks));
      }),
      { seed: 42, numRuns: 200 },
    );
  });
});

describe('topologicalOrder', () => {
  it('puts deps first and keeps plan order among tasks ready together', () => {
    expect(topologicalOrder([t('d', 'b', 'c'), t('c', 'a'), t('b', 'a'), t('a'), t('z')])).toEqual(['a', 'z', 'c', 'b', 'd']);
  });

  it('throws PlanCycleError on a cycle instead of dropping tasks', () => {
    expect(() => topologicalOrder([t('a', 'b'), t('b', 'a'), t('c')])).toThrow(PlanCycleError);
    expect(() => criticalPathRanks([t('a', 'a')])).toThrow(/1 task\(s\) are on or behind a dependency cycle/);
  });
});

describe('findCycles', () => {
  it('finds a self-loop and a longer cycle, each once, in node order', () => {
    const cycles = findCycles([[1], [2], [0], [3], []]);
    expect(cycles).toEqual([
      { nodes: [0, 1, 2], firstEdge: 0, sccSize: 3 },
      { nodes: [3], firstEdge: 0, sccSize: 1 },
    ]);
  });

  it('finds nothing in an acyclic graph', () => {
    expect(findCycles([[], [0], [0, 1]])).toEqual([]);
  });
});
