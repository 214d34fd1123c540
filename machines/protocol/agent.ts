/** Supervisor <-> agent: how an attempt ends and what it reports. */
import type { Message } from './conversation.js';
import type { ErrorInfo, Usage } from './data.js';

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
