/**
 * What the agent sends and tells: the next model call's input (a turn, a summary or the judge's
 * call) and the attempt's report, both read from its context (context.ts).
 */
import { SUMMARY_SYSTEM, summaryMessages } from '../compaction.js';
import { JUDGE_SYSTEM } from '../judge.js';
import type { AttemptReport, ModelCallInput } from '../protocol.js';
import { judgeMessagesOf, keepLastOf, routeOf, targetOf, type AgentContext, type CallTarget } from './context.js';

export function reportOf(ctx: AgentContext): AttemptReport {
  const report: AttemptReport = {
    taskId: ctx.input.taskId,
    attempt: ctx.input.attempt,
    status: ctx.status ?? 'failed',
    usage: ctx.spend.usage,
    requests: ctx.counts.requests,
    retries: ctx.counts.retries,
    turns: ctx.counts.turn,
    messages: ctx.messages,
  };
  if (ctx.output !== undefined) report.output = ctx.output;
  if (ctx.error !== undefined) report.error = ctx.error;
  if (ctx.routeIndex > 0) {
    const t = ctx.input.fallbacks![ctx.routeIndex - 1]!;
    report.servedBy = t.modelName ?? routeOf(t);
  }
  const { costUsd, unpricedCalls, calls } = ctx.spend;
  if (costUsd > 0 || unpricedCalls === 0) report.costUsd = costUsd;
  if (unpricedCalls > 0) report.unpricedCalls = unpricedCalls;
  if (calls.length > 0) report.calls = calls;
  return report;
}

export function callInputOf(context: AgentContext): ModelCallInput {
  const target = targetOf(context);
  const summary = context.call === 'summary';
  if (context.call === 'judge') {
    // The judge's call: its criteria and the answer, nothing of the task's conversation or tools.
    return { ...baseCallOf(context, target, context.override?.messages ?? judgeMessagesOf(context), []), system: JUDGE_SYSTEM };
  }
  const messages = context.override?.messages ?? (summary ? summaryMessages(context.messages, keepLastOf(context)) : context.messages);
  const call = baseCallOf(context, target, messages, summary ? [] : context.input.tools);
  if (summary) {
    call.system = SUMMARY_SYSTEM;
    call.summary = true;
  } else if (context.input.system !== undefined) call.system = context.input.system;
  // Only a call on the task's own route warms its group's cache (a fallback writes another one).
  if (context.input.cacheLead && !summary && context.routeIndex === 0 && !context.override?.target) call.cacheLead = true;
  if (!summary && context.input.output) call.output = context.input.output;
  return call;
}

/**
 * What every call of an attempt says: whose it is, where it goes, with which lease. Written out
 * field by field (no spreads): it is built for every call.
 */
function baseCallOf(context: AgentContext, target: CallTarget, messages: ModelCallInput['messages'], tools: ModelCallInput['tools']): ModelCallInput {
  const lease = context.held.lease!;
  const call: ModelCallInput = {
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    turn: context.counts.turn,
    provider: target.provider,
    model: target.model,
    keyId: lease.keyId,
    leaseId: lease.leaseId,
    messages,
    tools,
    maxTokens: target.maxTokens,
  };
  if (target.modelName !== undefined) call.modelName = target.modelName;
  return call;
}

/** A model:* run event of the current call on `keyId`: whose call it is and where it goes. */
export function callEvent<T extends 'model:request' | 'model:response' | 'model:error'>(type: T, context: AgentContext, keyId: string) {
  const target = targetOf(context);
  return { type, taskId: context.input.taskId, attempt: context.input.attempt, turn: context.counts.turn, provider: target.provider, model: target.model, keyId };
}
