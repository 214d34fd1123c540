/**
 * The agent's actions after a call: its outcome goes to the key's pool (with the verdict for the
 * route's breaker, which the pool passes on when it can change it) and the ledger, and to the attempt's own account; what the outcome means next (the reply joins the
 * conversation, a retry is planned, the attempt fails) is an `Outcome` the chart names on the
 * transition. The settle action applies both in one assign, since each assign copies the whole
 * context. Also here: compaction, the deadline's error, and `giveBack` on the way out.
 */
import { compact } from '../compaction.js';
import { nowOf } from '../clock.js';
import { costOfUsage } from '../cost.js';
import { breakerVerdictOf, errorInfo, isKeyScoped, leaseOutcomeOf, mayHaveReachedServer, retriesSpent } from '../errors.js';
import { scoreOf } from '../judge.js';
import { enqueueReport } from '../kit.js';
import { addUsage } from '../protocol.js';
import type { AgentStatus, CallRecord, ContentBlock, ErrorInfo, LeaseOutcome, LedgerEvent, ModelCallOutput, RunEvent } from '../protocol.js';
import { backoffDelay, nextRandom } from '../random.js';
import { estimateRequestTokens, textOf } from '../tokens.js';
import {
  OVERLOADS_BEFORE_FALLBACK,
  errorOf,
  handBack,
  keepLastOf,
  outputOf,
  poolOf,
  releaseOf,
  routeOf,
  routedOf,
  targetOf,
  patchOf,
  worstCaseOf,
  type ActionArgs,
  type AgentContext,
  type Counts,
  type Patch,
  type PatchArgs,
} from './context.js';
import { callEvent } from './calls.js';
import { fallbackEvent } from './dispatch.js';

/** What an outcome changes beside the call's settlement, and the events it reports after it. */
export interface Then {
  /** Sub-objects in part: the settle action merges it over its own patch. */
  patch: Patch;
  reports?: RunEvent[];
}

/** An outcome: from the context (before the settlement) and the call's done or error event. */
export type Outcome = (context: AgentContext, event: unknown) => Then;

// ---------------------------------------------------------------------------------------------
// Outcomes of a reply
// ---------------------------------------------------------------------------------------------

/** The context after a reply joined the conversation (the overflow retry is once per request). */
function withReply(context: AgentContext, content: ContentBlock[]): Patch {
  return { overflowRetried: false, counts: { turn: context.counts.turn + 1 }, messages: [...context.messages, { role: 'assistant' as const, content }] };
}

/** The final reply: it joins the conversation and is the attempt's output. */
function finalPatch(context: AgentContext, event: unknown): Patch {
  const { content, verdict } = outputOf(event);
  // A checked answer is kept as the checks read it (a structured one as compact JSON).
  return { ...withReply(context, content), output: verdict?.ok ? verdict.text : textOf(content), status: 'completed' };
}

/** An answer that failed its checks: retryable, with the problems for the next attempt's prompt. */
function outputError(context: AgentContext, code: 'invalid_output' | 'rejected_output', what: string, problems: string[]): ErrorInfo {
  const { taskId, attempt } = context.input;
  return { ...errorInfo(code, `task "${taskId}" attempt ${attempt}: the answer ${what}: ${problems.join('; ')}`, true), problems };
}

export const finalReply: Outcome = (context, event) => ({ patch: finalPatch(context, event) });

/** The reply asks for tools: it joins the conversation, the turn is done. */
export const toolsAsked: Outcome = (context, event) => ({ patch: withReply(context, outputOf(event).content) });

/** The answer passed its checks and the task has a judge: it scores the answer before it counts. */
export const toJudge: Outcome = (context, event) => ({ patch: { ...finalPatch(context, event), call: 'judge' } });

export const judgePassed: Outcome = () => ({ patch: { call: 'turn' } });

/**
 * The final answer failed its output checks: the attempt fails (retryable, so the task runs
 * again with the problems in its prompt), and its answer is kept for inspection.
 */
export const outputRejected: Outcome = (context, event) => {
  const verdict = outputOf(event).verdict as Extract<NonNullable<ModelCallOutput['verdict']>, { ok: false }>;
  const what = verdict.code === 'invalid_output' ? 'does not meet its output schema' : 'was rejected by its quality gate';
  return { patch: { ...finalPatch(context, event), error: outputError(context, verdict.code, what, verdict.problems) } };
};

