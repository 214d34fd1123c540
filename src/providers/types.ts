/**
 * The provider contract: an adapter from one normalized request to one normalized response.
 * Anthropic, OpenAI-compatible and simulated providers all implement it; the machines never see
 * a wire format.
 */
import type { Message, ModelCallOutput } from '../../machines/protocol.js';

export type { ContentBlock, Message, ModelCallOutput, RateLimitHint, StopReason, Usage } from '../../machines/protocol.js';

/** A tool as offered to a model. */
export interface ToolSpec {
  name: string;
  description?: string;
  /** JSON Schema of the tool's arguments. */
  inputSchema: Record<string, unknown>;
}

/** An API key as a provider adapter receives it: the secret plus the id used everywhere else. */
export interface ProviderKey {
  /** `<provider>:<fingerprint>`: safe to log. */
  readonly id: string;
  /** The secret. Adapters put it in a header and nowhere else. */
  readonly secret: string;
}

export interface ProviderRequest {
  /** The plan's provider name (for error messages). */
  provider: string;
  /** The provider's model id. */
  model: string;
  system?: string;
  messages: Message[];
  tools: ToolSpec[];
  maxTokens: number;
  key: ProviderKey;
  /** Aborted when the attempt is cancelled or passes its deadline. */
  signal: AbortSignal;
  /** Where the call comes from; adapters may pass it on as request metadata. */
  meta: { taskId: string; attempt: number; turn: number };
}

export interface Provider {
  /** e.g. "anthropic", "openai", "sim", "scripted". */
  readonly type: string;
  call(request: ProviderRequest): Promise<ModelCallOutput>;
  /** Frees connections; called by `swarm.close()`. */
  close?(): Promise<void>;
}
