/** Starting ready tasks: each goes out as an agent (in a group with room), best first, while there is room in flight. */
import type { AgentInput } from '../agent/index.js';
import { cacheGroupKey, MIN_CACHE_PREFIX_TOKENS } from '../cacheGroups.js';
import { enqueueReport } from '../kit.js';
import { startByKind, type FnStepInput } from '../kinds/index.js';
import { reducePrompt } from '../mapReduceSteps.js';
import { fillPlaceholders, renderPrompt } from '../prompt.js';
import { deriveSeed, nextRandom } from '../random.js';
import { revisionPrompt } from '../review.js';
import type { Feedback, SupervisedTask } from '../tasks/types.js';
import { estimateTextTokens } from '../tokens.js';
import type { Enqueue, SupervisorContext } from './types.js';

/** Starts ready tasks, each in a group with room (a new group only when every group is full). */
export function dispatchReady(context: SupervisorContext, enqueue: Enqueue, now: number): void {
  // A run that is stopping starts nothing new (fail-fast decided in this very step).
  if (context.stop !== null) return;
  const crew = context.crew;
  const table = context.table;
  while ((crew.inFlight < context.maxInFlight || table.aggregateReady) && table.readyCount > 0) {
    const next = table.startNext();
    if (!next) break; // every ready task's model is at its cap
    const { spec, attempt } = next;
    // A map, or a reduce that does not fit one call, expands or collects; an approval waits: no agent, no slot.
    const step = spec.kind === undefined ? 'agent' : startByKind(context, enqueue, spec, attempt, next.feedback);
    if (step === 'handled') continue;
    // Taken only for an aggregator (one whose model was at its cap, or a reduce that runs as
    // one call): a task that needs a slot waits for the next one.
    if (crew.inFlight >= context.maxInFlight) {
      table.requeue(spec.id);
      break;
    }
    if (step !== 'agent') {
      // A function step: a slot and a group (its deadline, its cancel), no key, no model.
      spawnInGroup(context, enqueue, step);
      enqueueReport(enqueue, { type: 'task:started', taskId: spec.id, attempt, model: spec.modelName, route: `fn/${step.fn}`, fn: step.fn });
      table.agentStarted(spec.id);
      crew.inFlight += 1;
      continue;
    }
    const input = agentInputOf(context, spec, attempt, next);
    if (spec.cacheFanOut) {
      // Cache-aware fan-out: one task of a cold prefix goes first, the others wait for its response.
      const system = input.system ?? '';
      const prefixTokens = estimateTextTokens(system) + (spec.toolTokens ?? 0);
      if (prefixTokens >= (spec.cacheMinTokens ?? MIN_CACHE_PREFIX_TOKENS)) {
        const group = cacheGroupKey(`${input.provider}/${input.model}`, spec.tools, system);
        const admission = context.groups.admit(group, spec.id, attempt, now);
        if (admission === 'hold') {
          table.hold(spec.id);
          continue;
        }
        // A warm group: the provider will read the prefix from its cache, which its input-token
        // limit does not count where reads are free; the key is leased for the rest only.
        if (admission === 'go' && spec.cacheReadsFree) input.cachedTokens = prefixTokens;
        if (admission === 'lead') {
          input.cacheLead = true;
          enqueueReport(enqueue, { type: 'cache:lead', taskId: spec.id, group });
        }
      }
    }
    spawnInGroup(context, enqueue, input);
    enqueueReport(enqueue, { type: 'task:started', taskId: spec.id, attempt, model: spec.modelName, route: routeName(context.infra.routeNames, input.provider, input.model) });
    table.agentStarted(spec.id);
    crew.inFlight += 1;
  }
}

/** Sends the attempt to a group with room (a new group only when every group is full). */
function spawnInGroup(context: SupervisorContext, enqueue: Enqueue, input: AgentInput | FnStepInput): void {
  const crew = context.crew;
  const spawned = crew.spawned;
  const group = crew.take();
  const id = crew.id(group);
  if (crew.spawned > spawned) enqueue.spawnChild('group', { id, input: { group } });
  enqueue.sendTo(id, { type: 'SPAWN', input });
}

/** `<provider>/<model>`, built once per route of the run (a task:started names one per task). */
function routeName(routeNames: SupervisorContext['infra']['routeNames'], provider: string, model: string): string {
  let byModel = routeNames.get(provider);
  if (!byModel) routeNames.set(provider, (byModel = new Map()));
  let name = byModel.get(model);
  if (name === undefined) byModel.set(model, (name = `${provider}/${model}`));
  return name;
}

