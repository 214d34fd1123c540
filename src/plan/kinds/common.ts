/** What several kinds share: the fields of a model call, and the readings of an output. */
import { isRecord } from '../problems.js';
import type { FieldProblem, RawTask } from './types.js';

const NONE: readonly FieldProblem[] = [];

/** The fields that only a model call uses, in the schema's order. */
export const MODEL_CALL_FIELDS = ['model', 'system', 'prompt', 'tools', 'maxTurns', 'maxTokens', 'maxInputTokens', 'budgetUsd', 'accept'] as const;

/** `model` and `prompt` as the schema requires them, with `message` (default: "required"). */
export function modelAndPrompt(t: RawTask, message = 'required'): readonly FieldProblem[] {
  if (t.model !== undefined && t.prompt !== undefined) return NONE;
  const out: FieldProblem[] = [];
  if (t.model === undefined) out.push({ field: 'model', message });
  if (t.prompt === undefined) out.push({ field: 'prompt', message });
  return out;
}

/**
 * The `fields` present on `t`, each refused with `lead: it has no "<field>"` and the hint for it, if any.
 *
 * @example
 * refusals(t, ['model', 'prompt'], 'a "fn" task runs a function, not a model', { prompt: 'the function reads its deps\' outputs in ctx.deps' })
 */
export function refusals(t: RawTask, fields: readonly string[], lead: string, hints: Readonly<Record<string, string>> = {}): FieldProblem[] {
  const out: FieldProblem[] = [];
  for (const field of fields) {
    // `tools: []` is the schema's default: a parsed plan (the journal's, read again by a resume) has it on every task.
    if (t[field] === undefined || (field === 'tools' && Array.isArray(t[field]) && t[field].length === 0)) continue;
    const hint = Object.hasOwn(hints, field) ? ` (${hints[field]})` : '';
    out.push({ field, message: `${lead}: it has no "${field}"${hint}` });
  }
  return out;
}

/** What a function step is told of the fields it does not take, whatever its kind. */
export const FN_HINTS: Readonly<Record<string, string>> = {
  tools: 'the function calls what it needs itself',
  accept: 'check the value with "output": {"schema": ...}, or in the function',
  budgetUsd: 'a function costs nothing',
};

/** The function a map or a reduce names, when it names one. */
export function fnOf(t: RawTask): string | undefined {
  return typeof t.fn === 'string' ? t.fn : undefined;
}

/** Why the output of a task that answers with a value cannot be an array: its schema says another type. */
export function schemaNoArray(t: RawTask): string | undefined {
  const schema = isRecord(t.output) && isRecord(t.output.schema) ? t.output.schema : undefined;
  return schema?.type === undefined || schema.type === 'array' ? undefined : 'its output schema is not of type "array"';
}

/** An answer is text unless the task has an output schema. */
export function textUnlessSchema(t: { output?: unknown }): 'json' | 'text' {
  return t.output === undefined ? 'text' : 'json';
}

export { NONE };
