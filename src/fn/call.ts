/**
 * The `callFunction` actor of function steps (machines/kinds/fn.ts): finds the plan's function,
 * gives it its context (deps parsed, the item, the inputs, an AbortSignal), and turns what it
 * returns into the task's output text, or what it throws into an attempt's error: retryable,
 * unless it is a NonRetryableError, the function is missing, or its value is not JSON or fails
 * the task's output schema (the same value would come back).
 */
import { fromPromise } from 'xstate';
import type { FnStepInput, FnValue } from '../../machines/kinds/fn.js';
import type { ErrorInfo } from '../../machines/protocol.js';
import { checkOutput } from '../plan/structured.js';
import { NonRetryableError } from './errors.js';
import { jsonProblem } from './json.js';
import type { FnContext, SwarmFunctions } from './types.js';

export interface FunctionCalls {
  runId: string;
  functions: SwarmFunctions;
  /** Called before a function starts: what is pending in the journal is committed first. */
  beforeCall?: () => void;
  /** What every message that leaves goes through (an error's text may echo a secret). */
  redact: (text: string) => string;
}

const fail = (message: string, retryable: boolean): ErrorInfo & Error => Object.assign(new Error(message), { code: 'fn_error' as const, retryable });

/** A dep's output as a function sees it: parsed where it is JSON (a schema'd output, a function's value, a map's array), else its text. */
function valueOf(v: FnValue): unknown {
  if (!v.json) return v.text;
  try {
    return JSON.parse(v.text);
  } catch {
    return v.text;
  }
}

export function functionActor({ runId, functions, beforeCall, redact }: FunctionCalls) {
  return fromPromise<string, FnStepInput>(async ({ input, signal }) => {
    const fn = Object.hasOwn(functions, input.fn) ? functions[input.fn] : undefined;
    if (typeof fn !== 'function') throw fail(`task "${input.taskId}": no function "${input.fn}" was given (createSwarm({ functions }) or --functions)`, false);
    beforeCall?.();
    const ctx: FnContext = {
      runId,
      taskId: input.taskId,
      attempt: input.attempt,
      deps: Object.fromEntries(input.deps.map((d) => [d.id, valueOf(d)])),
      signal,
      ...(input.item !== undefined ? { item: input.item } : {}),
      ...(input.inputs ? { inputs: input.inputs.map(valueOf) } : {}),
      ...(input.revision ? { revision: { round: input.revision.round, maxRounds: input.revision.maxRounds, findings: input.revision.findings, previous: valueOf({ id: input.taskId, text: input.revision.draft, json: true }) } } : {}),
    };
    let value: unknown;
    try {
      value = await fn(ctx);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw fail(redact(`function "${input.fn}" threw: ${message}`), !(error instanceof NonRetryableError) && (error as { retryable?: unknown } | null)?.retryable !== false);
    }
    const problem = jsonProblem(value);
    if (problem !== undefined) throw fail(`function "${input.fn}" returned a value that is not JSON: ${problem}`, false);
    // A value that echoes a key does not carry it into the run (a redacted secret stays valid JSON: it has no quotes).
    const text = redact(JSON.stringify(value));
    if (input.output?.schema) {
      const verdict = checkOutput(text, { schema: input.output.schema });
      if (!verdict.ok) throw Object.assign(new Error(`function "${input.fn}" returned a value its output.schema refuses: ${verdict.problems.join('; ')}`), { code: 'invalid_output' as const, retryable: false });
    }
    return text;
  });
}
