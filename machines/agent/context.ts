/**
 * The agent's data: what it is started with, what it keeps, what it hears, and the pure helpers
 * that read them (which actor to ask, how big the next request is, what to give back). The chart
 * is machine.ts; its actions are dispatch.ts, settle.ts and tools.ts; the next call's input and
 * the attempt's report are calls.ts.
 */
import type { AnyActorRef, EventObject } from 'xstate';
import { SUMMARY_SYSTEM, summaryMessages } from '../compaction.js';
import { JUDGE_SYSTEM, judgeMessages } from '../judge.js';
import { worstCaseUsd, type Price } from '../cost.js';
import { toErrorInfo } from '../errors.js';
import type {
  ToolBusEvent,
  CallRecord,
  ToolCallDecision,
  ToolCallInfo,
  AgentStatus,
  ContentBlock,
  LeaseEvent,
  LeaseOutcome,
  LedgerEvent,
  BreakerReply,
  BreakerVerdict,
  ErrorInfo,
  LeaseReply,
  LedgerReply,
  Message,
  ModelCallOutput,
  OutputCheckSpec,
  ToolBusReply,
  Usage,
} from '../protocol.js';
import { estimateRequestTokens, maxRequestTokens } from '../tokens.js';
import type { ModelCallEvent } from './modelCall.js';

export interface AgentInput {
  taskId: string;
  attempt: number;
  /** Provider name in the plan (the pool is `pool:<provider>`). */
  provider: string;
  /** The provider's model id (the breaker is `breaker:<provider>/<model>`). */
  model: string;
  maxTokens: number;
  priority: number;
  system?: string;
  prompt: string;
  /** Tools this task may call. */
  tools: string[];
  maxTurns: number;
  /** Retries this attempt may take: what is left of the task's retry budget. */
  retries: number;
  /** The attempt's deadline, from its start. */
  timeoutMs: number;
  backoff: { baseMs: number; maxMs: number };
  /** 429s this attempt may wait out before it fails; unset: only its deadline bounds them. */
  maxRateLimitWaits?: number;
  /** Seed of this attempt's jitter. */
  seed: number;
  /**
   * Most input tokens one request may carry: the model's context window less maxTokens, or the
   * task's maxInputTokens if smaller. A request that would exceed it is compacted first.
   */
  inputBudget?: number;
  /** The model that writes compaction summaries; without one, compaction truncates (marked). */
  compaction?: CallTarget;
  /** The plan's name of the task's model (budgets per model are kept by it). */
  modelName?: string;
  /** Price of the task's model, USD per million tokens. */
  price?: Price;
  /** The run has budgets: every priced call reserves its worst case with the ledger first. */
  budgeted?: boolean;
  /**
   * The model's fallbacks, in order: used when its route's breaker is open, or after
   * OVERLOADS_BEFORE_FALLBACK overload errors in a row on it.
   */
  fallbacks?: CallTarget[];
  /** The run has a beforeDispatch hook: every call asks it first (allow, deny or rewrite). */
  hooked?: boolean;
  /** The run has a beforeToolCall hook: every tool call asks it first (allow, deny, new arguments). */
  toolHooked?: boolean;
  /** Messages kept at the end when compacting. Default 4. */
  keepLast?: number;
  /** Estimated tokens of the tool definitions sent with every turn (they count against the budget). */
  toolTokens?: number;
  /** How deep in planning the task is: 0 for the plan's tasks, 1 for a planner's sub-tasks. */
  depth?: number;
  /** The attempt leads a cache group: its calls ask to be told when their response starts. */
  cacheLead?: boolean;
  /**
   * Estimated tokens of the prompt's prefix that its group's cache holds, where the provider's
   * input-token limit does not count cache reads: the key's input lane is charged the rest
   * (settled to what the server counted when the call ends, so a cold cache costs a debt, no more).
   */
  cachedTokens?: number;
  /** The task's output checks (structured output schema, minChars, pattern): each final answer is checked. */
  output?: OutputCheckSpec;
  /** A quality gate by a judge model: an answer that passed its checks is scored; below `threshold` it is rejected. */
  judge?: CallTarget & { prompt: string; threshold: number };
}

export interface ToolWait {
  /** tool_use ids in the order the model gave them: results go back in that order. */
  order: string[];
  results: Record<string, { content: string; isError: boolean }>;
  left: number;
}

/** The attempt's counters: each assign that moves one replaces this small object whole. */
export interface Counts {
  turn: number;
  requests: number;
  retries: number;
  /** 429s waited out in this attempt: waits, not retries (they never use the retry budget). */
  rateLimitWaits: number;
  /** Overload errors in a row on the current route. */
  overloads: number;
  /** The last request id's sequence number. */
  seq: number;
}

