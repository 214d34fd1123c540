/**
 * Quality gates: the checks a task's answer meets before it counts, one entry each behind the
 * `Gate` interface. A gate is a field of the task's `accept` (its type in `AcceptSpec`,
 * planTypes.ts); this table gives its shape for the plan's schema, its checks at validation, and
 * where it runs: on the answer's text in this process (`text`: `test`, by `checkOutput` in
 * structured.ts, after the output schema), or as a scoring call by a model (`model`: the agent's
 * judge call, machines/judge.ts). A person's check is not a gate of the task but a task of its
 * own, an approval (kinds/approval.ts), whose edited output passes the approved task's text gates.
 *
 * Adding a gate: its entry here and its field in `AcceptSpec`; a `model` gate also its call.
 */
import type { z } from 'zod';
import { zod } from './zod.js';
import { issue, isRecord, unknownName } from './problems.js';
import { userPattern } from './userPattern.js';
import type { AcceptSpec } from './planTypes.js';
import type { PlanIssue } from './validate.js';

/** What a gate's plan checks may read beyond its own value. */
export interface GateCheckContext {
  /** The plan's models, when the plan has them (a judge names one). */
  models?: Record<string, unknown>;
}

export interface Gate<K extends keyof AcceptSpec = keyof AcceptSpec> {
  /** Its field in `accept`. */
  readonly field: K;
  /** Its shape in the plan (optional there): the schema's, and the JSON Schema's, check. Its output is the field's type. Built when the plan's schema is (zod loads then). */
  schema(): z.ZodType<NonNullable<AcceptSpec[K]>, any>;
  /** Where it runs: on the answer's text here, or as a model's scoring call. */
  readonly by: 'text' | 'model';
  /** Its checks beyond its shape, for `validate` (a pattern that runs, a model that exists), with paths under `path`. */
  check?(value: unknown, path: readonly (string | number)[], ctx: GateCheckContext, out: PlanIssue[]): void;
  /** A `text` gate: the problems of an answer (none: it passes). `text` is the answer kept (compact JSON for a structured one), `answer` as it came. */
  test?(value: NonNullable<AcceptSpec[K]>, text: string, answer: string): string[];
}

/** A gate of any field. */
export type AnyGate = { [K in keyof AcceptSpec]-?: Gate<K> }[keyof AcceptSpec];

const positiveInt = () => zod().int().min(1, { error: 'must be a positive integer' });

const minChars: Gate<'minChars'> = {
  field: 'minChars',
  schema: positiveInt,
  by: 'text',
  test: (min, _text, answer) => {
    const n = answer.trim().length;
    return n < min ? [`the answer has ${n} characters, fewer than the ${min} required`] : [];
  },
};

const pattern: Gate<'pattern'> = {
  field: 'pattern',
  schema: () => zod().string().min(1, { error: 'must not be empty' }),
  by: 'text',
  check: (value, path, _ctx, out) => {
    if (typeof value !== 'string' || value === '') return;
    const compiled = userPattern(value);
    if (!compiled.ok) out.push(issue([...path], compiled.message));
  },
  test: (source, text) => {
    const compiled = userPattern(source);
    if (!compiled.ok) return [`the pattern /${source}/ cannot run: ${compiled.message}`];
    // A pattern that runs out of its time bound throws (PatternTimeoutError): checkOutput says so.
    return compiled.test(text) ? [] : [`the answer does not match the pattern /${source}/`];
  },
};

const judge: Gate<'judge'> = {
  field: 'judge',
  schema: () => {
    const z = zod();
    return z.strictObject({
      model: z.string().min(1, { error: 'must name a model' }),
      prompt: z.string().min(1, { error: 'must not be empty' }),
      threshold: z.number().min(0, { error: 'must be a score in [0, 1]' }).max(1, { error: 'must be a score in [0, 1]' }).default(0.7),
    });
  },
  by: 'model',
  check: (value, path, { models }, out) => {
    if (!isRecord(value) || !models || typeof value.model !== 'string' || value.model === '' || Object.hasOwn(models, value.model)) return;
    out.push(issue([...path, 'model'], unknownName('model', value.model, Object.keys(models))));
  },
};

const GATE_LIST = [minChars, pattern, judge] as const;

/** Every gate, in the order they are checked (and listed in the plan's JSON Schema). */
export const GATES: readonly AnyGate[] = GATE_LIST;

// Every field of AcceptSpec has its gate (a field added there and not here does not compile).
const _everyFieldHasItsGate: [Exclude<keyof AcceptSpec, (typeof GATE_LIST)[number]['field']>] extends [never] ? true : false = true;
void _everyFieldHasItsGate;

/** The gates that run on the answer's text, in order. */
export const TEXT_GATES: readonly AnyGate[] = GATES.filter((g) => g.by === 'text');

/** `accept`'s shape: each gate's field, optional. */
export const acceptShape = (): Record<string, z.ZodOptional<z.ZodType>> => Object.fromEntries(GATES.map((g) => [g.field, g.schema().optional()]));

/** Validate's checks of a task's `accept` (at `path`), gate by gate. */
export function checkGates(accept: Record<string, unknown>, path: readonly (string | number)[], ctx: GateCheckContext, out: PlanIssue[]): void {
  for (const gate of GATES) {
    if (accept[gate.field] !== undefined) gate.check?.(accept[gate.field], [...path, gate.field], ctx, out);
  }
}
