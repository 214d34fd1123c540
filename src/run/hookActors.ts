/**
 * The run's hooks as the agents' actors: `beforeDispatch` before every model call, and
 * `beforeToolCall` before every tool call. The hooks are the caller's (createSwarm({ hooks }))
 * then the plan's (`hooks.module`); the first that does not allow decides, and a hook that
 * throws denies (its message as the reason).
 */
import { fromPromise } from 'xstate';
import type { DispatchDecision, DispatchInfo, ToolCallDecision, ToolCallInfo } from '../../machines/protocol.js';
import { decisionOf, toolDecisionOf, type BeforeDispatch, type BeforeToolCall } from '../hooks.js';
import type { Plan } from '../plan/index.js';
import { targetOfModel } from '../resolve.js';

/** The tool hooks as the agents' `beforeToolCall` actor: per call, the first that does not allow decides. */
export function toolHook(hooks: BeforeToolCall[]) {
  return fromPromise<ToolCallDecision[], ToolCallInfo[]>(({ input }) =>
    Promise.all(
      input.map(async (call): Promise<ToolCallDecision> => {
        for (const hook of hooks) {
          let decision: ToolCallDecision;
          try {
            decision = toolDecisionOf(await hook(call));
          } catch (error) {
            return { action: 'deny', reason: `the hook threw: ${(error as Error)?.message ?? String(error)}` };
          }
          if (decision.action !== 'allow') return decision;
        }
        return { action: 'allow' };
      }),
    ),
  );
}

/**
 * The hooks as the agents' `beforeDispatch` actor: each in turn; the first that does not allow
 * decides. `budgetLeft` is the run budget's balance as the ledger last announced it.
 */
export function dispatchHook(hooks: BeforeDispatch[], plan: Plan, budgetLeft: () => number | undefined) {
  return fromPromise<DispatchDecision, DispatchInfo>(async ({ input }) => {
    const left = budgetLeft();
    const info: DispatchInfo = left === undefined ? input : { ...input, budgetLeftUsd: left };
    for (const hook of hooks) {
      let decision: DispatchDecision;
      try {
        decision = decisionOf(await hook(info), (name) => (plan.models[name] ? targetOfModel(plan, name, input.maxTokens) : undefined));
        if (decision.action === 'rewrite' && decision.maxTokens !== undefined && decision.maxTokens > input.maxTokens) {
          decision = { action: 'deny', reason: `the hook raised maxTokens from ${input.maxTokens} to ${decision.maxTokens}: a rewrite may only lower it` };
        }
      } catch (error) {
        return { action: 'deny', reason: `the hook threw: ${(error as Error)?.message ?? String(error)}` };
      }
      if (decision.action !== 'allow') return decision;
    }
    return { action: 'allow' };
  });
}