/** What the attempt's calls used and cost, and when the current one started. */
export interface Spend {
  usage: Usage;
  /** USD of the calls so far, each at the price of the model that served it. */
  costUsd: number;
  /** Calls whose model has no price. */
  unpricedCalls: number;
  /** Each model call so far, for the per-route numbers of the result. */
  calls: CallRecord[];
  /** When the current model call started (the system clock). */
  callStartedAt: number;
}

/** What the agent asked for or holds of other actors: all of it is given back on the way out. */
export interface Held {
  /**
   * The request now outstanding: a budget reservation, a lease request (to the pool, which hands
   * it to the route's breaker, if it has one, unless that one is closed and clean), or a question
   * to a fallback's breaker (is it open?).
   */
  pending: { kind: 'reservation' | 'lease' | 'peek'; requestId: string } | null;
  /** A budget reservation held for the current call, not yet settled. */
  reservation: string | null;
  lease: { leaseId: string; keyId: string } | null;
  /**
   * The route's breaker refused the turn (it is open): the search for a fallback whose breaker is
   * not. `index` is the fallback being asked, `open` its answer (null while awaited). Left set
   * when every later fallback was open, so the next lease request waits on the route's breaker.
   * `why`: the pool denied the turn for 429s instead (absent: the breaker is open).
   */
  reroute: { index: number; open: boolean | null; why?: string } | null;
}

/**
 * Kept to 17 top-level fields: XState's assign copies the context with Object.assign({}, ...),
 * and V8 turns such a copy with 20 or more own properties into a slow dictionary-mode object.
 * So rarely changed or related fields live in small sub-objects (counts, spend, held), which an
 * assign replaces whole: contexts stay immutable data.
 */
export interface AgentContext {
  input: AgentInput;
  messages: Message[];
  counts: Counts;
  spend: Spend;
  held: Held;
  /** When the attempt started (the system clock): its deadline is this plus input.timeoutMs. */
  startedAt: number;
  rng: number;
  /** The tool hook's decisions for this turn's calls, by call id. */
  toolDecisions: Record<string, ToolCallDecision> | null;
  /** What the dispatch hook changed for the call about to be sent (cleared once it is settled). */
  override: { target?: CallTarget; maxTokens?: number; messages?: Message[] } | null;
  /** Which route the task's turns use: 0 its model, i > 0 its i-th fallback. */
  routeIndex: number;
  tools: ToolWait | null;
  backoffMs: number;
  /** What the next model call is for: the task's next turn, a compaction summary, or the judge's score of the answer. */
  call: 'turn' | 'summary' | 'judge';
  /** A provider's context-overflow error compacts and retries once. */
  overflowRetried: boolean;
  status: AgentStatus | null;
  output?: string;
  error?: ErrorInfo;
}

/** A change to the context whose sub-objects (counts, spend, held) are given in part. */
export type Patch = Omit<Partial<AgentContext>, 'counts' | 'spend' | 'held'> & {
  counts?: Partial<Counts>;
  spend?: Partial<Spend>;
  held?: Partial<Held>;
};

/** The assign of a patch: the sub-objects it touches are copied with its changes (never changed in place). */
export function patchOf(ctx: AgentContext, patch: Patch): Partial<AgentContext> {
  const { counts, spend, held, ...rest } = patch;
  const out: Partial<AgentContext> = rest;
  if (counts) out.counts = { ...ctx.counts, ...counts };
  if (spend) out.spend = { ...ctx.spend, ...spend };
  if (held) out.held = { ...ctx.held, ...held };
  return out;
}

export type AgentEvent =
  | { type: 'CANCEL'; reason?: string }
  /** The outcome of the model call under way (modelCall.ts). */
  | ModelCallEvent
  /** The attempt's deadline passed (its group keeps the deadlines: machines/supervisor/group.machine.ts). */
  | { type: 'AGENT.TIMEOUT' }
  | BreakerReply
  | LeaseReply
  | ToolBusReply
  | LedgerReply;

/**
 * What the agent's actions are given: the part of XState's action arguments they use, so they can
 * live outside setup() (machine.ts wraps each in `assign` or `enqueueActions`).
 */
export interface ActionArgs {
  context: AgentContext;
  event: AgentEvent;
  self: AnyActorRef;
  system: { get(id: string): AnyActorRef | undefined };
  enqueue: {
    /** Give it patchOf(context, ...): a bare sub-object would replace the whole group. */
    assign(patch: Partial<AgentContext>): void;
    sendTo(to: AnyActorRef, event: EventObject): void;
  };
}