/** The judge scored the answer below the threshold (or gave no readable score). */
export const judgeRejected: Outcome = (context, event) => {
  const { score, reason } = scoreOf(textOf(outputOf(event).content));
  const threshold = context.input.judge!.threshold;
  const problem =
    score === undefined
      ? `the judge gave no score from 0 to 1`
      : `the judge scored it ${score}, below the threshold of ${threshold}${reason ? `: ${reason}` : ''}`;
  return { patch: { call: 'turn', error: outputError(context, 'rejected_output', 'was rejected by its quality gate', [problem]) } };
};

/** Replaces the middle of the conversation with the summary just written (or, with none, a marker). */
export const compacted: Outcome = (context, event) => {
  const summary = context.call === 'summary' ? textOf(outputOf(event).content) : null;
  const before = estimateRequestTokens(context.input.system, context.messages);
  const { messages, removed } = compact(context.messages, keepLastOf(context), summary);
  const report: RunEvent = {
    type: 'task:compacted',
    taskId: context.input.taskId,
    attempt: context.input.attempt,
    mode: summary === null ? 'truncation' : 'summary',
    removed,
    tokensBefore: before,
    tokensAfter: estimateRequestTokens(context.input.system, messages),
  };
  return { patch: { messages, call: 'turn' }, reports: [report] };
};

// ---------------------------------------------------------------------------------------------
// Outcomes of an error
// ---------------------------------------------------------------------------------------------

/** The provider says the request is too long: compact and try once more. */
export const overflowed: Outcome = () => ({ patch: { overflowRetried: true } });

/** A 429 waited out: counted (for maxRateLimitWaits and the report), never as a retry. */
export const rateLimitWaited: Outcome = (context) => ({ patch: { counts: { rateLimitWaits: context.counts.rateLimitWaits + 1 } } });

/** The attempt waited out `maxRateLimitWaits` 429s and met one more: it fails, and says why. */
export const rateLimitedOut: Outcome = (context, event) => {
  const last = errorOf(event);
  const { taskId, attempt, maxRateLimitWaits } = context.input;
  const message = `task "${taskId}" attempt ${attempt}: rate limited ${context.counts.rateLimitWaits + 1} times, more than maxRateLimitWaits (${maxRateLimitWaits}) allows; last: ${last.message}`;
  return { patch: { error: { ...last, retryable: false, message } } };
};

/** The attempt ends with the error; a retryable one ends it because no retry is left, and says so. */
export const fatal: Outcome = (_, event) => {
  const error = errorOf(event);
  return { patch: { error: error.retryable ? retriesSpent(error) : error } };
};

/** Full-jitter exponential backoff; a route-level Retry-After is a floor, a key-level one is the key's. */
export const retryPlanned: Outcome = (context, event) => {
  const error = errorOf(event);
  const [r, rng] = nextRandom(context.rng);
  const floorMs = isKeyScoped(error) ? 0 : (error.retryAfterMs ?? 0);
  // A revoked key is nobody's fault: the next key can be tried at once.
  const delayMs = error.code === 'auth' ? 0 : backoffDelay(context.counts.retries, r, { ...context.input.backoff, floorMs });
  const counts: Partial<Counts> = { retries: context.counts.retries + 1 };
  const patch: Patch = { rng, backoffMs: delayMs, counts };
  const reports: RunEvent[] = [];
  // Overloaded again and again: the next try goes to the model's next fallback, if any.
  const overloads = error.code === 'overloaded' && context.call === 'turn' ? context.counts.overloads + 1 : 0;
  const fallbacks = context.input.fallbacks ?? [];
  if (overloads >= OVERLOADS_BEFORE_FALLBACK && context.routeIndex < fallbacks.length) {
    patch.routeIndex = context.routeIndex + 1;
    counts.overloads = 0;
    // From the route as routed: the settled call's hook rewrite no longer holds.
    reports.push(fallbackEvent(context, routedOf(context), fallbacks[context.routeIndex]!, `${overloads} overload errors in a row`));
  } else counts.overloads = overloads;
  reports.push({ type: 'task:retry', taskId: context.input.taskId, attempt: context.input.attempt, retry: context.counts.retries + 1, delayMs, error });
  return { patch, reports };
};

