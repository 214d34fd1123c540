/**
 * Compiled by `npm run typecheck`: what `definePlan` accepts and refuses, and the types it keeps.
 * Each `@ts-expect-error` line is a wrong input the compiler must refuse; if the type ever lets
 * it through, the directive itself becomes the error. `refused` is also run by define.test.ts,
 * which checks that `validate` refuses each of those plans with the message its comment names.
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
  // @ts-expect-error kind is "task", "plan", "review", "map", "reduce", "fn" or "approval"
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

// Each kind of task as a plan writes it; these compile.
const kinds = definePlan({
  ...base,
  tasks: [
    { id: 'list', model: 'fast', prompt: 'List products', output: { schema: { type: 'array' } } },
    { id: 'plan', kind: 'plan', model: 'fast', prompt: 'Plan the work' },
    { id: 'review', kind: 'review', reviews: 'list', maxRounds: 2, model: 'fast', prompt: 'Review {{list}}' },
    { id: 'each', kind: 'map', items: { from: 'list' }, as: 'row', maxItems: 10, key: 'sku', dedupe: 'text', model: 'fast', prompt: 'Describe {{row}}' },
    { id: 'file', kind: 'map', items: { file: 'items.jsonl' }, model: 'fast', prompt: 'Describe {{item}}' },
    { id: 'sum', kind: 'reduce', over: 'each', fanIn: 4, model: 'fast', prompt: 'Merge {{inputs}}' },
    { id: 'both', kind: 'reduce', over: ['sum', 'review'], model: 'fast', prompt: 'Merge {{inputs}}', accept: { minChars: 10, judge: { model: 'fast', prompt: 'Good?' } } },
    { id: 'fetch', kind: 'fn', fn: 'fetchOrders', deps: ['list'], output: { schema: { type: 'array' } }, maxRetries: 2, timeoutMs: 5000, priority: 1 },
    { id: 'enrich', kind: 'map', items: { from: 'fetch' }, fn: 'enrich', key: 'id', maxRetries: 1 },
    { id: 'merge', kind: 'reduce', over: 'enrich', fn: 'mergeAll', output: { schema: { type: 'object' } } },
    { id: 'ok', kind: 'approval', approves: 'list', prompt: 'Send {{list}}?', maxRounds: 2, timeoutMs: 60000, deps: ['fetch'] },
  ],
});
const each: 'each' = kinds.tasks[3].id;
const ok: 'ok' = kinds.tasks[10].id;

// Tasks built by code, of any kind, as TaskInput values: accepted (a list of unknown length may be empty: validate says).
const built: TaskInput[] = ['a', 'b'].map((id): TaskInput => ({ id, kind: 'map', items: { values: [id] }, model: 'fast', prompt: '{{item}}' }));
const fromCode = definePlan({ ...base, tasks: built });
const fnTasks: TaskInput[] = [
  { id: 'f', kind: 'fn', fn: 'go' },
  { id: 'm', kind: 'map', items: { values: [1] }, fn: 'go' },
  { id: 'r', kind: 'reduce', over: ['f'], fn: 'go' },
  { id: 'o', kind: 'approval', approves: 'f', prompt: 'Fine?' },
];
void [each, ok, fromCode, fnTasks];

/** A model with a price, so a plan with `budgetUsd` has no other problem than the one refused. */
const priced = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 1 } } },
} as const;
const other = { id: 'a', model: 'fast', prompt: 'A' } as const;

/**
 * Plans `validate` refuses for their shape, each a compile error: `says` is validate's message
 * (checked by define.test.ts), the directive's comment the rule.
 */
