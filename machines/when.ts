/**
 * Branches: a task's `when`, a condition on its deps' outputs, and what the plan's checks can tell
 * of one before anything runs. Pure: no I/O, nothing from src/.
 *
 * A condition is data, never code: leaves test one dep's output (`equals`, `notEquals`, `in`,
 * `exists`), at a dotted `path` (`items.0.id`) or whole, and `all` / `any` / `not` combine them.
 * The run table evaluates it once, when the task would become ready (machines/tasks/graph.ts).
 */

/** One test of a dep's output. Exactly one operator. */
export type WhenTest = { task: string; path?: string } & (
  | { equals: unknown }
  | { notEquals: unknown }
  | { in: unknown[] }
  | { exists: boolean }
);

/** `when`: a test, or tests combined. */
export type Condition = WhenTest | { all: Condition[] } | { any: Condition[] } | { not: Condition };

/** What a condition reads of a dep: its output's value, or undefined when it has none (it did not complete). */
export type OutputOf = (task: string) => { value: unknown } | undefined;

/** The operators of a test, in the order messages list them. */
export const WHEN_OPERATORS = ['equals', 'notEquals', 'in', 'exists'] as const;
/** The combinators, each alone in its object. */
export const WHEN_COMBINATORS = ['all', 'any', 'not'] as const;

const has = (x: object, key: string) => Object.hasOwn(x, key) && (x as Record<string, unknown>)[key] !== undefined;

/** The segments of a dotted path (`items.0.id` -> items, 0, id); none for an absent path. */
export function pathSegments(path: string | undefined): string[] {
  return path === undefined ? [] : path.split('.');
}

/**
 * The value at `path` in `value`: an object's own field, an array's element by index. Undefined
 * when the path leads nowhere (a missing field, an index out of range, a field of a text).
 */
export function valueAt(value: unknown, path: readonly string[]): { value: unknown } | undefined {
  let at = value;
  for (const key of path) {
    if (Array.isArray(at)) {
      if (!/^(0|[1-9]\d*)$/.test(key) || Number(key) >= at.length) return undefined;
      at = at[Number(key)];
    } else if (at !== null && typeof at === 'object' && Object.hasOwn(at, key)) {
      at = (at as Record<string, unknown>)[key];
    } else {
      return undefined;
    }
  }
  return { value: at };
}

/** Deep JSON equality: same type, same primitives, arrays in order, objects with the same fields (in any order). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((x, i) => jsonEqual(x, other[i]));
  }
  const ka = Object.keys(a);
  const ob = b as Record<string, unknown>;
  if (ka.length !== Object.keys(ob).length) return false;
  return ka.every((k) => Object.hasOwn(ob, k) && jsonEqual((a as Record<string, unknown>)[k], ob[k]));
}

/**
 * Whether `cond` holds of the deps' outputs. A value that is not there (the path leads nowhere,
 * or the dep did not complete: only a join sees that) equals nothing: `equals` and `in` are false
 * of it, `notEquals` true, `exists: false` true.
 */
export function holds(cond: Condition, outputOf: OutputOf): boolean {
  if ('all' in cond) return cond.all.every((c) => holds(c, outputOf));
  if ('any' in cond) return cond.any.some((c) => holds(c, outputOf));
  if ('not' in cond) return !holds(cond.not, outputOf);
  const seen = seenBy(cond, outputOf);
  if (has(cond, 'exists')) return (seen !== undefined) === (cond as { exists: boolean }).exists;
  if (has(cond, 'in')) return seen !== undefined && (cond as { in: unknown[] }).in.some((x) => jsonEqual(seen.value, x));
  if (has(cond, 'notEquals')) return seen === undefined || !jsonEqual(seen.value, (cond as { notEquals: unknown }).notEquals);
  return seen !== undefined && jsonEqual(seen.value, (cond as { equals: unknown }).equals);
}

