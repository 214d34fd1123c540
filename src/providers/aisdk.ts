/**
 * `type: "ai-sdk"`: any Vercel AI SDK language model (the LanguageModelV3 spec of
 * `@ai-sdk/provider`, and V2 results) as a provider, so Google, Mistral, Bedrock, Ollama and
 * the rest work without an adapter of ours.
 *
 * Only the spec's shape is used (declared below, structurally): nothing of `ai` or
 * `@ai-sdk/provider` is imported, so a swarm that uses no AI SDK model installs none of it, and
 * any spec-conforming model works whatever its package version.
 *
 * - The request: system -> a system message; tool results -> `tool` messages (with the tool's
 *   name, looked up from the assistant's call); tools -> function tools; maxTokens ->
 *   maxOutputTokens; `output.schema` -> responseFormat json. One `doGenerate` per call: the
 *   model does no retry of its own there (retries are `generateText`'s), so ours stay in charge.
 * - Usage: the spec's input total includes cache reads and writes; we report the same disjoint
 *   split as the Anthropic adapter (inputTokens = not cached), so prices apply once each.
 * - Errors: an `APICallError` (status, headers, body) goes through the same classifier as our
 *   own HTTP adapters (429 + Retry-After -> rate_limited with retryAfterMs, 529 overloaded,
 *   401/403 auth, context-length 400 -> context_overflow, 5xx server_error); one without a
 *   status (fetch failed) is read from its cause chain (network, timeout); the call's abort is
 *   `cancelled`. The key's secret is scrubbed from every message.
 */
import type { ContentBlock, Message, ModelCallOutput, StopReason, Usage } from '../../machines/protocol.js';
import { classifyHttpError, classifyTransportError, malformedResponse, scrubbed, toolInputOf, type CallFacts } from './classify.js';
import { RETRIED_WITH_BACKOFF } from '../../machines/errors.js';
import { ProviderError, thrownMessage } from './errors.js';
import { rateLimitOf } from './ratelimit.js';
import { shownValue, tokenCountProblem } from './replyCheck.js';
import { callHeader, responseStartNotifier, type Provider, type ProviderKey, type ProviderRequest } from './types.js';

/** The call options of the spec that the adapter sends (a subset of LanguageModelV3CallOptions). */
export interface AiSdkCallOptions {
  prompt: AiSdkMessage[];
  maxOutputTokens?: number;
  tools?: { type: 'function'; name: string; description?: string; inputSchema: Record<string, unknown> }[];
  responseFormat?: { type: 'json'; schema?: Record<string, unknown>; name?: string };
  abortSignal?: AbortSignal;
  headers?: Record<string, string | undefined>;
}

export type AiSdkMessage =
  | { role: 'system'; content: string; providerOptions?: { anthropic?: { cacheControl: { type: 'ephemeral' } } } }
  | { role: 'user'; content: { type: 'text'; text: string }[] }
  | {
      role: 'assistant';
      content: ({ type: 'text'; text: string } | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown })[];
    }
  | {
      role: 'tool';
      content: { type: 'tool-result'; toolCallId: string; toolName: string; output: { type: 'text' | 'error-text'; value: string } }[];
    };

/** What the adapter reads of a result (V3; V2's numbers and string finish reason are read too). */
export interface AiSdkGenerateResult {
  content: ReadonlyArray<{ type: string; text?: string; toolCallId?: string; toolName?: string; input?: unknown }>;
  finishReason: string | { unified: string; raw?: string | undefined };
  usage: AiSdkUsage;
  providerMetadata?: Record<string, Record<string, unknown> | undefined>;
  response?: { headers?: Record<string, string | undefined> };
}

type Count = number | undefined;
type AiSdkUsage =
  | { inputTokens: { total: Count; noCache?: Count; cacheRead?: Count; cacheWrite?: Count }; outputTokens: { total: Count } }
  | { inputTokens: Count; outputTokens: Count; cachedInputTokens?: Count };

/** A language model of the AI SDK spec (e.g. `anthropic('claude-…')`, `google('gemini-…')`). */
export interface AiSdkLanguageModel {
  readonly specificationVersion: string;
  readonly provider: string;
  readonly modelId: string;
  // The spec types its argument more widely than we send: a method keeps that assignable.
  doGenerate(options: AiSdkCallOptions): PromiseLike<AiSdkGenerateResult>;
}

