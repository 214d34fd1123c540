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
  /** The plan model's sampling settings (`temperature`, `topP`, `stopSequences`): absent, the provider's defaults. */
  temperature?: number;
  topP?: number;
  stopSequences?: string[];
  key: ProviderKey;
  /** Aborted when the attempt is cancelled or passes its deadline. */
  signal: AbortSignal;
  /**
   * Structured output: the answer must be JSON this schema accepts. Sent natively (OpenAI
   * `response_format` json_schema strict, Anthropic `output_config.format`). `name` is wire-safe.
   */
  output?: { name: string; schema: Record<string, unknown> };
  /** Where the call comes from; adapters may pass it on as request metadata. */
  meta: { taskId: string; attempt: number; turn: number };
  /**
   * Called at most once, when a successful (2xx) response starts: for a streamed response when
   * its first event arrives (Anthropic `message_start`, OpenAI's first chunk), otherwise when
   * its headers arrive. Never for an error response or a connection that fails before that.
   * The call may still fail afterwards (a stream cut or an `error` event mid-way). What it
   * throws is caught and ignored.
   *
   * For cache-aware fan-out: once one task's response has started, the provider's cache entry
   * for the prompt prefix it wrote is readable, so tasks that share that prefix can be released.
   */
  onResponseStart?: () => void;
  /**
   * Called with each piece of the reply's text as a streamed response delivers it, in order
   * (Anthropic `text_delta`, OpenAI `delta.content`); not for tool arguments, not for a reply
   * that is not streamed. What it throws is caught and ignored. Absent: nothing is done per piece.
   */
  onText?: (text: string) => void;
}

export interface Provider {
  /** e.g. "anthropic", "openai", "sim", "scripted", "ai-sdk"; optional for a custom provider. */
  readonly type?: string;
  call(request: ProviderRequest): Promise<ModelCallOutput>;
  /** Frees connections; called by `swarm.close()`. */
  close?(): Promise<void>;
}

/**
 * The request's `onResponseStart` made safe for an adapter to call at every point a response
 * may start: it runs the callback the first time only, and swallows what the callback throws.
 *
 * @example
 * const started = responseStartNotifier(request);
 * started(); // calls request.onResponseStart once
 * started(); // does nothing
 */
export function responseStartNotifier(request: Pick<ProviderRequest, 'onResponseStart'>): () => void {
  let pending = request.onResponseStart;
  return () => {
    const callback = pending;
    if (!callback) return;
    pending = undefined;
    try {
      callback();
    } catch {
      // The callback belongs to the caller: its failure must not fail the model call.
    }
  };
}

/** The request's `onText` made safe to call with every piece (what it throws is swallowed), or undefined when nobody listens. */
export function textNotifier(request: Pick<ProviderRequest, 'onText'>): ((text: string) => void) | undefined {
  const callback = request.onText;
  if (!callback) return undefined;
  return (text) => {
    if (text === '') return;
    try {
      callback(text);
    } catch {
      // The callback belongs to the caller: its failure must not fail the model call.
    }
  };
}

/** `x-swarmstate-call`: which task, attempt and turn a request comes from (for logs, proxies and the simulator). */
export function callHeader(request: ProviderRequest): Record<string, string> {
  return { 'x-swarmstate-call': `${encodeURIComponent(request.meta.taskId)};${request.meta.attempt};${request.meta.turn}` };
}