// ---------------------------------------------------------------------------------------------
// Settling a call
// ---------------------------------------------------------------------------------------------

/**
 * A successful reply: the lease goes back with its usage and a `success` verdict (the pool passes
 * it on to a breaker with failures counted: that is what resets them), the reservation becomes
 * what the call cost, and the outcome says what the reply means.
 */
export const settleSuccess = ({ context, event, enqueue, system, self }: ActionArgs, { then }: { then: Outcome }) => {
  const out = outputOf(event);
  const { reservation } = context.held;
  const lease = context.held.lease!;
  const outcome: Extract<LeaseOutcome, { kind: 'ok' }> = { kind: 'ok', usage: out.usage };
  if (out.rateLimit) outcome.rateLimit = out.rateLimit;
  if (out.sentAt !== undefined) outcome.sentAt = out.sentAt;
  enqueue.sendTo(poolOf(system, context)!, releaseOf(lease, outcome, 'success'));
  const target = targetOf(context);
  const callCost = target.price ? costOfUsage(out.usage, target.price) : undefined;
  if (reservation) {
    const settle: LedgerEvent = { type: 'LEDGER.SETTLE', reservationId: reservation, actualUsd: callCost ?? Number.NaN };
    enqueue.sendTo(system.get('ledger')!, settle);
  }
  const response: Extract<RunEvent, { type: 'model:response' }> = { ...callEvent('model:response', context, lease.keyId), usage: out.usage, stopReason: out.stopReason };
  if (out.response) response.response = out.response;
  if (callCost !== undefined) {
    response.costUsd = callCost;
    response.modelName = target.modelName ?? target.model;
  }
  enqueueReport(enqueue, response);
  const { spend } = context;
  const record: CallRecord = { route: routeOf(target), ms: Math.max(0, nowOf(self) - spend.callStartedAt), ok: true };
  if (callCost !== undefined) record.costUsd = callCost;
  const next = then(context, event);
  const settledSpend: Partial<AgentContext['spend']> = { calls: [...spend.calls, record], usage: addUsage(spend.usage, out.usage) };
  if (callCost !== undefined) settledSpend.costUsd = spend.costUsd + callCost;
  else settledSpend.unpricedCalls = spend.unpricedCalls + 1;
  enqueue.assign(settledOf(context, settledSpend, { overloads: 0 }, next.patch));
  for (const report of next.reports ?? []) enqueueReport(enqueue, report);
};

/**
 * The one assign of a settled call: what every settlement changes (the call's spend, what was
 * held for it, the hook's rewrite) with the outcome's patch over it, each sub-object copied once.
 */
function settledOf(context: AgentContext, spend: Partial<AgentContext['spend']>, counts: Partial<Counts> | undefined, patch: Patch): Partial<AgentContext> {
  const { counts: moreCounts, spend: moreSpend, held: moreHeld, ...rest } = patch;
  const out: Partial<AgentContext> = rest;
  if (!('override' in rest)) out.override = null;
  out.spend = { ...context.spend, ...spend, ...moreSpend };
  out.held = { ...context.held, lease: null, reservation: null, ...moreHeld };
  if (counts || moreCounts) out.counts = { ...context.counts, ...counts, ...moreCounts };
  return out;
}

/**
 * A failed call: the outcome goes to the key (429, 401), to the breaker through the pool (5xx
 * and kin) and the ledger. Refused before processing (429, 401, 4xx, a 5xx status) or never sent
 * (`unsent`): not billed, the reservation goes back. Cut off after it may have reached the server
 * (timeout, reset, an error mid-stream, a malformed 200): it may have been billed and the server's
 * count will never be known, so it is charged its worst case, in the ledger (NaN: the whole
 * reservation) and in the attempt's cost and its `model:error` event.
 */
export const settleFailure = ({ context, event, enqueue, system, self }: ActionArgs, { then }: { then: Outcome }) => {
  const error = errorOf(event);
  const { reservation } = context.held;
  const lease = context.held.lease!;
  enqueue.sendTo(poolOf(system, context)!, releaseOf(lease, leaseOutcomeOf(error), breakerVerdictOf(error)));
  const billed = mayHaveReachedServer(error);
  if (reservation) {
    const msg: LedgerEvent = billed ? { type: 'LEDGER.SETTLE', reservationId: reservation, actualUsd: Number.NaN } : { type: 'LEDGER.RELEASE', reservationId: reservation };
    enqueue.sendTo(system.get('ledger')!, msg);
  }
  const { report, spend } = failedCall(context, lease.keyId, error, billed, nowOf(self));
  enqueueReport(enqueue, report);
  const next = then(context, event);
  enqueue.assign(settledOf(context, spend, undefined, next.patch));
  for (const report of next.reports ?? []) enqueueReport(enqueue, report);
};

