/**
 * The messages the swarmstate actors exchange, and the plain data they carry.
 *
 * Everything here is serializable data: no functions, no secrets. A key is always named by its
 * id (provider name and a short fingerprint), never by its value. `src/` translates between these
 * shapes and the wire; the machines only ever see these.
 */
import type { AnyActorRef } from 'xstate';

// ---------------------------------------------------------------------------------------------
// Shared data
// ---------------------------------------------------------------------------------------------

/** Token usage of one model call, normalized across providers. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheWriteTokens: number;
  cacheReadTokens: number;
}

export const ZERO_USAGE: Usage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheWriteTokens: 0,
  cacheReadTokens: 0,
});

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
  };
}

/**
 * Error classes (see docs/architecture.md). Each model-call outcome moves exactly one machine:
 * `rate_limited` the key, `auth` the key (revoked), server-side classes the route's breaker.
 */
export type ErrorCode =
  | 'rate_limited'
  | 'overloaded'
  | 'server_error'
  | 'timeout'
  | 'network'
  | 'auth'
  | 'bad_request'
  | 'context_overflow'
  | 'budget_exceeded'
  | 'spend_cap'
  | 'no_keys'
  | 'max_turns'
  | 'task_timeout'
  | 'tool_error'
  | 'cancelled'
  | 'skipped'
  | 'dispatch_denied'
  | 'invalid_plan'
  /** The answer is not JSON its task's output.schema accepts (retried with the problems). */
  | 'invalid_output'
  /** The answer failed a quality gate of its task's `accept` (retried with the reason). */
  | 'rejected_output'
  | 'internal';

/** A serializable description of an error: what went wrong and the facts, never a secret. */
export interface ErrorInfo {
  code: ErrorCode;
  message: string;
  /** True when trying again (after a wait, or on another key) may succeed. */
  retryable: boolean;
  /** The server's Retry-After, in ms, when it sent one. */
  retryAfterMs?: number;
  status?: number;
  provider?: string;
  model?: string;
  keyId?: string;
  /** Rate-limit headers that came with the error response, for the key. */
  rateLimit?: RateLimitHint;
  /** `invalid_output` / `rejected_output`: what was wrong with the answer (the next attempt's prompt says it). */
  problems?: string[];
}

/** Rate-limit facts read from response headers; each field optional. Durations are in ms. */
export interface RateLimitHint {
  /** The per-minute limits the server states (`*-limit` headers). */
  requestsLimit?: number;
  inputTokensLimit?: number;
  outputTokensLimit?: number;
  requestsRemaining?: number;
  requestsResetMs?: number;
  inputTokensRemaining?: number;
  inputTokensResetMs?: number;
  outputTokensRemaining?: number;
  outputTokensResetMs?: number;
}

/**
 * Per-key limits. Absent fields mean "no limit known". Each per-minute limit is a token bucket
 * that refills continuously at that rate and holds at most its `burst`.
 */
export interface KeyLimits {
  /** Requests per minute. */
  rpm?: number;
  /** Input tokens per minute. */
  itpm?: number;
  /** Output tokens per minute. */
  otpm?: number;
  /** Bucket capacities; each defaults to one second of its rate (at least 1), so calls go out evenly. */
  burst?: { rpm?: number; itpm?: number; otpm?: number };
  /** Leases out at once. */
  concurrency?: number;
}

// ---------------------------------------------------------------------------------------------
// Normalized conversation
// ---------------------------------------------------------------------------------------------

export type ContentBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'tool_result'; toolUseId: string; content: string; isError?: boolean };

