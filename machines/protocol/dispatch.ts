/** The dispatch contract: what a `beforeDispatch` (or tool-call) hook sees of a call, and what it decides. */
import type { Message } from './conversation.js';

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