/** What an assign of the agent reads: its patch is merged into the context. */
export type PatchArgs = Pick<ActionArgs, 'context' | 'event' | 'self'>;

/** Where a call goes and what it may cost. */
export interface CallTarget {
  provider: string;
  model: string;
  maxTokens: number;
  /** The plan's name of the model. */
  modelName?: string;
  price?: Price;
}

/** The provider and model of the call the agent is making now (a summary may use another model). */
export function targetOf(ctx: AgentContext): CallTarget {
  const base = ctx.override?.target ?? routedOf(ctx);
  const maxTokens = ctx.override?.maxTokens;
  return maxTokens === undefined ? base : { ...base, maxTokens };
}

/** The target before any hook's rewrite: the summary model, a fallback, or the task's model. */
export function routedOf(ctx: AgentContext): CallTarget {
  if (ctx.call === 'summary' && ctx.input.compaction) return ctx.input.compaction;
  if (ctx.call === 'judge' && ctx.input.judge) return ctx.input.judge;
  return ctx.routeIndex > 0 ? ctx.input.fallbacks![ctx.routeIndex - 1]! : ctx.input;
}

/** Overload errors in a row on one route before the task moves to its next fallback. */
export const OVERLOADS_BEFORE_FALLBACK = 2;

/** The route `<provider>/<model>` of a target. */
export const routeOf = (t: CallTarget) => `${t.provider}/${t.model}`;
export const poolOf = (system: { get(id: string): AnyActorRef | undefined }, ctx: AgentContext) => system.get(`pool:${targetOf(ctx).provider}`);
export const DEFAULT_KEEP_LAST = 4;
export const keepLastOf = (ctx: AgentContext) => ctx.input.keepLast ?? DEFAULT_KEEP_LAST;
export const requestIdOf = (ctx: AgentContext, seq: number) => `${ctx.input.taskId}#${ctx.input.attempt}.${seq}`;

/** The judge's messages: its criteria and the answer to score. */
export const judgeMessagesOf = (ctx: AgentContext) => judgeMessages(ctx.input.judge?.prompt ?? '', ctx.output ?? '');

/** Estimated input tokens of the next request, as the lease and the budget see it. */
export const requestTokensOf = (ctx: AgentContext) =>
  ctx.call === 'judge'
    ? estimateRequestTokens(JUDGE_SYSTEM, ctx.override?.messages ?? judgeMessagesOf(ctx))
    : ctx.override?.messages
    ? estimateRequestTokens(ctx.call === 'summary' ? SUMMARY_SYSTEM : ctx.input.system, ctx.override.messages) + (ctx.call === 'summary' ? 0 : (ctx.input.toolTokens ?? 0))
    : ctx.call === 'summary'
      ? estimateRequestTokens(SUMMARY_SYSTEM, summaryMessages(ctx.messages, keepLastOf(ctx)))
      : estimateRequestTokens(ctx.input.system, ctx.messages) + (ctx.input.toolTokens ?? 0);

/**
 * What the next request charges its key's input-token lane: the estimate, less the prefix its
 * group's cache holds for a turn of the task on its own route (a summary, a judge or a fallback
 * sends another prefix).
 */
export const leaseTokensOf = (ctx: AgentContext) => {
  const tokens = requestTokensOf(ctx);
  const cached = ctx.input.cachedTokens;
  if (cached === undefined || ctx.call !== 'turn' || ctx.routeIndex !== 0 || ctx.override?.target) return tokens;
  return Math.max(0, tokens - cached);
};

export const errorOf = (event: unknown) => toErrorInfo((event as { error?: unknown }).error);
export const outputOf = (event: unknown) => (event as { output: ModelCallOutput }).output;

/**
 * The worst case of the call the agent is making now, at its model's price: what it reserves,
 * and what a call that may have reached the server is charged when it fails (its real count is
 * never known). Undefined for an unpriced model.
 */
export function worstCaseOf(ctx: AgentContext): number | undefined {
  const target = targetOf(ctx);
  return target.price ? reservationUsd(target.price, requestTokenBoundOf(ctx), target.maxTokens) : undefined;
}

/**
 * What a call reserves: its worst case, with the input estimate (about 4 characters a token)
 * given a quarter more room and a little fixed slack, since the server's count may differ.
 */
export function reservationUsd(price: Price, inputTokenBound: number, maxTokens: number): number {
  return worstCaseUsd(price, inputTokenBound, maxTokens);
}

