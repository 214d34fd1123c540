/** The normalized conversation: messages, a model call's input and output, and the output checks a call carries. */
import type { RateLimitHint, Usage } from './data.js';

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
  /** The task's gates that run on the answer's text, by their `accept` field (`minChars`, `pattern`: src/plan/gates.ts). */
  [gate: string]: unknown;
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
  /**
   * What the provider said of this response, where it said it (OpenTelemetry's `gen_ai.response.id`
   * and `gen_ai.response.model`); `provider`: who served it, as an AI SDK model names itself
   * (`anthropic.messages`, `openai.chat`: `gen_ai.provider.name`).
   */
  response?: { id?: string; model?: string; provider?: string };
}
