/**
 * Compiled by `npm run typecheck` (not run): the output type of each kind of task, as the result
 * holds it (checked at run time by define.test.ts). A map's output is the array of its items'
 * outputs, each parsed when it is JSON: typed by the map's zod `output.schema` (which its items
 * inherit), else `unknown`. A reduce's is its root's, the output of a call: the schema's type, or
 * text.
 */
import { expectTypeOf } from 'vitest';
import { z } from 'zod';
import { definePlan, type OutputOf, type PlanInput, type ResultOf, type TaskInput } from '../../src/index.js';

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