export const refused: { says: string; plan: unknown }[] = [
  {
    says: 'tasks: a plan needs at least one task',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a plan has at least one task
      tasks: [],
    }),
  },
  {
    says: 'tasks[0].output.strict: unknown field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error output has only `schema`
      tasks: [{ id: 'x', model: 'fast', prompt: 'p', output: { schema: { type: 'string' }, strict: true } }],
    }),
  },
  {
    says: 'tasks[0].items.limit: unknown field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error items is {file}, {from} or {values}, nothing else
      tasks: [{ id: 'x', kind: 'map', model: 'fast', prompt: 'p', items: { values: [1], limit: 2 } }],
    }),
  },
  {
    says: 'tasks[0].items: items is {"file": "items.jsonl"}, {"from": "<task id>"} or {"values": [...]}',
    plan: definePlan({
      ...priced,
      // @ts-expect-error items comes from one source only
      tasks: [{ id: 'x', kind: 'map', model: 'fast', prompt: 'p', items: { values: [1], from: 'a' } }, other],
    }),
  },
  {
    says: 'tasks[0].items: required: {"file": "items.jsonl"}, {"from": "<task id>"} or {"values": [...]}',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a map needs items
      tasks: [{ id: 'x', kind: 'map', model: 'fast', prompt: 'p' }],
    }),
  },
  {
    says: 'tasks[0].over: required: the map (or task with a JSON array output, or list of tasks) whose outputs this reduce merges',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a reduce needs over
      tasks: [{ id: 'x', kind: 'reduce', model: 'fast', prompt: 'p' }],
    }),
  },
  {
    says: 'tasks[0].over: a reduce over nothing: name a map, a task with a JSON array output, or at least one task',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a reduce over a list names at least one task
      tasks: [{ id: 'x', kind: 'reduce', model: 'fast', prompt: 'p', over: [] }],
    }),
  },
  {
    says: 'tasks[0].reviews: required: the id of the task this review task reviews',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a review needs reviews
      tasks: [{ id: 'x', kind: 'review', model: 'fast', prompt: 'p' }],
    }),
  },
  {
    says: 'tasks[0].items: only a task with "kind": "map" has this field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error items on a plain task (no kind)
      tasks: [{ id: 'x', model: 'fast', prompt: 'p', items: { values: [1] } }],
    }),
  },
  {
    says: 'tasks[0].items: only a task with "kind": "map" has this field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error items on kind "task"
      tasks: [{ id: 'x', kind: 'task', model: 'fast', prompt: 'p', items: { values: [1] } }],
    }),
  },
  {
    says: 'tasks[0].reviews: only a task with "kind": "review" reviews another task',
    plan: definePlan({
      ...priced,
      // @ts-expect-error reviews on a map
      tasks: [{ id: 'x', kind: 'map', model: 'fast', prompt: 'p', items: { values: [1] }, reviews: 'a' }, other],
    }),
  },
  {
    says: 'tasks[0].maxRounds: only a task with "kind": "review" or "approval" has rounds',
    plan: definePlan({
      ...priced,
      // @ts-expect-error maxRounds on a plain task
      tasks: [{ id: 'x', model: 'fast', prompt: 'p', maxRounds: 2 }],
    }),
  },
  {
    says: 'tasks[0].fanIn: only a task with "kind": "reduce" has this field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error fanIn on a map
      tasks: [{ id: 'x', kind: 'map', model: 'fast', prompt: 'p', items: { values: [1] }, fanIn: 2 }],
    }),
  },
  {
    says: 'tasks[0].dedupe: only a task with "kind": "map" has this field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error dedupe on a reduce
      tasks: [{ id: 'x', kind: 'reduce', model: 'fast', prompt: 'p', over: ['a'], dedupe: 'text' }, other],
    }),
  },
  {
    says: 'tasks[0].over: only a task with "kind": "reduce" has this field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error over on a planner
      tasks: [{ id: 'x', kind: 'plan', model: 'fast', prompt: 'p', over: 'a' }, other],
    }),
  },
  {
    says: 'tasks[0].as: only a task with "kind": "map" has this field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error as on a review
      tasks: [{ id: 'x', kind: 'review', reviews: 'a', model: 'fast', prompt: 'p', as: 'row' }, other],
    }),
  },
  {
    says: "tasks[0].budgetUsd: a map calls no model itself: its sub-tasks' calls count against the run's and the models' budgets",
    plan: definePlan({
      ...priced,
      // @ts-expect-error budgetUsd on a map
      tasks: [{ id: 'x', kind: 'map', model: 'fast', prompt: 'p', items: { values: [1] }, budgetUsd: 1 }],
    }),
  },
  {
    says: "tasks[0].budgetUsd: a reduce calls no model itself: its sub-tasks' calls count against the run's and the models' budgets",
    plan: definePlan({
      ...priced,
      // @ts-expect-error budgetUsd on a reduce
      tasks: [{ id: 'x', kind: 'reduce', model: 'fast', prompt: 'p', over: ['a'], budgetUsd: 1 }, other],
    }),
  },
  {
    says: 'tasks[0].accept.regex: unknown field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error accept has minChars, pattern and judge
      tasks: [{ id: 'x', model: 'fast', prompt: 'p', accept: { minChars: 3, regex: 'x' } }],
    }),
  },
  {
    says: 'tasks[0].accept.judge.min: unknown field',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a judge has model, prompt and threshold
      tasks: [{ id: 'x', model: 'fast', prompt: 'p', accept: { judge: { model: 'fast', prompt: 'ok?', min: 0.5 } } }],
    }),
  },
  {
    says: 'tasks[0].fn: required: the name of the function this task runs',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a fn task names its function
      tasks: [{ id: 'x', kind: 'fn' }],
    }),
  },
  {
    says: 'tasks[0].model: a "fn" task runs a function, not a model: it has no "model"',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a fn task has no model
      tasks: [{ id: 'x', kind: 'fn', fn: 'go', model: 'fast' }],
    }),
  },
  {
    says: 'tasks[0].prompt: a "fn" task runs a function, not a model: it has no "prompt" (the function reads its deps\' outputs in ctx.deps)',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a fn task has no prompt
      tasks: [{ id: 'x', kind: 'fn', fn: 'go', prompt: 'p' }],
    }),
  },
  {
    says: 'tasks[0].budgetUsd: a "fn" task runs a function, not a model: it has no "budgetUsd" (a function costs nothing)',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a fn task has no budget
      tasks: [{ id: 'x', kind: 'fn', fn: 'go', budgetUsd: 1 }],
    }),
  },
  {
    says: 'tasks[0].fn: only a task with "kind": "map", "reduce" or "fn" names a function',
    plan: definePlan({
      ...priced,
      // @ts-expect-error fn on a plain task
      tasks: [{ id: 'x', model: 'fast', prompt: 'p', fn: 'go' }],
    }),
  },
  {
    says: 'tasks[0].prompt: this map runs function "go" on each item, not a model: it has no "prompt" (the function reads the item in ctx.item)',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a map that runs a function has no prompt
      tasks: [{ id: 'x', kind: 'map', items: { values: [1] }, fn: 'go', prompt: 'p' }],
    }),
  },
  {
    says: 'tasks[0].as: this map runs function "go" on each item, not a model: it has no "as" (the function reads the item in ctx.item)',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a map that runs a function names no item
      tasks: [{ id: 'x', kind: 'map', items: { values: [1] }, fn: 'go', as: 'row' }],
    }),
  },
  {
    says: 'tasks[0].model: required (or "fn": a function to run on each item)',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a map needs a model, or a function
      tasks: [{ id: 'x', kind: 'map', items: { values: [1] }, prompt: 'p' }],
    }),
  },
  {
    says: 'tasks[0].fanIn: this reduce runs function "go" once on all its inputs, not a model: it has no "fanIn" (there is no tree of calls: ctx.inputs holds every input)',
    plan: definePlan({
      ...priced,
      // @ts-expect-error a reduce that runs a function makes no tree
      tasks: [{ id: 'x', kind: 'reduce', over: ['a'], fn: 'go', fanIn: 2 }, other],
    }),
  },
  {
    says: 'tasks[0].approves: required: the id of the task a person approves',
    plan: definePlan({
      ...priced,
      // @ts-expect-error an approval names the task it approves
      tasks: [{ id: 'x', kind: 'approval', prompt: 'ok?' }],
    }),
  },
  {
    says: 'tasks[0].prompt: required: the question the person answers (e.g. "Send this reply?")',
    plan: definePlan({
      ...priced,
      // @ts-expect-error an approval asks a question
      tasks: [{ id: 'x', kind: 'approval', approves: 'a' }, other],
    }),
  },
  {
    says: 'tasks[0].model: an approval asks a person, not a model: it has no "model"',
    plan: definePlan({
      ...priced,
      // @ts-expect-error an approval has no model
      tasks: [{ id: 'x', kind: 'approval', approves: 'a', prompt: 'ok?', model: 'fast' }, other],
    }),
  },
  {
    says: 'tasks[0].output: an approval\'s output is the person\'s decision, {"approved": true|false, "note"?: "..."}: it has no "output"',
    plan: definePlan({
      ...priced,
      // @ts-expect-error an approval's output is its decision
      tasks: [{ id: 'x', kind: 'approval', approves: 'a', prompt: 'ok?', output: { schema: { type: 'object' } } }, other],
    }),
  },
  {
    says: 'tasks[0].approves: only a task with "kind": "approval" approves another task',
    plan: definePlan({
      ...priced,
      // @ts-expect-error approves on a review
      tasks: [{ id: 'x', kind: 'review', reviews: 'a', model: 'fast', prompt: 'p', approves: 'a' }, other],
    }),
  },
];