/**
 * Where the adapter gets the model of a call:
 * - one model, used for every model id of the plan that names this provider;
 * - an AI SDK provider (`createOpenAICompatible(…)`, `google`): `languageModel(modelId)`;
 * - a function of the model id and the plan's key (its secret, for providers built per key).
 */
export type AiSdkModelSource =
  | AiSdkLanguageModel
  | { languageModel(modelId: string): AiSdkLanguageModel }
  | ((modelId: string, key: ProviderKey) => AiSdkLanguageModel);

export interface AiSdkProviderOptions {
  /** The clock of rate-limit resets in response headers. Default Date.now. */
  now?: () => number;
  /**
   * Mark the system prompt as a prompt-cache breakpoint for providers that take one
   * (`providerOptions.anthropic.cacheControl`; others ignore it). Default true.
   */
  cache?: boolean;
}

/** True for something createAiSdkProvider accepts (and not one of our providers). */
export function isAiSdkModelSource(value: unknown): value is AiSdkModelSource {
  if (typeof value === 'function') return true;
  if (!value || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return typeof v.doGenerate === 'function' || typeof v.languageModel === 'function';
}

/**
 * A provider over an AI SDK model.
 *
 * @example
 * import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
 * const ollama = createOpenAICompatible({ name: 'ollama', baseURL: 'http://localhost:11434/v1' });
 * createSwarm({ providers: { local: createAiSdkProvider(ollama) } }); // plan: { "local": { "type": "ai-sdk" } }
 */
export function createAiSdkProvider(source: AiSdkModelSource, options: AiSdkProviderOptions = {}): Provider {
  const now = options.now ?? Date.now;
  const models = new Map<string, AiSdkLanguageModel>();
  const modelFor = (request: ProviderRequest): AiSdkLanguageModel => {
    if (typeof source === 'object' && 'doGenerate' in source) return source;
    const cacheKey = `${request.model}\u0000${request.key.id}`;
    let model = models.get(cacheKey);
    if (!model) {
      model = typeof source === 'function' ? source(request.model, request.key) : source.languageModel(request.model);
      models.set(cacheKey, model);
    }
    return model;
  };
  return {
    type: 'ai-sdk',
    async call(request) {
      const facts: CallFacts = { provider: request.provider, model: request.model, keyId: request.key.id };
      let result: AiSdkGenerateResult;
      try {
        result = await modelFor(request).doGenerate(callOptionsOf(request, options.cache ?? true));
      } catch (error) {
        throw scrubbed(errorOf(error, facts, request.signal, now()), request.key.secret);
      }
      try {
        const output = outputOf(result, request, facts, now());
        responseStartNotifier(request)();
        return output;
      } catch (error) {
        throw scrubbed(error instanceof ProviderError ? error : classifyTransportError(error, facts), request.key.secret);
      }
    },
  };
}

/** Our request -> the spec's call options. */
export function callOptionsOf(request: ProviderRequest, cache = true): AiSdkCallOptions {
  const prompt: AiSdkMessage[] = [];
  if (request.system) {
    // Tools and system come first in Anthropic's prefix: one breakpoint here caches both.
    prompt.push({ role: 'system', content: request.system, ...(cache ? { providerOptions: { anthropic: { cacheControl: { type: 'ephemeral' } } } } : {}) });
  }
  const toolNames = new Map<string, string>();
  for (const message of request.messages) prompt.push(...messagesOf(message, toolNames));
  const options: AiSdkCallOptions = {
    prompt,
    maxOutputTokens: request.maxTokens,
    abortSignal: request.signal,
    headers: callHeader(request),
  };
  if (request.tools.length > 0) {
    options.tools = request.tools.map((t) => ({
      type: 'function' as const,
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      inputSchema: t.inputSchema,
    }));
  }
  if (request.output) options.responseFormat = { type: 'json', schema: request.output.schema, name: request.output.name };
  return options;
}

/** One of our messages -> the spec's: a user turn's tool results become a `tool` message before its text. */
function messagesOf(message: Message, toolNames: Map<string, string>): AiSdkMessage[] {
  if (message.role === 'assistant') {
    const content = message.content.flatMap((block): Extract<AiSdkMessage, { role: 'assistant' }>['content'] => {
      if (block.type === 'text') return block.text === '' ? [] : [{ type: 'text', text: block.text }];
      if (block.type === 'tool_use') {
        toolNames.set(block.id, block.name);
        return [{ type: 'tool-call', toolCallId: block.id, toolName: block.name, input: block.input }];
      }
      return [];
    });
    return [{ role: 'assistant', content }];
  }
  const out: AiSdkMessage[] = [];
  const results = message.content.filter((b): b is Extract<ContentBlock, { type: 'tool_result' }> => b.type === 'tool_result');
  if (results.length > 0) {
    out.push({
      role: 'tool',
      content: results.map((r) => ({
        type: 'tool-result' as const,
        toolCallId: r.toolUseId,
        toolName: toolNames.get(r.toolUseId) ?? 'unknown',
        output: { type: r.isError ? ('error-text' as const) : ('text' as const), value: r.content },
      })),
    });
  }
  const texts = message.content.flatMap((b) => (b.type === 'text' ? [{ type: 'text' as const, text: b.text }] : []));
  if (texts.length > 0) out.push({ role: 'user', content: texts });
  return out;
}

const FINISH: Record<string, StopReason> = {
  stop: 'end_turn',
  length: 'max_tokens',
  'tool-calls': 'tool_use',
  'content-filter': 'refusal',
};

/** The spec's result -> ours. A result that is not one (no content array, a part of the wrong shape, a count that is not a count) is a malformed response. */
export function outputOf(result: AiSdkGenerateResult, request: ProviderRequest, facts: CallFacts, now: number): ModelCallOutput {
  const fail = (what: string) => malformedResponse(facts, what);
  const raw: unknown = result;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw fail(`the model's result is ${shownValue(raw)}, not an object`);
  if (!Array.isArray(result.content)) throw fail(`the model's result has no content array (content is ${shownValue(result.content)})`);
  const finish = typeof result.finishReason === 'string' ? result.finishReason : result.finishReason?.unified;
  const cut = finish === 'length';
  const content: ContentBlock[] = [];
  result.content.forEach((part: unknown, i) => {
    if (part === null || typeof part !== 'object') throw fail(`content[${i}] is ${shownValue(part)}, not a part`);
    const p = part as AiSdkGenerateResult['content'][number];
    if (p.type === 'text') {
      if (typeof p.text !== 'string') throw fail(`content[${i}].text is ${shownValue(p.text)}, not a string`);
      if (p.text !== '') content.push({ type: 'text', text: p.text });
    }
    if (p.type === 'tool-call' && typeof p.toolName === 'string') {
      // The spec sends the input as JSON text; a provider that hands over an object is taken as it is.
      const input = typeof p.input === 'string' ? toolInputOf(p.input, p.toolName, cut, facts) : (p.input ?? {});
      if (input === undefined) return;
      content.push({ type: 'tool_use', id: p.toolCallId ?? `call_${request.meta.turn}_${content.length}`, name: p.toolName, input });
    }
  });
  const hasToolCall = content.some((b) => b.type === 'tool_use');
  // A "tool-calls" finish whose calls were all cut off by the output limit ends the turn.
  const stopReason: StopReason = hasToolCall ? 'tool_use' : finish === 'tool-calls' ? 'end_turn' : (FINISH[finish ?? ''] ?? 'other');
  const output: ModelCallOutput = { content, stopReason, usage: usageOf(result, facts) };
  const headers = result.response?.headers;
  if (headers) {
    const hint = rateLimitOf(headers, now);
    if (hint) output.rateLimit = hint;
  }
  return output;
}

/**
 * One count of the spec's usage: absent (undefined or null: the provider did not say) is 0;
 * anything else must be a token count (replyCheck.ts), or the reply is malformed.
 */
function countOf(value: unknown, path: string, facts: CallFacts): number {
  if (value === undefined || value === null) return 0;
  const problem = tokenCountProblem(value, path);
  if (problem) throw malformedResponse(facts, problem);
  return value as number;
}

/** The spec's usage (V3 detailed, V2 flat, cache figures in providerMetadata) -> our disjoint split. */
export function usageOf(result: Pick<AiSdkGenerateResult, 'usage' | 'providerMetadata'>, facts: CallFacts): Usage {
  const u = result.usage as unknown;
  const n = (value: unknown, path: string) => countOf(value, `usage.${path}`, facts);
  let total: number;
  let cacheRead: number;
  let cacheWrite: number;
  let outputTokens: number;
  if (u && typeof u === 'object' && typeof (u as { inputTokens?: unknown }).inputTokens === 'object' && (u as { inputTokens?: unknown }).inputTokens !== null) {
    const v3 = u as Extract<AiSdkUsage, { inputTokens: object }>;
    cacheRead = n(v3.inputTokens.cacheRead, 'inputTokens.cacheRead');
    cacheWrite = n(v3.inputTokens.cacheWrite, 'inputTokens.cacheWrite');
    total = v3.inputTokens.total !== undefined && v3.inputTokens.total !== null ? n(v3.inputTokens.total, 'inputTokens.total') : n(v3.inputTokens.noCache, 'inputTokens.noCache') + cacheRead + cacheWrite;
    outputTokens = n(v3.outputTokens?.total, 'outputTokens.total');
    // The total includes the cache counts: more of them than of it is not a count of anything.
    if (cacheRead + cacheWrite > total) throw malformedResponse(facts, `usage.inputTokens: cache reads (${cacheRead}) and writes (${cacheWrite}) pass the total (${total})`);
  } else {
    const v2 = (u ?? {}) as Extract<AiSdkUsage, { inputTokens: Count }>;
    total = n(v2.inputTokens, 'inputTokens');
    cacheRead = n(v2.cachedInputTokens, 'cachedInputTokens');
    // V2 Anthropic models report cache writes only in their provider metadata.
    const anthropic = result.providerMetadata?.anthropic;
    cacheWrite = countOf(anthropic?.cacheCreationInputTokens, 'providerMetadata.anthropic.cacheCreationInputTokens', facts);
    outputTokens = n(v2.outputTokens, 'outputTokens');
  }
  return {
    inputTokens: Math.max(0, total - cacheRead - cacheWrite),
    outputTokens,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
  };
}

/** What a model threw -> ProviderError, with the facts of the call. */
export function errorOf(error: unknown, facts: CallFacts, signal: AbortSignal, now: number): ProviderError {
  if (error instanceof ProviderError) return error;
  if (signal.aborted) return classifyTransportError(error, { ...facts, signal });
  const api = apiCallErrorOf(error);
  if (api?.statusCode !== undefined) {
    return classifyHttpError({
      ...facts,
      status: api.statusCode,
      body: api.responseBody ?? api.message,
      ...(api.responseHeaders ? { headers: api.responseHeaders } : {}),
      ...(api.url !== undefined ? { url: api.url } : {}),
      now,
    });
  }
  const found = classifyTransportError(error, facts);
  if (found.code !== 'internal') return found;
  // Some providers throw a plain error for an overlong prompt (no status): still not retried as is.
  const message = thrownMessage(error);
  if (/prompt is too long|context_length_exceeded|maximum context length|context window|context limit/i.test(message)) {
    return classifyHttpError({ ...facts, status: 400, body: message, now });
  }
  // An APICallError without a status that the SDK calls retryable is a failed connection.
  if (api?.isRetryable) return new ProviderError('network', `${facts.provider}/${facts.model}, key ${facts.keyId}: ${message}: ${RETRIED_WITH_BACKOFF}.`, facts);
  return found;
}

interface ApiCallErrorShape {
  message: string;
  statusCode?: number;
  responseHeaders?: Record<string, string>;
  responseBody?: string;
  isRetryable?: boolean;
  url?: string;
}

/** The AI SDK's APICallError, read by its shape (its class is in a package we do not load). */
function apiCallErrorOf(error: unknown): ApiCallErrorShape | undefined {
  if (!error || typeof error !== 'object') return undefined;
  const e = error as Record<string, unknown>;
  if (e.name !== 'AI_APICallError' && !('requestBodyValues' in e && 'url' in e)) return undefined;
  return {
    message: typeof e.message === 'string' ? e.message : 'API call failed',
    ...(typeof e.statusCode === 'number' ? { statusCode: e.statusCode } : {}),
    ...(e.responseHeaders && typeof e.responseHeaders === 'object' ? { responseHeaders: e.responseHeaders as Record<string, string> } : {}),
    ...(typeof e.responseBody === 'string' && e.responseBody !== '' ? { responseBody: e.responseBody } : {}),
    ...(typeof e.isRetryable === 'boolean' ? { isRetryable: e.isRetryable } : {}),
    ...(typeof e.url === 'string' ? { url: e.url } : {}),
  };
}
