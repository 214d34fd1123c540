/**
 * What the agent's chart asks (machine.ts names them on its transitions): each reads only the
 * context and the event, never another actor, so a transition is decided by the agent's own data.
 */
import { canCompact } from '../compaction.js';
import { scoreOf } from '../judge.js';
import type { DispatchDecision } from '../protocol.js';
import { textOf } from '../tokens.js';
import { errorOf, keepLastOf, outputOf, type AgentContext, type AgentEvent } from './context.js';
import { canReroute, overBudget, unbudgeted, unbudgetedAsDecided } from './dispatch.js';

type Guard = (args: { context: AgentContext; event: AgentEvent }) => boolean;

export const agentGuards = {
  isPending: ({ context, event }) => {
    const id = 'requestId' in event ? event.requestId : 'reservationId' in event ? event.reservationId : undefined;
    return id !== undefined && context.held.pending?.requestId === id;
  },
  /** An action found something missing (no ledger, no pool) and set the attempt's error. */
  blocked: ({ context }) => context.error !== undefined,
  overBudget: ({ context }) => overBudget(context),
  canCompact: ({ context }) => canCompact(context.messages, keepLastOf(context)),
  summarizes: ({ context }) => context.input.compaction !== undefined,
  unbudgeted: ({ context }) => unbudgeted(context),
  /** In `lease` with no request out: the call needs checking first (see requestPlainLease). */
  unrequested: ({ context }) => context.held.pending === null,
  unbudgetedAsDecided: ({ context, event }) => unbudgetedAsDecided(context, event),
  hooked: ({ context }) => context.input.hooked === true,
  denied: ({ event }) => (event as { output?: DispatchDecision }).output?.action === 'deny',
  toolHooked: ({ context }) => context.input.toolHooked === true,
  isSummary: ({ context }) => context.call === 'summary',
  isJudge: ({ context }) => context.call === 'judge',
  judgePasses: ({ context, event }) => {
    const { score } = scoreOf(textOf(outputOf(event).content));
    return score !== undefined && score >= context.input.judge!.threshold;
  },
  outputRejected: ({ event }) => outputOf(event).verdict?.ok === false,
  judged: ({ context }) => context.input.judge !== undefined,
  overflowOnce: ({ context, event }) => errorOf(event).code === 'context_overflow' && !context.overflowRetried && context.call === 'turn',
  wantsTools: ({ event }) => outputOf(event).content.some((b) => b.type === 'tool_use'),
  canRetry: ({ context, event }) => errorOf(event).retryable && context.counts.retries < context.input.retries,
  rateLimitedOut: ({ event }) => errorOf(event).code === 'rate_limited',
  rateLimitWait: ({ context, event }) => {
    const error = errorOf(event);
    const cap = context.input.maxRateLimitWaits;
    return error.code === 'rate_limited' && error.retryable && (cap === undefined || context.counts.rateLimitWaits < cap);
  },
  canReroute: ({ context }) => canReroute(context),
  /** The pool denied the lease for 429s (no key left, or all backing off past the deadline): a fallback may serve. */
  deniedForRateLimits: ({ event }) => event.type === 'LEASE.DENIED' && event.error.code === 'rate_limited',
  /** The fallback asked about is not open: the turn moves there. */
  fallbackUp: ({ context }) => context.held.reroute?.open === false,
  /** The fallback asked about is open too, and another one is left to ask. */
  fallbackDownNextLeft: ({ context }) =>
    context.held.reroute?.open === true && context.held.reroute.index + 1 < (context.input.fallbacks?.length ?? 0),
  /** Every later fallback is open too: the turn waits on its own route's breaker. */
  fallbacksDown: ({ context }) => context.held.reroute?.open === true,
  toolsDone: ({ context }) => context.tools !== null && context.tools.left === 0,
  turnsLeft: ({ context }) => context.counts.turn < context.input.maxTurns,
} satisfies Record<string, Guard>;