export interface Message {
  role: 'user' | 'assistant';
  content: ContentBlock[];
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'refusal' | 'other';

/** What an agent asks of the `callModel` actor for one turn. */
export interface ModelCallInput {
  taskId: string;
  attempt: number;
  turn: number;
  provider: string;
  model: string;
  keyId: string;
  leaseId: string;
  system?: string;
  messages: Message[];
  tools: string[];
  maxTokens: number;
  /** The plan's name of the model the call is on (its sampling settings are looked up by it). */
  modelName?: string;
  /**
   * This call leads a cache group (cache-aware fan-out): when its response starts, `src/` tells
   * the supervisor (`CACHE.WARM`), which then releases the tasks held back behind it.
   */
  cacheLead?: boolean;
  /** The task's output checks: a schema is also sent natively; a final answer comes back with a `verdict`. */
  output?: OutputCheckSpec;
  /** A compaction summary, not a turn of the task (its text is not the task's: no `task:delta`). */
  summary?: true;
}

/** What a task's answer must meet (src/plan/structured.ts checks it, src/swarm.ts on each final answer). */
export interface OutputCheckSpec {
  /** JSON Schema of a structured output. */
  schema?: Record<string, unknown>;
  minChars?: number;
  pattern?: string;
}

/** The checks' decision on a final answer: the text to keep (a structured one as compact JSON), or why not. */
export type OutputVerdict =
  | { ok: true; text: string }
  | { ok: false; code: 'invalid_output' | 'rejected_output'; problems: string[] };

/** Sent to the supervisor (systemId `supervisor`) when a cache leader's response has started. */
export type CacheWarmEvent = { type: 'CACHE.WARM'; taskId: string; attempt: number };

/** What the `callModel` actor resolves with. It rejects with an ErrorInfo-shaped error. */
export interface ModelCallOutput {
  content: ContentBlock[];
  stopReason: StopReason;
  usage: Usage;
  rateLimit?: RateLimitHint;
  /** When the request really left (the actor system's clock), when that was later than the call began (a queued distributed call). */
  sentAt?: number;
  /** A final answer of a call with `output` checks: what they decided. */
  verdict?: OutputVerdict;
}

// ---------------------------------------------------------------------------------------------
// Lease protocol: agent <-> pool (systemId `pool:<provider>`) <-> key (child of the pool)
// ---------------------------------------------------------------------------------------------

export interface LeaseRequest {
  requestId: string;
  /** Higher first; ties FIFO. */
  priority: number;
  /** Estimated input tokens of the call (charged to itpm at grant, settled at release). */
  inputTokens: number;
  /** maxTokens of the call (charged to otpm at grant, settled at release). */
  outputTokens: number;
  /**
   * The requesting attempt's deadline (system clock, ms). When every live key is backing off past
   * it, the pool denies at once (`rate_limited`) instead of letting the attempt wait to its end.
   */
  deadline?: number;
}

/** How a lease ended: tells the key what happened on it. */
export type LeaseOutcome =
  /**
   * `sentAt`: when the request really left, if later than the grant (a distributed run's call
   * waits in a queue for a worker): the key takes back the refill it counted in between.
   */
  | { kind: 'ok'; usage: Usage; rateLimit?: RateLimitHint; sentAt?: number }
  | { kind: 'rate_limited'; retryAfterMs?: number; rateLimit?: RateLimitHint }
  | { kind: 'auth' }
  | { kind: 'error'; usage?: Usage; rateLimit?: RateLimitHint }
  /** The lease was not used for a request (cancelled before the call): its request slot is refunded. */
  | { kind: 'unused' };

export type LeaseEvent =
  | ({ type: 'LEASE.REQUEST'; replyTo: AnyActorRef } & LeaseRequest)
  | { type: 'LEASE.CANCEL'; requestId: string }
  | { type: 'LEASE.RELEASE'; leaseId: string; keyId: string; outcome: LeaseOutcome };

export type LeaseReply =
  | { type: 'LEASE.GRANTED'; requestId: string; leaseId: string; keyId: string }
  | { type: 'LEASE.DENIED'; requestId: string; error: ErrorInfo };

// ---------------------------------------------------------------------------------------------
// Breaker protocol: agent <-> breaker (systemId `breaker:<provider>/<model>`)
// ---------------------------------------------------------------------------------------------

/** `neutral`: the call says nothing about the route's health (4xx, 429, cancelled). */
export type BreakerVerdict = 'success' | 'failure' | 'neutral';

export type BreakerEvent =
  | {
      type: 'BREAKER.ADMIT';
      requestId: string;
      replyTo: AnyActorRef;
      /** Sent on to `to` when admitted, instead of BREAKER.ADMITTED: a lease request passes the breaker on its way to the pool. */
      then?: { to: AnyActorRef; event: { type: string } };
      /** Refuse (BREAKER.REFUSED) rather than hold the request while open: the caller has somewhere else to go. */
      unlessOpen?: boolean;
    }
  | { type: 'BREAKER.WITHDRAW'; requestId: string }
  | { type: 'BREAKER.REPORT'; requestId: string; verdict: BreakerVerdict }
  /** Is the route open? Answered at once with BREAKER.STATUS; admits nothing. */
  | { type: 'BREAKER.PEEK'; requestId: string; replyTo: AnyActorRef };

export type BreakerReply =
  | { type: 'BREAKER.ADMITTED'; requestId: string; probe: boolean }
  | { type: 'BREAKER.REFUSED'; requestId: string }
  | { type: 'BREAKER.STATUS'; requestId: string; open: boolean };

// ---------------------------------------------------------------------------------------------
// Tool bus protocol: agent <-> toolBus (systemId `toolBus`)
// ---------------------------------------------------------------------------------------------

export type ToolBusEvent =
  | {
      type: 'TOOL.CALL';
      callId: string;
      taskId: string;
      name: string;
      args: unknown;
      replyTo: AnyActorRef;
    }
  /** The agent that made these calls ended before their results came: it waits no more. */
  | { type: 'TOOL.CANCEL'; taskId: string; callIds: string[] };

export type ToolBusReply = { type: 'TOOL.RESULT'; callId: string; content: string; isError: boolean };

/** What the bus asks of the `executeTool` actor. It resolves with the result text, rejects on error. */
export interface ToolExecInput {
  name: string;
  args: unknown;
  /** The task whose call this is, when it is one task's alone (not shared): side effects are journaled by it. */
  taskId?: string;
}

/**
 * What the bus asks of the `executeBatch` actor: several calls of one tool that has a batch
 * handler, in one go. It resolves with one result per call, in order.
 */
export interface ToolBatchInput {
  name: string;
  calls: unknown[];
}

/** One call's result, as a batch returns it. */
export interface ToolResult {
  content: string;
  isError: boolean;
}

/** What the bus knows of each tool it serves. */
export interface BusTool {
  /** As the model calls it: `<server>.<tool>` for MCP tools, the plain name for local ones. */
  name: string;
  /** Its server (`local` for in-process tools): cache invalidation and concurrency are per server. */
  server: string;
  /** Identical concurrent calls may share one execution, and results may be cached. */
  shareable: boolean;
  /** A call to a tool that is not read-only clears its server's cache. */
  readOnly: boolean;
  /** It has a batch handler (`executeBatch`). */
  batch: boolean;
}

// ---------------------------------------------------------------------------------------------
// Ledger protocol: agent <-> ledger (systemId `ledger`)
// ---------------------------------------------------------------------------------------------

/** Which budget a reservation did not fit: the run's, the task's, or the (plan) model's. */
export type BudgetKind = 'run' | 'task' | 'model';

/**
 * Reserve the worst-case cost of a call before sending it, then settle it at its actual cost, or
 * release it when the call was never sent. Every reservation is answered at most once: exactly
 * once, unless it is released while it still waits for room.
 */
export type LedgerEvent =
  | {
      type: 'LEDGER.RESERVE';
      reservationId: string;
      taskId: string;
      /** The plan's model name (the key of `perModelUsd`), not the provider's model id. */
      model: string;
      amountUsd: number;
      replyTo: AnyActorRef;
    }
  | { type: 'LEDGER.SETTLE'; reservationId: string; actualUsd: number }
  | { type: 'LEDGER.RELEASE'; reservationId: string };

export type LedgerReply =
  | { type: 'LEDGER.RESERVED'; reservationId: string }
  /** `error.code` is `budget_exceeded` (not retryable) and the message names the budget and its numbers. */
  | { type: 'LEDGER.DENIED'; reservationId: string; error: ErrorInfo };

// ---------------------------------------------------------------------------------------------
// The dispatch contract: what a `beforeDispatch` hook sees of a model call, and what it decides
// ---------------------------------------------------------------------------------------------

/** A model call about to be sent, as a hook sees it. */
export interface DispatchInfo {
  taskId: string;
  attempt: number;
  turn: number;
  /** 'summary': a compaction summary call, not a turn of the task. 'judge': a quality gate's scoring call. */
  call: 'turn' | 'summary' | 'judge';
  /** The plan's model name (or the route when it has none). */
  model: string;
  provider: string;
  modelId: string;
  messageCount: number;
  estimatedInputTokens: number;
  maxTokens: number;
  /** The call's worst case in USD, when its model has a price. */
  estimatedCostUsd?: number;
  /** What is left of the run budget (limit less spent and reserved), when there is one. */
  budgetLeftUsd?: number;
  /** How deep the task is in planner-made sub-tasks (0: a task of the plan). */
  depth: number;
}

/** A tool call about to go to the bus, as a `beforeToolCall` hook sees it. */
export interface ToolCallInfo {
  taskId: string;
  attempt: number;
  turn: number;
  callId: string;
  tool: string;
  args: unknown;
  depth: number;
}

/** A hook's decision on one tool call: allow it, deny it (an error result), or change its arguments. */
export type ToolCallDecision = { action: 'allow' } | { action: 'deny'; reason: string } | { action: 'rewrite'; args: unknown; reason?: string };

/** Where a rewritten call goes: another model of the plan, resolved by the runtime. */
export interface DispatchTarget {
  provider: string;
  model: string;
  maxTokens: number;
  modelName?: string;
  price?: { input: number; output: number; cacheWrite?: number; cacheRead?: number };
}

/** A hook's decision, as the agent applies it. */
export type DispatchDecision =
  | { action: 'allow' }
  | { action: 'deny'; reason: string }
  | { action: 'rewrite'; target?: DispatchTarget; maxTokens?: number; messages?: Message[]; reason?: string };

// ---------------------------------------------------------------------------------------------
// Supervisor <-> agent
// ---------------------------------------------------------------------------------------------

export type AgentStatus = 'completed' | 'failed' | 'cancelled';

/** What an agent reports to its parent when it reaches a final state: its output. */
export interface AttemptReport {
  taskId: string;
  attempt: number;
  status: AgentStatus;
  output?: string;
  error?: ErrorInfo;
  usage: Usage;
  /** Model calls sent (including failed ones). */
  requests: number;
  /** Retries taken inside this attempt. */
  retries: number;
  turns: number;
  /** The conversation so far: kept on failure so nothing is lost. */
  messages: Message[];
  /** The plan's model that served the last turn, when a fallback took over. */
  servedBy?: string;
  /** USD of its calls, each at the price of the model that served it (summaries, fallbacks, rewrites included). */
  costUsd?: number;
  /** Calls whose model has no price: their cost is unknown. */
  unpricedCalls?: number;
  /** Each model call: its route, how long it took, whether it succeeded, what it cost. */
  calls?: CallRecord[];
}

export interface CallRecord {
  route: string;
  ms: number;
  ok: boolean;
  costUsd?: number;
}

// ---------------------------------------------------------------------------------------------
// Run events: what the machines report through their `report` action (src turns them into the
// public event stream). Every event is plain data.
// ---------------------------------------------------------------------------------------------

export type RunEvent =
  | {
      type: 'run:started';
      runId: string;
      tasks: number;
      /** What a report needs to read the rest of the stream: routes, prices, keys and limits. */
      models?: Record<string, { provider: string; model: string; price?: { input: number; output: number; cacheWrite?: number; cacheRead?: number } }>;
      keys?: Record<string, KeyLimits>;
      maxInFlight?: number;
      /** The plan's `budget.usd`, for views that show the spend against it. */
      budgetUsd?: number;
      /** Every task (in plan order) with its dependencies, for views that draw the DAG. */
      deps?: Record<string, string[]>;
      /** A resume or a retry: the tasks that had ended before this life, with how (they send no events of their own). */
      before?: Record<string, 'completed' | 'failed' | 'skipped'>;
      /** The run continues from its journal (a resume). */
      resumed?: boolean;
      /** A resume: tasks that had completed before (they send no events of their own). */
      alreadyCompleted?: number;
      /** A retry (`swarm.retry`): the tasks it sent back to pending (failed, skipped, cancelled, and what depends on them). */
      retried?: number;
    }
  | { type: 'task:queued'; taskId: string }
  | { type: 'task:started'; taskId: string; attempt: number; model: string; route?: string }
  | { type: 'task:retry'; taskId: string; attempt: number; retry: number; delayMs: number; error: ErrorInfo }
  /** `usage`: this attempt's. `requests`, `retries`: the task's, over all its attempts. */
  | { type: 'task:completed'; taskId: string; attempt: number; output: string; usage: Usage; requests?: number; retries?: number }
  /**
   * Opt-in (`createSwarm({ deltas: true })`), never journaled: a piece of a turn's text as it
   * streams in, in order. A call retried within the attempt (`task:retry`) streams again from its start.
   */
  | { type: 'task:delta'; taskId: string; attempt: number; turn: number; text: string }
  | { type: 'task:failed'; taskId: string; attempt: number; error: ErrorInfo; willRetry: boolean }
  | { type: 'task:skipped'; taskId: string; reason: string }
  | { type: 'task:fallback'; taskId: string; attempt: number; from: string; to: string; reason: string }
  | { type: 'dispatch:decision'; taskId: string; attempt: number; turn: number; model: string; decision: 'allow' | 'deny' | 'rewrite'; reason?: string; to?: string; maxTokens?: number; messages?: number }
  | { type: 'tool:decision'; taskId: string; attempt: number; turn: number; callId: string; tool: string; decision: 'allow' | 'deny' | 'rewrite'; reason?: string }
  | { type: 'task:compacted'; taskId: string; attempt: number; mode: 'summary' | 'truncation'; removed: number; tokensBefore: number; tokensAfter: number }
  | { type: 'task:cancelled'; taskId: string }
  /** A planner task's sub-tasks joined the run (ids as they run: `<planner>/<id>`). */
  | { type: 'task:planned'; taskId: string; attempt: number; subtasks: string[]; depth: number }
  /** A map with `dedupe` completed: of its items' outputs, `dropped` were duplicates. */
  | { type: 'task:deduped'; taskId: string; items: number; kept: number; dropped: number }
  /** A planner's output was not a valid list of sub-tasks: the attempt failed with these problems. */
  | { type: 'task:plan-rejected'; taskId: string; attempt: number; issues: string[] }
  /** A review task's verdict on the task it reviews (`revise` sends it back for one more round). */
  | { type: 'task:reviewed'; taskId: string; attempt: number; target: string; round: number; maxRounds: number; verdict: 'approve' | 'revise'; findings?: string; final: boolean }
  /** Cache-aware fan-out: this task goes first; `held` tasks sharing its prompt prefix wait for its response to start. */
  | { type: 'cache:lead'; taskId: string; group: string }
  /** The leader's response started (or it ended): the held tasks go out and read the cache. */
  | { type: 'cache:release'; taskId: string; group: string; released: number; warm: boolean }
  | { type: 'model:request'; taskId: string; attempt: number; turn: number; provider: string; model: string; keyId: string }
  /** `costUsd`: the call's cost at its model's price (absent when unpriced), charged to the plan model `modelName`. */
  | { type: 'model:response'; taskId: string; attempt: number; turn: number; provider: string; model: string; keyId: string; usage: Usage; costUsd?: number; modelName?: string }
  | { type: 'model:error'; taskId: string; attempt: number; turn: number; provider: string; model: string; keyId: string; error: ErrorInfo }
  | { type: 'tool:called'; taskId: string; name: string; shared: boolean; cached?: boolean }
  | { type: 'tool:result'; name: string; isError: boolean; durationMs?: number; timedOut?: boolean; batch?: number; cancelled?: boolean }
  | { type: 'tool:denied'; taskId: string; name: string; reason: string }
  | { type: 'key:state'; keyId: string; state: KeyState }
  | { type: 'key:backoff'; keyId: string; retryAfterMs: number }
  /**
   * The request rate a key paces at changed: `rpm` per minute (null: not paced), from the plan
   * (`stated`), the server's headers (`learned`) or a 429 (`adaptive`: cut, then raised slowly).
   */
  | { type: 'key:rate'; keyId: string; rpm: number | null; source: 'stated' | 'learned' | 'adaptive' | 'none' }
  | { type: 'key:revoked'; keyId: string }
  | { type: 'breaker:open'; route: string; cooldownMs: number; failures: number }
  | { type: 'breaker:halfOpen'; route: string }
  | { type: 'breaker:closed'; route: string }
  | {
      type: 'budget:denied';
      taskId: string;
      model: string;
      amountUsd: number;
      budget: BudgetKind;
      limitUsd: number;
      spentUsd: number;
      reservedUsd: number;
    }
  | { type: 'run:cancelled'; reason: string }
  | { type: 'run:completed'; status: RunStatus };

export type KeyState = 'ready' | 'saturated' | 'backoff' | 'revoked';
export type RunStatus = 'completed' | 'partial' | 'failed' | 'cancelled' | 'budget_exceeded';
export type TaskStatus = 'pending' | 'queued' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled';
