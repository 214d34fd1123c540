/**
 * Compiled by `npm run typecheck` (not run): the output type of each kind of task, as the result
 * holds it (checked at run time by define.test.ts). A map's output is the array of its items'
 * outputs, each parsed when it is JSON: typed by the map's zod `output.schema` (which its items
 * inherit), else `unknown`. A reduce's is its root's, the output of a call: the schema's type, or
 * text.
 */
import { expectTypeOf } from 'vitest';
import { z } from 'zod';
import { definePlan, type ApprovalOutput, type OutputOf, type PlanInput, type ResultOf, type TaskInput } from '../../src/index.js';

const Row = z.object({ name: z.string(), n: z.number() });
const Total = z.object({ total: z.number() });
type RowT = { name: string; n: number };

const plan = definePlan({
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'text', model: 'fast', prompt: 'Say it' },
    { id: 'extract', model: 'fast', prompt: 'Extract', output: { schema: Row } },
    { id: 'loose', model: 'fast', prompt: 'Extract', output: { schema: { type: 'object' } } },
    { id: 'rows', kind: 'map', items: { values: ['a', 'b'] }, model: 'fast', prompt: 'Describe {{item}}', output: { schema: Row } },
    { id: 'texts', kind: 'map', items: { values: ['a', 'b'] }, model: 'fast', prompt: 'Say {{item}}' },
    { id: 'json', kind: 'map', items: { values: ['a'] }, model: 'fast', prompt: 'Say {{item}}', output: { schema: { type: 'object' } } },
    { id: 'total', kind: 'reduce', over: 'rows', model: 'fast', prompt: 'Add {{inputs}}', output: { schema: Total } },
    { id: 'merged', kind: 'reduce', over: ['text', 'texts'], model: 'fast', prompt: 'Merge {{inputs}}' },
    { id: 'review', kind: 'review', reviews: 'text', model: 'fast', prompt: 'Review {{text}}' },
    { id: 'planner', kind: 'plan', model: 'fast', prompt: 'Plan' },
  ],
});
type Tasks = ResultOf<typeof plan>['tasks'];

expectTypeOf<Tasks['text']['output']>().toEqualTypeOf<string | undefined>();
expectTypeOf<Tasks['extract']['output']>().toEqualTypeOf<RowT | undefined>();
expectTypeOf<Tasks['loose']['output']>().toEqualTypeOf<unknown>();
expectTypeOf<Tasks['rows']['output']>().toEqualTypeOf<RowT[] | undefined>();
expectTypeOf<Tasks['texts']['output']>().toEqualTypeOf<unknown[] | undefined>();
expectTypeOf<Tasks['json']['output']>().toEqualTypeOf<unknown[] | undefined>();
expectTypeOf<Tasks['total']['output']>().toEqualTypeOf<{ total: number } | undefined>();
expectTypeOf<Tasks['merged']['output']>().toEqualTypeOf<string | undefined>();
expectTypeOf<Tasks['review']['output']>().toEqualTypeOf<string | undefined>();
expectTypeOf<Tasks['planner']['output']>().toEqualTypeOf<string | undefined>();

// OutputOf on one task type, as written.
expectTypeOf<OutputOf<(typeof plan.tasks)[3]>>().toEqualTypeOf<RowT[]>();
expectTypeOf<OutputOf<{ id: 'm'; kind: 'map'; items: { values: [] }; model: 'f'; prompt: 'p' }>>().toEqualTypeOf<unknown[]>();
expectTypeOf<OutputOf<{ id: 'r'; kind: 'reduce'; over: 'm'; model: 'f'; prompt: 'p' }>>().toEqualTypeOf<string>();
// Not known from the type: a task typed as TaskInput (any kind) or a plan read as PlanInput.
expectTypeOf<OutputOf<TaskInput>>().toEqualTypeOf<unknown>();
expectTypeOf<ResultOf<PlanInput>['tasks'][string]['output']>().toEqualTypeOf<unknown>();

/** Code that trusts the types: what compiled before and crashed at run time is now refused. */
export function trusting(tasks: Tasks): void {
  // @ts-expect-error a map's output is an array of its items' outputs, not text
  tasks.texts.output?.toUpperCase();
  // @ts-expect-error an item's output is unknown without a zod schema: it may be text or parsed JSON
  tasks.texts.output?.[0].toUpperCase();
  const names: string[] | undefined = tasks.rows.output?.map((row) => row.name);
  const total: number | undefined = tasks.total.output?.total;
  const merged: string | undefined = tasks.merged.output?.trim();
  void [names, total, merged];
}

// A function's output is its return value, JSON: typed by a zod `output.schema`, else `unknown`
// (never text). A map or a reduce that runs a function likewise; an approval's is its decision.
const Order = z.object({ id: z.number(), total: z.number() });
type OrderT = { id: number; total: number };
const steps = definePlan({
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'fetch', kind: 'fn', fn: 'fetchOrders', output: { schema: z.array(Order) } },
    { id: 'raw', kind: 'fn', fn: 'readFile' },
    { id: 'loose', kind: 'fn', fn: 'readFile', output: { schema: { type: 'object' } } },
    { id: 'each', kind: 'map', items: { from: 'fetch' }, fn: 'enrich', output: { schema: Order } },
    { id: 'plain', kind: 'map', items: { from: 'fetch' }, fn: 'enrich' },
    { id: 'sum', kind: 'reduce', over: 'each', fn: 'sum', output: { schema: z.number() } },
    { id: 'merged', kind: 'reduce', over: 'each', fn: 'merge' },
    { id: 'draft', model: 'fast', prompt: 'Write' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send?' },
  ],
});
type Steps = ResultOf<typeof steps>['tasks'];
expectTypeOf<Steps['fetch']['output']>().toEqualTypeOf<OrderT[] | undefined>();
expectTypeOf<Steps['raw']['output']>().toEqualTypeOf<unknown>();
expectTypeOf<Steps['loose']['output']>().toEqualTypeOf<unknown>();
expectTypeOf<Steps['each']['output']>().toEqualTypeOf<OrderT[] | undefined>();
expectTypeOf<Steps['plain']['output']>().toEqualTypeOf<unknown[] | undefined>();
expectTypeOf<Steps['sum']['output']>().toEqualTypeOf<number | undefined>();
expectTypeOf<Steps['merged']['output']>().toEqualTypeOf<unknown>();
expectTypeOf<Steps['draft']['output']>().toEqualTypeOf<string | undefined>();
expectTypeOf<Steps['ok']['output']>().toEqualTypeOf<ApprovalOutput | undefined>();
expectTypeOf<ApprovalOutput>().toEqualTypeOf<{ approved: boolean; note?: string }>();
expectTypeOf<OutputOf<{ id: 'f'; kind: 'fn'; fn: 'go' }>>().toEqualTypeOf<unknown>();
expectTypeOf<OutputOf<{ id: 'o'; kind: 'approval'; approves: 'f'; prompt: 'ok?' }>>().toEqualTypeOf<ApprovalOutput>();

export function trustingSteps(tasks: Steps): void {
  // @ts-expect-error a function's value is unknown without a zod schema: it may be anything JSON
  tasks.raw.output.toUpperCase();
  // @ts-expect-error an approval's output is its decision, not text
  tasks.ok.output?.trim();
  const approved: boolean | undefined = tasks.ok.output?.approved;
  const totals: number[] | undefined = tasks.fetch.output?.map((o) => o.total);
  void [approved, totals];
}