/**
 * A failed call's `model:error` and the attempt's spend after it. One that may have been billed
 * (`billed`) is charged its worst case (or counts one more unpriced call), on its event too: the
 * journal records it as spent and every view of the cost adds it, as the attempt's cost does.
 */
function failedCall(context: AgentContext, keyId: string, error: ErrorInfo, billed: boolean, now: number): { report: RunEvent; spend: Partial<AgentContext['spend']> } {
  const report: RunEvent & { costUsd?: number; modelName?: string } = { ...callEvent('model:error', context, keyId), error };
  const target = targetOf(context);
  const record: CallRecord = { route: routeOf(target), ms: Math.max(0, now - context.spend.callStartedAt), ok: false };
  const spend: Partial<AgentContext['spend']> = { calls: [...context.spend.calls, record] };
  const worst = billed ? worstCaseOf(context) : undefined;
  if (worst !== undefined) {
    report.costUsd = record.costUsd = worst;
    report.modelName = target.modelName ?? target.model;
    spend.costUsd = context.spend.costUsd + worst;
  } else if (billed) spend.unpricedCalls = context.spend.unpricedCalls + 1;
  return { report, spend };
}

// ---------------------------------------------------------------------------------------------
// Compaction without a call, the deadline, and the way out
// ---------------------------------------------------------------------------------------------

/** The plan names a compaction model: the next call writes the summary. */
export const summarize = (): Patch => ({ call: 'summary' });

/** A marked truncation (no compaction model): the same change as a summary's, without one. */
export const compactNow = ({ context, event, enqueue }: ActionArgs) => {
  const { patch, reports } = compacted(context, event);
  enqueue.assign(patchOf(context, patch));
  for (const report of reports ?? []) enqueueReport(enqueue, report);
};

export const timedOut = ({ context }: PatchArgs): Patch => ({
  error: errorInfo('task_timeout', `task "${context.input.taskId}" attempt ${context.input.attempt} passed its deadline of ${context.input.timeoutMs} ms`, true),
});

export const cancelledBy = ({ event }: PatchArgs): Patch => ({
  error: errorInfo('cancelled', (event as { reason?: string }).reason ?? 'cancelled'),
});

/** Nothing between the brief and the kept tail can go: the task cannot fit its input budget. */
export const cannotCompact = ({ context }: PatchArgs): Patch => ({
  error: errorInfo(
    'context_overflow',
    context.overflowRetried
      ? `task "${context.input.taskId}": the provider says the request is too long and there is nothing left to compact`
      : `task "${context.input.taskId}": the brief and the last turns alone exceed the input budget of ${context.input.inputBudget} tokens`,
  ),
});

/**
 * On the way out: withdraw what is requested, give back what is held, and say how it ended. A
 * call still in flight (a lease held: cancelled, past its deadline) may have reached the server:
 * charged its worst case, as the ledger settles it (handBack), and ended by a `model:error` with
 * the attempt's error that carries the charge, so the journal and every view of the events count
 * what the result counts.
 */
export const giveBack = ({ context, enqueue, system, self }: ActionArgs, { status }: { status: AgentStatus }) => {
  for (const { to, event } of handBack(context)) {
    const target = system.get(to);
    if (target) enqueue.sendTo(target, event);
  }
  // Nothing held (the common way out): only the status changes.
  const { pending, lease, reservation } = context.held;
  const held = pending || lease || reservation;
  if (!held) return void enqueue.assign({ status });
  const patch: Patch = { status, held: { pending: null, lease: null, reservation: null } };
  if (lease) {
    const error = context.error ?? errorInfo('cancelled', 'the call was cut off in flight');
    const { report, spend } = failedCall(context, lease.keyId, error, true, nowOf(self));
    enqueueReport(enqueue, report);
    patch.spend = spend;
  }
  enqueue.assign(patchOf(context, patch));
};