// The same refusals where a plan or a task is annotated with the exported types.
// @ts-expect-error a map needs items
const noItems: TaskInput = { id: 'x', kind: 'map', model: 'fast', prompt: 'p' };
// @ts-expect-error items on a plain task
const plainItems: TaskInput = { id: 'y', model: 'fast', prompt: 'p', items: { values: [1] } };
// @ts-expect-error reviews on a map
const mapReviews: TaskInput = { id: 'z', kind: 'map', model: 'fast', prompt: 'p', items: { values: [1] }, reviews: 'x' };
// @ts-expect-error items comes from one source only
const twoSources: TaskInput = { id: 'w', kind: 'map', model: 'fast', prompt: 'p', items: { file: 'a.jsonl', values: [1] } };
// @ts-expect-error a plan has at least one task
const noTasks: PlanInput = { ...base, tasks: [] };
// @ts-expect-error a map runs a function or calls a model, not both
const mapBoth: TaskInput = { id: 'v', kind: 'map', items: { values: [1] }, fn: 'go', model: 'fast', prompt: 'p' };
// @ts-expect-error a fn task has no tools
const fnTools: TaskInput = { id: 'u', kind: 'fn', fn: 'go', tools: ['t'] };
// @ts-expect-error an approval is not retried
const approvalRetries: TaskInput = { id: 't', kind: 'approval', approves: 'u', prompt: 'ok?', maxRetries: 1 };
void [noItems, plainItems, mapReviews, twoSources, noTasks, mapBoth, fnTools, approvalRetries];
