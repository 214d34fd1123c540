/**
 * A plan problem's path and words: the pure helpers every check uses (a leaf module: the kind
 * modules read it without loading the schema). issues.ts re-exports them.
 */
import type { PlanIssue } from './validate.js';

export function issue(path: readonly PropertyKey[], message: string): PlanIssue {
  return { path: formatPath(path), message };
}

/**
 * `tasks[3].deps[0]`, `providers.main.keys[1].env`, `models["gpt-4.1"].price`.
 */
export function formatPath(path: readonly PropertyKey[]): string {
  let s = '';
  for (const seg of path) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (typeof seg === 'string' && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) s += s === '' ? seg : `.${seg}`;
    else s += `[${JSON.stringify(String(seg))}]`;
  }
  return s;
}

/** The known name closest to `name` by edit distance (with swaps), if close enough to be a likely typo. */
export function nearest(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.min(2, Math.floor(name.length / 3)) + 1;
  for (const k of known) {
    if (Math.abs(k.length - name.length) >= bestDistance) continue;
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prevPrev: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      // A swapped pair of letters ("fats" for "fast") is one typo, not two.
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j], prevPrev[j - 2] + 1);
    }
    prevPrev = prev;
    prev = row;
  }
  return prev[b.length];
}

export function kindOf(x: unknown): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'an array';
  if (typeof x === 'number' && !Number.isFinite(x)) return 'a non-finite number';
  return withArticle(typeof x);
}

export function withArticle(word: string): string {
  return `${/^[aeiou]/.test(word) ? 'an' : 'a'} ${word}`;
}

/** `unknown model "fsat" (did you mean "fast"?)`: suggestions only among small name sets. */
export function unknownName(kind: string, name: string, known: readonly string[]): string {
  const guess = known.length <= 200 ? nearest(name, known) : undefined;
  return `unknown ${kind} "${name}"${guess ? ` (did you mean "${guess}"?)` : ''}`;
}

/** A plain object (not null, not an array): what the checks read fields of in unparsed input. */
export function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