/**
 * The most input tokens the next call can be billed for (see `maxRequestTokens`). Tool
 * definitions: `toolTokens` is their UTF-8 size / 4, so 4x it bounds them.
 */
export const requestTokenBoundOf = (ctx: AgentContext) => {
  if (ctx.call === 'judge') return maxRequestTokens(JUDGE_SYSTEM, ctx.override?.messages ?? judgeMessagesOf(ctx));
  const tools = ctx.call === 'summary' ? 0 : 4 * (ctx.input.toolTokens ?? 0);
  const system = ctx.call === 'summary' ? SUMMARY_SYSTEM : ctx.input.system;
  if (ctx.override?.messages) return maxRequestTokens(system, ctx.override.messages) + tools;
  return ctx.call === 'summary' ? maxRequestTokens(SUMMARY_SYSTEM, summaryMessages(ctx.messages, keepLastOf(ctx))) : maxRequestTokens(system, ctx.messages) + tools;
};

/**
 * A lease going back to its pool with what the call says of its route: the pool passes the verdict
 * on to the route's breaker when the route has one and the verdict can change it, so the agent
 * never needs to know whether it has one. Every release the agent sends is built here.
 */
export function releaseOf(lease: { leaseId: string; keyId: string }, outcome: LeaseOutcome, verdict: BreakerVerdict): Extract<LeaseEvent, { type: 'LEASE.RELEASE' }> {
  return { type: 'LEASE.RELEASE', leaseId: lease.leaseId, keyId: lease.keyId, outcome, verdict };
}

/**
 * What an agent must give back on its way out, as messages to actors by system id: the lease
 * request it still waits for (the pool withdraws it from the breaker if it is there), the lease
 * (with a neutral verdict for the breaker) and the reservation it holds. Pure, so the supervisor
 * can hand them back for an agent that crashed and never reached a final state.
 * A call that was sent (a lease is held) may have been billed: its reservation is settled at the
 * worst case it held, not released; its key keeps the request slot.
 */
export function handBack(ctx: AgentContext): { to: string; event: LeaseEvent | LedgerEvent | ToolBusEvent }[] {
  const out: { to: string; event: LeaseEvent | LedgerEvent | ToolBusEvent }[] = [];
  // Tool calls still out: the bus stops those nobody else waits for (a slow tool is not left running).
  const waiting = ctx.tools ? ctx.tools.order.filter((id) => !(id in ctx.tools!.results)) : [];
  if (waiting.length > 0) out.push({ to: 'toolBus', event: { type: 'TOOL.CANCEL', taskId: ctx.input.taskId, callIds: waiting } });
  const { lease, pending, reservation } = ctx.held;
  const target = targetOf(ctx);
  const pool = `pool:${target.provider}`;
  // The pool withdraws a request it handed to the breaker (held there, or its half-open probe).
  if (pending?.kind === 'lease') out.push({ to: pool, event: { type: 'LEASE.CANCEL', requestId: pending.requestId } });
  if (pending?.kind === 'reservation') out.push({ to: 'ledger', event: { type: 'LEDGER.RELEASE', reservationId: pending.requestId } });
  if (reservation) {
    out.push({
      to: 'ledger',
      // NaN: the ledger counts the whole reservation as spent.
      event: lease ? { type: 'LEDGER.SETTLE', reservationId: reservation, actualUsd: Number.NaN } : { type: 'LEDGER.RELEASE', reservationId: reservation },
    });
  }
  // A call cut short says nothing of the route, but frees the breaker's probe slot if it was the probe.
  if (lease) out.push({ to: pool, event: releaseOf(lease, { kind: 'error' }, 'neutral') });
  return out;
}

/** The tool calls of the model's last reply, one per tool_use id (a repeated id gets one call). */
export function toolCallsOf(ctx: AgentContext): Extract<ContentBlock, { type: 'tool_use' }>[] {
  const last = ctx.messages[ctx.messages.length - 1]!;
  const seen = new Set<string>();
  return last.content.filter((b): b is Extract<ContentBlock, { type: 'tool_use' }> => b.type === 'tool_use' && !seen.has(b.id) && seen.add(b.id) !== undefined);
}

/** What the tool hook sees: the calls the task may make (others are denied without asking). */
export function toolCallInfosOf(ctx: AgentContext): ToolCallInfo[] {
  const allowed = new Set(ctx.input.tools);
  return toolCallsOf(ctx)
    .filter((c) => allowed.has(c.name))
    .map((c) => ({ taskId: ctx.input.taskId, attempt: ctx.input.attempt, turn: ctx.counts.turn, callId: c.id, tool: c.name, args: c.input, depth: ctx.input.depth ?? 0 }));
}
