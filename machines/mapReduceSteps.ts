/**
 * What the supervisor does with a map or reduce task it takes from the ready queue (see
 * machines/mapReduce.ts): expand it (the `expandPlan` actor builds and journals the sub-tasks),
 * collect its sub-tasks' outputs once they are done, or, for a reduce whose inputs fit one call,
 * let it run as an agent with its inputs in the prompt.
 */
import { fillPlaceholders, renderPrompt, type OwnPlaceholders } from './prompt.js';
import { ZERO_USAGE, type ErrorInfo } from './protocol.js';
import { enqueueReport } from './kit.js';
import { errorInfo } from './errors.js';
import type { RunTable } from './tasks/runTable.js';
import type { SupervisedTask } from './tasks/types.js';
import type { Enqueue, PlanExpansionInput, SupervisorContext } from './supervisor/types.js';
import { reportFlow } from './supervisor/settle.js';
import { answerJson, inputText, planGroups, promptTokens, refTask, renderInputs, type Group } from './mapReduce.js';

export type { Group };

/** How the supervisor fails an aggregator (not retried), passed in so this module imports none of it. */
export type FailAggregate = (taskId: string, attempt: number, error: ErrorInfo) => void;

/** `done`: handled here (expanding, collected or failed). `agent`: a reduce that runs as one call. */
export function aggregateStep(context: SupervisorContext, enqueue: Enqueue, spec: SupervisedTask, attempt: number, failAggregate: FailAggregate): 'done' | 'agent' {
  const table = context.table;
  const out = (id: string) => table.output(id) ?? '';
  if (table.expanded(spec.id)) {
    collect(table, enqueue, spec.id, attempt);
    return 'done';
  }
  if (spec.kind === 'map') {
    const from = spec.map?.from;
    // The items' source is read as items, not appended to every item's prompt.
    const deps = spec.deps.filter((d) => d !== from);
    // The templates as written: each item's prompt is filled in one pass, its item and its deps together.
    const map: NonNullable<PlanExpansionInput['map']> = { prompt: spec.prompt, deps, outputs: deps.map(out) };
    if (spec.system !== undefined) map.system = spec.system;
    if (from !== undefined) map.itemsText = out(from);
    expand(context, enqueue, spec, attempt, { map });
    return 'done';
  }
  const fail = (error: ErrorInfo) => {
    failAggregate(spec.id, attempt, error);
    return 'done' as const;
  };
  const refs = inputsOf(table, spec);
  if (!refs.ok) return fail(errorInfo('invalid_plan', `task "${spec.id}": ${refs.message}`));
  if (refs.list.length === 0) return fail(errorInfo('invalid_plan', `task "${spec.id}": nothing to reduce (${describeOver(spec)} has no inputs)`));
  const fanIn = spec.reduce!.fanIn;
  const complete = refs.list.every((r) => table.status(refTask(r)) === 'completed');
  const system = spec.system !== undefined ? fillPlaceholders(spec.system, spec.deps, out) : undefined;
  let size: Parameters<typeof planGroups>[3];
  // A function merges every input in one call: no tree, no context window.
  if (spec.fn !== undefined) {
    if (complete) return 'agent';
    return fail(errorInfo('invalid_plan', `task "${spec.id}": function reduce started before its inputs completed`));
  }
  if (complete) {
    const fits = spec.inputBudget === undefined || promptTokens(system, reducePrompt(table, spec), spec.toolTokens) <= spec.inputBudget;
    if (refs.list.length <= fanIn && fits) return 'agent';
    if (spec.inputBudget !== undefined) {
      const room = spec.inputBudget - promptTokens(system, template(table, spec, refs.list), spec.toolTokens);
      // Each input's block (its text and tags) rounded up on its own: the sum bounds the whole.
      const of = (ref: string) => Math.ceil((inputText(ref, out).length + 32) / 4);
      const outputsOfGroups = refs.list.every((r) => table.spec(refTask(r)).reduce?.group === true);
      size = { of, room, outputsOfGroups };
    }
  }
  const plan = planGroups(spec.id, refs.list, fanIn, size);
  if (!plan.ok) return fail(errorInfo('context_overflow', `task "${spec.id}" (model "${spec.modelName}"): ${plan.message}; nothing is cut to fit`));
  if (plan.groups.length === 1 && plan.groups[0]!.inputs.length === refs.list.length && spec.reduce?.group) {
    return fail(errorInfo('context_overflow', `task "${spec.id}": its inputs do not fit the input budget of model "${spec.modelName}" and cannot be split further`));
  }
  expand(context, enqueue, spec, attempt, { reduce: { groups: plan.groups } });
  return 'done';
}

