/**
 * `kind: "fn"`: a task that runs a function of the embedding program instead of a model. It goes
 * out like an agent (a slot in flight, a group that keeps its deadline and passes CANCEL on) but
 * as a `fnStep` actor: one `callFunction` call, which `src/` provides (src/fn/call.ts). The call
 * is aborted (its AbortSignal) when the step leaves `running`: cancel, deadline, run stop.
 *
 *   running -callFunction done-> done (completed)      running -its error-> done (failed)
 *   running -CANCEL-> done (cancelled)                 running -AGENT.TIMEOUT-> done (failed, task_timeout)
 *
 * The output is the value's JSON text; the report counts no request and no token.
 */
import { assign, fromPromise, setup } from 'xstate';
import { errorInfo, toErrorInfo } from '../errors.js';
import { answerJson, refTask } from '../mapReduce.js';
import { ZERO_USAGE, type AttemptReport, type ErrorInfo, type OutputCheckSpec } from '../protocol.js';
import type { RunTable } from '../tasks/runTable.js';
import type { Feedback, SupervisedTask } from '../tasks/types.js';

/** A value a function is given: a dep's output (or a reduce's input) as text, and whether that text is JSON to parse. */
export interface FnValue {
  id: string;
  text: string;
  json: boolean;
}

/** What one function call is given (what `callFunction` receives). */
export interface FnStepInput {
  kind: 'fn';
  taskId: string;
  attempt: number;
  fn: string;
  deps: FnValue[];
  /** A map's item step: its item. */
  item?: unknown;
  /** A reduce's merge step: its inputs, in order. */
  inputs?: FnValue[];
  timeoutMs: number;
  /** The task's output schema: the value is checked against it. */
  output?: OutputCheckSpec;
  /** Sent back by a review or an approval: the findings (an approval's note), the round, and the output it gave (JSON text). */
  revision?: { round: number; maxRounds: number; findings: string; draft: string };
}

type Ended = { report: AttemptReport };

const reportOf = (input: FnStepInput, status: AttemptReport['status'], extra: { output?: string; error?: ErrorInfo }): AttemptReport => ({
  taskId: input.taskId,
  attempt: input.attempt,
  status,
  ...extra,
  usage: ZERO_USAGE,
  requests: 0,
  retries: 0,
  turns: 0,
  messages: [],
});

export const fnStepMachine = setup({
  types: {} as {
    input: FnStepInput;
    context: { input: FnStepInput; report?: AttemptReport };
    events: { type: 'CANCEL'; reason?: string } | { type: 'AGENT.TIMEOUT' };
    output: AttemptReport;
  },
  actors: {
    /** Runs the function: resolves to its value's JSON text, rejects with an ErrorInfo-shaped error. `src/` provides it. */
    callFunction: fromPromise<string, FnStepInput>(async ({ input }) => {
      throw errorInfo('fn_error', `function "${input.fn}" of task "${input.taskId}" needs the runtime (no callFunction actor provided)`, false);
    }),
  },
}).createMachine({
  id: 'fnStep',
  context: ({ input }) => ({ input }),
  initial: 'running',
  output: ({ context }) => context.report!,
  states: {
    running: {
      invoke: {
        src: 'callFunction',
        input: ({ context }) => context.input,
        onDone: { target: 'done', actions: assign(({ context, event }): Ended => ({ report: reportOf(context.input, 'completed', { output: event.output }) })) },
        onError: { target: 'done', actions: assign(({ context, event }): Ended => ({ report: reportOf(context.input, 'failed', { error: toErrorInfo(event.error) }) })) },
      },
      on: {
        CANCEL: { target: 'done', actions: assign(({ context }): Ended => ({ report: reportOf(context.input, 'cancelled', { error: errorInfo('cancelled', 'cancelled', false) }) })) },
        'AGENT.TIMEOUT': {
          target: 'done',
          actions: assign(({ context }): Ended => ({
            report: reportOf(context.input, 'failed', {
              error: errorInfo('task_timeout', `task "${context.input.taskId}" attempt ${context.input.attempt}: function "${context.input.fn}" passed its deadline of ${context.input.timeoutMs} ms`, true),
            }),
          })),
        },
      },
    },
    done: { type: 'final' },
  },
});

/** Whether a task's output text is JSON to parse for a function: a schema'd output, a function's value, a map's array. */
export const jsonOutput = (spec: SupervisedTask | undefined): boolean => spec !== undefined && (spec.output?.schema !== undefined || spec.kind === 'fn' || spec.kind === 'map' || (spec.kind === 'reduce' && spec.fn !== undefined));

/** The input of a function's attempt: its deps' outputs (a map's item, a reduce's inputs) as the table has them. */
export function fnInputOf(table: RunTable, spec: SupervisedTask, attempt: number, inputs?: readonly string[], feedback?: Feedback): FnStepInput {
  const value = (ref: string): FnValue => {
    const id = refTask(ref);
    if (id === ref) return { id, text: table.outputText(id), json: jsonOutput(table.spec(id)) };
    // One element of a task's JSON array output.
    const list = answerJson(table.outputText(id));
    const element: unknown = Array.isArray(list) ? list[Number(ref.slice(id.length + 1))] : undefined;
    return { id: ref, text: JSON.stringify(element ?? null), json: true };
  };
  const input: FnStepInput = { kind: 'fn', taskId: spec.id, attempt, fn: spec.fn ?? '', deps: spec.deps.map(value), timeoutMs: spec.timeoutMs };
  if (spec.item !== undefined) input.item = spec.item;
  if (inputs) input.inputs = inputs.map(value);
  if (spec.output) input.output = spec.output;
  if (feedback?.kind === 'review') input.revision = { round: feedback.round, maxRounds: feedback.maxRounds, findings: feedback.findings, draft: feedback.draft };
  return input;
}

