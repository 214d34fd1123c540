/**
 * The plan's regular expressions (`accept.pattern`, an output schema's `pattern` and
 * `patternProperties`) run against what a model answered. On a backtracking engine some take
 * exponential time (`^(a+)+$` on 27 characters: 35 s), on the thread that also refreshes the run's
 * lock and serves its live page. So:
 *
 * - a pattern RE2 can run (re2js, in JavaScript) runs there, in time linear in the answer's
 *   length, unless it compiles to more than MAX_PATTERN_STEPS (the work per character grows with
 *   them);
 * - any other (lookaround, backreferences, or too large) runs on JavaScript's own engine in a
 *   worker thread, and each answer's checks get PATTERN_TIME_BOUND_MS in all: past it the worker
 *   is stopped and the check fails (PatternTimeoutError), the main thread never waits longer;
 * - a pattern neither compiles is refused by `validate`, with its path.
 */
import { createRequire } from 'node:module';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import type { RE2JS as Re2 } from 're2js';

/** The most steps (RE2 instructions) a pattern may compile to and run in linear time: `[a-z]{1000}` is 1,003. */
export const MAX_PATTERN_STEPS = 2000;
/** The time all the backtracking patterns of one answer's checks may take together. */
export const PATTERN_TIME_BOUND_MS = 1000;
/** How long a worker may take to start; not counted against an answer's time. */
const WORKER_START_MS = 60_000;

export type UserPattern = { ok: true; linear: boolean; test: (text: string) => boolean } | { ok: false; message: string };

/** A backtracking pattern ran out of its answer's time and was stopped. */
export class PatternTimeoutError extends Error {
  constructor(readonly pattern: string) {
    super(
      `checking the pattern /${pattern}/ took more than ${PATTERN_TIME_BOUND_MS} ms and was stopped ` +
        '(a pattern with lookaround or backreferences runs on a backtracking engine, with this time bound; without them it runs in linear time)',
    );
    this.name = 'PatternTimeoutError';
  }
}

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
 * p.ok && p.test('SKU-12'); // true, in linear time
 * userPattern('(['); // { ok: false, message: 'not a valid regular expression: ...' }
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
  try {
    // JavaScript's own escapes (\u00e9, \/, named groups) in RE2's spelling.
    const re = engine.compile(engine.translateRegExp(source));
    const steps = (re.re2().prog as { numInst?: () => number } | undefined)?.numInst?.() ?? 0;
    if (steps <= MAX_PATTERN_STEPS) return { ok: true, linear: true, test: (text) => re.test(text) };
  } catch {
    // Lookaround, backreferences: JavaScript's engine below, with a time bound.
  }
  try {
    // Compiling is safe on this thread; only matching can backtrack.
    new RegExp(source, 'u');
  } catch (error) {
    return { ok: false, message: `not a valid regular expression: ${(error as Error).message}` };
  }
  return { ok: true, linear: false, test: (text) => boundedTest(source, text) };
}

/**
 * Runs `check` (one answer's checks) with PATTERN_TIME_BOUND_MS for all its backtracking
 * patterns together.
 */
export function withPatternBudget<T>(check: () => T): T {
  const outer = deadline;
  deadline = Date.now() + PATTERN_TIME_BOUND_MS;
  try {
    return check();
  } finally {
    deadline = outer;
  }
}

let deadline: number | undefined;

/** The worker that runs backtracking patterns, and how to talk to it: one request at a time. */
interface PatternWorker {
  worker: Worker;
  port: MessagePort;
  /** 0: waiting, 1: replied, 2: ready. */
  flag: Int32Array;
}
let current: PatternWorker | undefined;

const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { port, flag } = workerData;
const cache = new Map();
port.on('message', ({ source, text }) => {
  let reply;
  try {
    let re = cache.get(source);
    if (!re) cache.set(source, (re = new RegExp(source, 'u')));
    reply = { matched: re.test(text) };
  } catch (error) {
    reply = { error: String(error && error.message) };
  }
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
});
Atomics.store(flag, 0, 2);
Atomics.notify(flag, 0);
`;

function startWorker(): PatternWorker {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  // A channel per worker: a late reply of a stopped one can never answer the next request.
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { port: port2, flag }, transferList: [port2] });
  worker.unref();
  worker.on('error', () => {
    if (current?.worker === worker) current = undefined;
  });
  if (Atomics.wait(flag, 0, 0, WORKER_START_MS) === 'timed-out') {
    void worker.terminate();
    throw new Error(`the worker that runs backtracking patterns did not start within ${WORKER_START_MS} ms`);
  }
  return { worker, port: port1, flag };
}

/** A backtracking pattern's test in the worker, the main thread waiting at most what is left of the answer's time. */
function boundedTest(source: string, text: string): boolean {
  const left = deadline === undefined ? PATTERN_TIME_BOUND_MS : deadline - Date.now();
  if (left <= 0) throw new PatternTimeoutError(source);
  const w = (current ??= startWorker());
  Atomics.store(w.flag, 0, 0);
  w.port.postMessage({ source, text });
  if (Atomics.wait(w.flag, 0, 0, left) === 'timed-out') {
    // Stopping the worker interrupts the match; the next pattern gets a new one.
    current = undefined;
    void w.worker.terminate();
    throw new PatternTimeoutError(source);
  }
  const reply = receiveMessageOnPort(w.port)?.message as { matched?: boolean; error?: string } | undefined;
  if (reply?.matched === undefined) throw new Error(`the pattern /${source}/ could not run: ${reply?.error ?? 'no reply'}`);
  return reply.matched;
}

/**
 * The same engines as ajv's `code.regExp`: a schema's `pattern` and `patternProperties` run as
 * `accept.pattern` does. A pattern neither compiles throws, so the schema does not compile.
 */
export function ajvRegExp(source: string): { test: (text: string) => boolean; toString: () => string } {
  const pattern = userPattern(source);
  if (!pattern.ok) throw new Error(`pattern ${JSON.stringify(source)}: ${pattern.message}`);
  // ajv keys the patterns of one schema by this text.
  return { test: pattern.test, toString: () => `/${source}/` };
}
ajvRegExp.code = 'userPattern';