/**
 * The prompt of a reduce that runs as one call: its other deps and `{{inputs}}` placed in one pass
 * (the inputs appended when the prompt does not place them).
 */
export function reducePrompt(table: RunTable, spec: SupervisedTask): string {
  const refs = inputsOf(table, spec);
  const list = refs.ok ? refs.list : [];
  const out = (id: string) => table.output(id) ?? '';
  const inputs = renderInputs(list.map((r) => inputText(r, out)));
  let placed = false;
  const prompt = template(table, spec, list, (name) => {
    if (name !== 'inputs') return undefined;
    placed = true;
    return inputs;
  });
  return placed ? prompt : `${prompt}\n\n${inputs}`;
}

/** The prompt with its other deps placed: `{{inputs}}` too when `own` fills it. */
function template(table: RunTable, spec: SupervisedTask, refs: readonly string[], own?: OwnPlaceholders): string {
  const over = new Set([...overIds(spec), ...refs.map(refTask)]);
  return renderPrompt(spec.prompt, spec.deps.filter((d) => !over.has(d)), (id) => table.output(id) ?? '', own, table.absentDeps(spec));
}

const overIds = (spec: SupervisedTask): string[] => {
  const over = spec.reduce?.over ?? [];
  return typeof over === 'string' ? [over] : over;
};

const describeOver = (spec: SupervisedTask) => overIds(spec).map((id) => `"${id}"`).join(', ');

/**
 * A reduce's inputs: a group's own list; a map's items (those it kept, once it has completed);
 * the elements of a task's JSON array output; or one per task of a list.
 */
export function inputsOf(table: RunTable, spec: SupervisedTask): { ok: true; list: string[] } | { ok: false; message: string } {
  const over = spec.reduce?.over ?? [];
  // A join's inputs that did not complete are left out (any other reduce's all did).
  if (typeof over !== 'string') return { ok: true, list: spec.after === 'any' ? over.filter((r) => table.status(refTask(r)) === 'completed') : [...over] };
  if (table.spec(over).kind === 'map') return { ok: true, list: [...(table.keptOf(over) ?? table.subtasksOf(over) ?? [])] };
  const value = answerJson(table.output(over) ?? '');
  if (!Array.isArray(value)) return { ok: false, message: `the output of "${over}" is not a JSON array, so it has no inputs to reduce` };
  return { ok: true, list: value.map((_, i) => `${over}#${i}`) };
}

function expand(context: SupervisorContext, enqueue: Enqueue, spec: SupervisedTask, attempt: number, extra: Pick<PlanExpansionInput, 'map' | 'reduce'>): void {
  const id = `expand:${spec.id}`;
  context.expanding.set(id, { taskId: spec.id, attempt, output: '', usage: ZERO_USAGE });
  enqueue.spawnChild('expandPlan', { id, input: { taskId: spec.id, attempt, output: '', depth: spec.depth ?? 0, ...extra } });
}

function collect(table: RunTable, enqueue: Enqueue, taskId: string, attempt: number): void {
  const done = table.completeAggregate(taskId, attempt);
  if (done.settlement.kind !== 'completed') return;
  if (done.dropped !== undefined) {
    enqueueReport(enqueue, { type: 'task:deduped', taskId, items: done.items ?? 0, kept: (done.items ?? 0) - done.dropped, dropped: done.dropped });
  }
  enqueueReport(enqueue, { type: 'task:completed', taskId, attempt, output: done.output, usage: ZERO_USAGE, ...table.countersOf(taskId) });
  reportFlow(enqueue, table, done.settlement);
}