function seenBy(test: WhenTest, outputOf: OutputOf): { value: unknown } | undefined {
  const output = outputOf(test.task);
  return output === undefined ? undefined : valueAt(output.value, pathSegments(test.path));
}

/** The condition with each test's `task` renamed (a planner's sub-tasks run as `<planner>/<id>`). */
export function renameTasks(cond: Condition, rename: (task: string) => string): Condition {
  if ('all' in cond) return { all: cond.all.map((c) => renameTasks(c, rename)) };
  if ('any' in cond) return { any: cond.any.map((c) => renameTasks(c, rename)) };
  if ('not' in cond) return { not: renameTasks(cond.not, rename) };
  return { ...cond, task: rename(cond.task) };
}

/** Every test of a condition, with where it sits in it (`['all', 0]`), in order. */
export function testsOf(cond: Condition, at: (string | number)[] = []): { test: WhenTest; at: (string | number)[] }[] {
  if ('all' in cond) return cond.all.flatMap((c, i) => testsOf(c, [...at, 'all', i]));
  if ('any' in cond) return cond.any.flatMap((c, i) => testsOf(c, [...at, 'any', i]));
  if ('not' in cond) return testsOf(cond.not, [...at, 'not']);
  return [{ test: cond, at }];
}

/**
 * Whether a condition can never be true, whatever the outputs: an `in: []` (it matches nothing),
 * an `all` with such a part, an `any` whose every part is such, a `not` of one that is always
 * true. Always true: an empty `all`, an `any` with such a part, a `not` of a never-true one.
 * Any other test can be true or false, depending on the output.
 */
export function neverTrue(cond: Condition): boolean {
  if ('all' in cond) return cond.all.some(neverTrue);
  if ('any' in cond) return cond.any.every(neverTrue);
  if ('not' in cond) return alwaysTrue(cond.not);
  return has(cond, 'in') && (cond as { in: unknown[] }).in.length === 0;
}

function alwaysTrue(cond: Condition): boolean {
  if ('all' in cond) return cond.all.every(alwaysTrue);
  if ('any' in cond) return cond.any.some(alwaysTrue);
  if ('not' in cond) return neverTrue(cond.not);
  return false;
}

const MAX_SHOWN = 60;

/** A value in a message: its JSON, cut to a short line. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN - 3)}...` : text;
}

const named = (test: WhenTest) => (test.path === undefined ? test.task : `${test.task}.${test.path}`);

/** The condition in words: `classify.urgency in ["high","critical"]`, `not (a exists)`, `all of (...; ...)`. */
export function describeCondition(cond: Condition): string {
  if ('all' in cond) return `all of (${cond.all.map(describeCondition).join('; ')})`;
  if ('any' in cond) return `any of (${cond.any.map(describeCondition).join('; ')})`;
  if ('not' in cond) return `not (${describeCondition(cond.not)})`;
  const c = cond as Record<string, unknown>;
  if (has(c, 'exists')) return `${named(cond)} ${c.exists ? 'exists' : 'does not exist'}`;
  if (has(c, 'in')) return `${named(cond)} in ${shown(c.in)}`;
  if (has(c, 'notEquals')) return `${named(cond)} not equal to ${shown(c.notEquals)}`;
  return `${named(cond)} equals ${shown(c.equals)}`;
}

/**
 * Why a condition is false, for a skipped task's reason: the condition and what its tests saw
 * (`classify.urgency in ["high"]; classify.urgency is "low"`), at most 3 values.
 */
export function whyFalse(cond: Condition, outputOf: OutputOf): string {
  const seen = testsOf(cond)
    .slice(0, 3)
    .map(({ test }) => {
      const value = seenBy(test, outputOf);
      if (value !== undefined) return `${named(test)} is ${shown(value.value)}`;
      return outputOf(test.task) === undefined ? `"${test.task}" did not complete` : `${named(test)} is absent`;
    });
  return `${describeCondition(cond)}; ${[...new Set(seen)].join(', ')}`;
}
