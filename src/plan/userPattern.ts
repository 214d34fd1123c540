/**
 * The plan's regular expressions (`accept.pattern`, an output schema's `pattern` and
 * `patternProperties`) run against what a model answered, on the main thread. A backtracking
 * engine takes exponential time on some of them (`^(a+)+$` on 27 characters: 35 s), blocking the
 * run's lock refresh and its live page, so they run on RE2 (re2js, in JavaScript): its time is
 * linear in the answer's length. Its syntax is JavaScript's without lookaround and
 * backreferences; `validate` refuses a pattern it cannot run, and one that compiles to more than
 * `MAX_PATTERN_STEPS` (the work per character grows with them).
 */
import { createRequire } from 'node:module';
import type { RE2JS as Re2 } from 're2js';

/** The most steps (RE2 instructions) a pattern compiles to: `[a-z]{1000}` is 1,003. */
export const MAX_PATTERN_STEPS = 2000;

export type UserPattern = { ok: true; test: (text: string) => boolean } | { ok: false; message: string };

// Loaded with the first pattern, not with `import 'swarmstate'`.
const require = createRequire(import.meta.url);
let engine: typeof Re2 | undefined;
const compiled = new Map<string, UserPattern>();
/** Patterns kept compiled (a plan has a few; a long-lived swarm sees many plans). */
const KEPT = 512;

/**
 * A pattern as the plan gives it, compiled once.
 *
 * @example
 * const p = userPattern('^SKU-\\d+$');
 * p.ok && p.test('SKU-12'); // true
 * userPattern('(?=a)'); // { ok: false, message: 'not a pattern the linear-time engine runs ...' }
 */
export function userPattern(source: string): UserPattern {
  const hit = compiled.get(source);
  if (hit) return hit;
  const made = compile(source);
  if (compiled.size >= KEPT) compiled.clear();
  compiled.set(source, made);
  return made;
}

function compile(source: string): UserPattern {
  engine ??= (require('re2js') as { RE2JS: typeof Re2 }).RE2JS;
  let re: Re2;
  try {
    // JavaScript's own escapes (\u00e9, \/, named groups) in RE2's spelling.
    re = engine.compile(engine.translateRegExp(source));
  } catch (error) {
    const why = String((error as Error).message ?? error).replace(/^error parsing regexp: /, '');
    return { ok: false, message: `not a pattern the linear-time engine runs (RE2 syntax: no lookaround, no backreferences): ${why}` };
  }
  const steps = (re.re2().prog as { numInst?: () => number } | undefined)?.numInst?.();
  if (steps !== undefined && steps > MAX_PATTERN_STEPS) {
    return { ok: false, message: `too large: it compiles to ${steps} steps, more than ${MAX_PATTERN_STEPS} (each character of an answer may visit every step): shorten its repetitions` };
  }
  return { ok: true, test: (text) => re.test(text) };
}

/**
 * The same engine as ajv's `code.regExp`: a schema's `pattern` and `patternProperties` run on it.
 * A pattern it cannot run throws, so the schema does not compile.
 */
export function ajvRegExp(source: string): { test: (text: string) => boolean; toString: () => string } {
  const pattern = userPattern(source);
  if (!pattern.ok) throw new Error(`pattern ${JSON.stringify(source)}: ${pattern.message}`);
  // ajv keys the patterns of one schema by this text.
  return { test: pattern.test, toString: () => `/${source}/` };
}
ajvRegExp.code = 'userPattern';