/** What the agent of this attempt is given: its prompt with deps placed, its route, its limits. */
function agentInputOf(context: SupervisorContext, spec: SupervisedTask, attempt: number, next: { retriesLeft: number; feedback?: Feedback }): AgentInput {
  const table = context.table;
  const input: AgentInput = {
    taskId: spec.id,
    attempt,
    provider: spec.provider,
    model: spec.model,
    maxTokens: spec.maxTokens,
    priority: spec.priority,
    prompt: withFeedback(spec.kind === 'reduce' ? reducePrompt(table, spec) : renderPrompt(spec.prompt, spec.deps, table.outputText, undefined, table.absentDeps(spec)), next.feedback),
    tools: spec.tools,
    maxTurns: spec.maxTurns,
    retries: next.retriesLeft,
    timeoutMs: spec.timeoutMs,
    backoff: context.backoff,
    seed: deriveSeed(context.seed, `${spec.id}:${attempt}`),
    // In the literal: every input has it, and a property added later grows a second store per input.
    modelName: spec.modelName,
  };
  if (context.maxRateLimitWaits !== undefined) input.maxRateLimitWaits = context.maxRateLimitWaits;
  // A system prompt may place dependency outputs too; unplaced ones go only to the prompt.
  if (spec.inputBudget !== undefined) input.inputBudget = spec.inputBudget;
  if (spec.fallbacks?.length) input.fallbacks = spec.fallbacks;
  if (context.hooks.dispatch) input.hooked = true;
  if (context.hooks.tool) input.toolHooked = true;
  if (spec.price) input.price = spec.price;
  if (context.infra.budgets) input.budgeted = true;
  if (spec.toolTokens) input.toolTokens = spec.toolTokens;
  if (context.compaction) input.compaction = context.compaction;
  if (context.keepLast !== undefined) input.keepLast = context.keepLast;
  if (spec.routes) {
    // A weighted route for this attempt, drawn from the run's seed (a retry may draw another).
    const route = pickRoute(spec.routes, nextRandom(deriveSeed(context.seed, `${spec.id}:${attempt}:route`))[0]);
    input.provider = route.provider;
    input.model = route.model;
    input.maxTokens = route.maxTokens;
    if (route.price) input.price = route.price;
    else delete input.price;
  }
  if (spec.system !== undefined) input.system = fillPlaceholders(spec.system, spec.deps, table.outputText);
  if (spec.depth) input.depth = spec.depth;
  if (spec.output) input.output = spec.output;
  if (spec.judge) input.judge = spec.judge;
  return input;
}

/** The prompt of an attempt that runs again for a reason: a reviewer's findings, a rejected plan. */
function withFeedback(prompt: string, feedback: Feedback | undefined): string {
  if (!feedback) return prompt;
  if (feedback.kind === 'review') return revisionPrompt(prompt, feedback);
  if (feedback.kind === 'output') return rejectedOutputPrompt(prompt, feedback);
  return `${prompt}\n\n<rejected-plan>\nYour previous answer was not a valid list of sub-tasks:\n${feedback.issues.map((i) => `- ${i}`).join('\n')}\nAnswer again with a corrected JSON list.\n</rejected-plan>`;
}

/** The prompt of an attempt whose last answer failed its checks: the answer and what was wrong with it. */
function rejectedOutputPrompt(prompt: string, feedback: Extract<Feedback, { kind: 'output' }>): string {
  const what = feedback.code === 'invalid_output' ? 'did not meet the required output schema' : 'was rejected by a quality check';
  return (
    `${prompt}\n\n<rejected-answer>\nYour previous answer ${what}:\n${feedback.problems.map((p) => `- ${p}`).join('\n')}\n\n` +
    `<previous-answer>\n${feedback.draft}\n</previous-answer>\nAnswer the task again in full, fixing these problems.\n</rejected-answer>`
  );
}

/** The route whose cumulative weight first passes `r` (in [0, 1)) of the total. */
function pickRoute<T extends { weight: number }>(routes: readonly T[], r: number): T {
  const total = routes.reduce((sum, x) => sum + x.weight, 0);
  let at = r * total;
  for (const route of routes) {
    at -= route.weight;
    if (at < 0) return route;
  }
  return routes[routes.length - 1]!;
}
