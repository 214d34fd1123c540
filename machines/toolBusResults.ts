/** What the callers of an execution are answered: one result per unique call, whatever the executor did. */
import { canonicalJson } from './canonical.js';
import type { ToolResult } from './protocol.js';
import type { Execution, ExecutionOutcome } from './toolBusTypes.js';

/** An executor should resolve with a string; anything else is written as JSON rather than lost. */
export function resultText(output: unknown): string {
  if (typeof output === 'string') return output;
  try {
    return canonicalJson(output);
  } catch {
    return String(output);
  }
}

/** The message of whatever an executor rejected with (an Error, an ErrorInfo, a string...). */
export function errorText(error: unknown): string {
  if (typeof error === 'string') return error;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message === 'string' && message !== '') return message;
  return `tool failed: ${resultText(error)}`;
}

/** The results of an execution, one per unique call, in order. */
export function resultsOf(execution: Execution, outcome: ExecutionOutcome, timeoutMs: number): ToolResult[] {
  const { calls, tool } = execution;
  const name = tool.tool.name;
  if (outcome.kind === 'timeout') return calls.map(() => ({ content: `tool "${name}" timed out after ${timeoutMs} ms`, isError: true }));
  if (outcome.kind === 'cancelled') return calls.map(() => ({ content: `tool "${name}" was stopped: the tasks that called it ended`, isError: true }));
  if (outcome.kind === 'error') return calls.map(() => ({ content: errorText(outcome.error), isError: true }));
  if (!execution.batch) return [{ content: resultText(outcome.output), isError: false }];
  // A batch executor that miscounts fails only the calls it left without a result.
  const list = Array.isArray(outcome.output) ? (outcome.output as unknown[]) : [];
  return calls.map((_, i) => {
    const r = list[i] as Partial<ToolResult> | string | undefined;
    if (typeof r === 'string') return { content: r, isError: false };
    if (r !== null && typeof r === 'object' && typeof r.content === 'string') return { content: r.content, isError: r.isError === true };
    return { content: `batch executor of "${name}" returned ${list.length} results for ${calls.length} calls`, isError: true };
  });
}
