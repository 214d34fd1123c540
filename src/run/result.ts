/**
 * The public result of a run from the supervisor's output: what each task cost, and structured
 * outputs as their parsed values.
 */
import { countsOfResult, type RunResult } from '../../machines/tasks/results.js';
import { costOf } from '../cost/price.js';
import { priceOf } from '../cost/prices.js';
import type { Plan } from '../plan/index.js';
import { parsedOutput } from '../plan/structured.js';

/** The supervisor's output as the caller gets it: priced, its structured outputs parsed. */
export function publicResult(result: RunResult, plan: Plan): RunResult {
  return withParsedOutputs(priced(result, plan), plan);
}

/**
 * A structured output is its parsed value in the public result (the runtime keeps its JSON
 * text): a schema's, a map's array, a function's value, an approval's decision (each kind says).
 */
function withParsedOutputs(result: RunResult, plan: Plan): RunResult {
  for (const spec of plan.tasks) {
    const task = result.tasks[spec.id];
    if (task && typeof task.output === 'string') task.output = parsedOutput(spec, task.output);
  }
  return result;
}

/** Adds what each task cost (its model's price times its usage) and the total (counted as every surface counts it). */
function priced(result: RunResult, plan: Plan): RunResult {
  for (const task of Object.values(result.tasks)) {
    // The agents priced each call at the model that served it; what they could not price (a task
    // that never called, or a model without a price) is priced here from its usage, or unknown.
    if (task.costUsd === undefined) {
      const model = plan.models[task.model];
      task.costUsd = task.requests === 0 ? 0 : costOf(task.usage, model ? priceOf(model.model, model.price) : undefined);
    }
  }
  result.totals.costUsd = countsOfResult(result).costUsd;
  return result;
}
