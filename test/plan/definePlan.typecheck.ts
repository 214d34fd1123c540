/**
 * Compiled by `npm run typecheck` (not run): what `definePlan` accepts and refuses, and the types
 * it keeps. Each `@ts-expect-error` line is a wrong input the compiler must refuse; if the type
 * ever lets it through, the directive itself becomes the error.
 */
import { definePlan, type PlanInput, type TaskInput } from '../../src/index.js';

const base = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
} as const;

// Only id, model and prompt are required; every default may be left out.
const plan = definePlan({
  ...base,
  tasks: [
    { id: 'facts', model: 'fast', prompt: 'List three facts' },
    { id: 'poem', model: 'fast', prompt: 'A haiku from {{facts}}', deps: ['facts'], maxRetries: 1 },
  ],
});
// Each task's literal id is kept.
const first: 'facts' = plan.tasks[0].id;
const second: 'poem' = plan.tasks[1].id;
// @ts-expect-error the first task is "facts", not "poem"
const wrong: 'poem' = plan.tasks[0].id;

// A plan written `as const` (readonly arrays everywhere) is accepted as it is.
const tasks = [
  { id: 'a', model: 'fast', prompt: 'one' },
  { id: 'b', model: 'fast', prompt: 'two', deps: ['a'], tools: ['search.web'] },
] as const;
const frozen = definePlan({ ...base, defaults: { maxInFlight: 2 }, tasks });
const b: 'b' = frozen.tasks[1].id;

// What a user writes is a PlanInput (the type of a plan file, defaults optional).
const asInput: PlanInput = { ...base, tasks: [{ id: 'x', model: 'fast', prompt: 'p' }] };
const oneTask: TaskInput = { id: 'y', model: 'fast', prompt: 'p', kind: 'review', reviews: 'x' };

definePlan({
  ...base,
  // @ts-expect-error a task needs a model
  tasks: [{ id: 'x', prompt: 'no model' }],
});
definePlan({
  ...base,
  // @ts-expect-error a field the plan format does not have
  tasks: [{ id: 'x', model: 'fast', prompt: 'p', retries: 3 }],
});
definePlan({
  ...base,
  // @ts-expect-error maxRetries is a number
  tasks: [{ id: 'x', model: 'fast', prompt: 'p', maxRetries: '3' }],
});
definePlan({
  ...base,
  // @ts-expect-error kind is "task", "plan" or "review"
  tasks: [{ id: 'x', model: 'fast', prompt: 'p', kind: 'map-ish' }],
});
definePlan({
  // @ts-expect-error a provider's type is anthropic, openai or sim
  providers: { p: { type: 'gemini' } },
  models: {},
  tasks: [{ id: 'x', model: 'fast', prompt: 'p' }],
});
definePlan({
  ...base,
  tasks: [{ id: 'x', model: 'fast', prompt: 'p' }],
  // @ts-expect-error an unknown top-level section
  task: [],
});
// @ts-expect-error tasks are required
definePlan({ ...base });

void [first, second, wrong, b, asInput, oneTask];
