/**
 * The OpenAI-compatible Chat Completions adapter: POST {baseURL}/chat/completions, streamed
 * (SSE, `data: [DONE]`) or not.
 *
 * Choices, documented:
 * - `max_completion_tokens` carries maxTokens by default: OpenAI deprecated `max_tokens` and its
 *   reasoning models reject it. Older OpenAI-compatible servers only know `max_tokens`: set
 *   `maxTokensField: 'max_tokens'` for those.
 * - Usage: OpenAI's prompt_tokens includes the cached ones. We report
 *   inputTokens = prompt_tokens - cached_tokens and cacheReadTokens = cached_tokens, so that
 *   inputTokens + cacheReadTokens is the prompt (the same disjoint split as Anthropic's), and
 *   cached tokens are priced as cache reads. cacheWriteTokens is always 0 (OpenAI caches for free).
 *   A server that sends no usage at all gets estimated usage (machines/tokens.ts), so budgets
 *   still move.
 * - Conversation mapping: the system prompt is a `system` message; an assistant's tool_use blocks
 *   become `tool_calls` (arguments as a JSON string); each tool_result becomes a `role: "tool"`
 *   message with its tool_call_id, placed before the user's text of the same turn. OpenAI has no
 *   error flag on tool results: an error result's content is prefixed with "Error: ".
 * - A structured output goes as `response_format: {type: "json_schema", json_schema: {name,
 *   schema, strict: true}}`.
 * - The stream is complete at `data: [DONE]`, or when both a finish_reason and the usage chunk
 *   arrived (some compatible servers omit [DONE]); otherwise it is truncated (`network`).
 *   Named events (Chat Completions sends none) are skipped unread, except `error`. A reply is
 *   held to the bounds of replyLimits.ts (tool-call indexes 0-1023 among them).
 * - `request.onResponseStart` fires once, on the first chunk of a 2xx stream (an error chunk is
 *   not a start), or when the headers of a 2xx plain reply arrive.
 *
 * @example
 * const openai = createOpenAIProvider({ baseURL: 'http://127.0.0.1:8080/v1' });
 */
import type { ContentBlock, Message, ModelCallOutput, RateLimitHint, StopReason, Usage } from '../../machines/protocol.js';
import { estimateRequestTokens, estimateTextTokens } from '../../machines/tokens.js';
import { type CallFacts, classifyStreamError, jsonObjectOf, malformedResponse, toolInputOf, truncatedStream } from './classify.js';
import { exchange, HttpClient, type HttpResponse } from './http.js';
import { MAX_REPLY_BLOCKS, ReplyGuard, readJsonBody, responseFacts } from './replyLimits.js';
import { type Provider, type ProviderRequest, responseStartNotifier, callHeader, textNotifier } from './types.js';

export interface OpenAIProviderOptions {
  /** Default https://api.openai.com/v1 */
  baseURL?: string;
  /** Stream the response (SSE). Default true. */
  stream?: boolean;
  /** Max wait for the response headers. Default 60 000 ms. */
  headersTimeoutMs?: number;
  /** Max silence between two chunks of the body. Default 120 000 ms. */
  bodyTimeoutMs?: number;
  /** Sent as `OpenAI-Organization`. */
  organization?: string;
  /** Which body field carries maxTokens. Default 'max_completion_tokens'. */
  maxTokensField?: 'max_completion_tokens' | 'max_tokens';
  /** The clock that reads rate-limit reset times (the swarm passes its own). Default Date.now. */
  now?: () => number;
}

type WireMessage = Record<string, unknown>;

/** The request body for one call. */
export function openAIRequestBody(
  request: ProviderRequest,
  options: { stream: boolean; maxTokensField?: 'max_completion_tokens' | 'max_tokens' },
): Record<string, unknown> {
  const messages: WireMessage[] = [];
  if (request.system) messages.push({ role: 'system', content: request.system });
  for (const message of request.messages) messages.push(...toWireMessages(message));
  const body: Record<string, unknown> = { model: request.model, messages };
  body[options.maxTokensField ?? 'max_completion_tokens'] = request.maxTokens;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.stopSequences !== undefined) body.stop = request.stopSequences;
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: 'function',
      function: {
        name: tool.name,
        ...(tool.description !== undefined ? { description: tool.description } : {}),
        parameters: tool.inputSchema,
      },
    }));
  }
  if (request.output) {
    // Strict: the server holds the answer to the schema (the runtime still checks it on arrival).
    body.response_format = { type: 'json_schema', json_schema: { name: request.output.name, schema: request.output.schema, strict: true } };
  }
  if (options.stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}

function toWireMessages(message: Message): WireMessage[] {
  const text = message.content
    .filter((b): b is Extract<ContentBlock, { type: 'text' }> => b.type === 'text')
    .map((b) => b.text)
    .join('\n');
  if (message.role === 'assistant') {
    const calls = message.content
      .filter((b): b is Extract<ContentBlock, { type: 'tool_use' }> => b.type === 'tool_use')
      .map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }));
    return [{ role: 'assistant', content: text === '' && calls.length > 0 ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) }];
  }
  const out: WireMessage[] = [];
  for (const block of message.content) {
    if (block.type === 'tool_result') {
      out.push({ role: 'tool', tool_call_id: block.toolUseId, content: block.isError ? `Error: ${block.content}` : block.content });
    }
  }
  if (text !== '' || out.length === 0) out.push({ role: 'user', content: text });
  return out;
}

/** OpenAI's finish_reason -> StopReason. */
export function openAIStopReason(reason: unknown): StopReason {
  switch (reason) {
    case 'stop':
      return 'end_turn';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'length':
      return 'max_tokens';
    case 'content_filter':
      return 'refusal';
    default:
      return 'other';
  }
}

/** OpenAI usage -> Usage (see the module comment for the split); undefined when absent. */
export function openAIUsage(wire: unknown): Usage | undefined {
  if (!wire || typeof wire !== 'object') return undefined;
  const u = wire as Record<string, unknown>;
  const prompt = typeof u.prompt_tokens === 'number' ? u.prompt_tokens : 0;
  const details = u.prompt_tokens_details as Record<string, unknown> | undefined | null;
  const cached = details && typeof details.cached_tokens === 'number' ? Math.min(details.cached_tokens, prompt) : 0;
  return {
    inputTokens: prompt - cached,
    outputTokens: typeof u.completion_tokens === 'number' ? u.completion_tokens : 0,
    cacheWriteTokens: 0,
    cacheReadTokens: cached,
  };
}

interface CallState {
  id: string;
  name: string;
  args: string;
}

/** What a reply accumulates, streamed or not. */
interface Reply {
  text: string;
  refusal: string;
  calls: CallState[];
  finish?: unknown;
  usage?: Usage;
  /** The completion's id and the model that answered (the first chunk that says them). */
  id?: unknown;
  model?: unknown;
}

function finish(reply: Reply, request: ProviderRequest, facts: CallFacts, rateLimit: RateLimitHint | undefined): ModelCallOutput {
  let stopReason = openAIStopReason(reply.finish);
  // Some compatible servers say "stop" when the turn ends in tool calls.
  if (reply.calls.length > 0 && stopReason === 'end_turn') stopReason = 'tool_use';
  if (reply.refusal !== '' && reply.text === '' && reply.calls.length === 0) stopReason = 'refusal';
  const content: ContentBlock[] = [];
  const text = reply.text !== '' ? reply.text : reply.refusal;
  if (text !== '') content.push({ type: 'text', text });
  reply.calls.forEach((call, i) => {
    const input = toolInputOf(call.args, call.name, stopReason === 'max_tokens', facts, rateLimit);
    if (input !== undefined) content.push({ type: 'tool_use', id: call.id || `call_${i}`, name: call.name, input });
  });
  const usage = reply.usage ?? {
    inputTokens: estimateRequestTokens(request.system, request.messages),
    outputTokens: estimateTextTokens(text + reply.calls.map((c) => c.name + c.args).join('')),
    cacheWriteTokens: 0,
    cacheReadTokens: 0,
  };
  const output: ModelCallOutput = { content, stopReason, usage };
  const response = responseFacts(reply.id, reply.model);
  if (response) output.response = response;
  if (rateLimit) output.rateLimit = rateLimit;
  return output;
}

/** Streamed tool calls by index: a Map, so a server's index costs one entry whatever its value. */
interface StreamedCalls {
  byIndex: Map<number, CallState>;
  /** For servers that omit the index: each call's index by its id. */
  byId: Map<string, number>;
  /** The index of the call created last (where a delta without index or id goes). */
  last: number;
  /** One past the highest index so far. */
  next: number;
}

/** Merges one streamed tool_calls delta into the calls, by index. */
function mergeToolCall(calls: StreamedCalls, delta: Record<string, unknown>, guard: ReplyGuard): void {
  const id = typeof delta.id === 'string' && delta.id !== '' ? delta.id : undefined;
  let index: number;
  if (typeof delta.index === 'number') index = guard.index(delta.index, 'tool call');
  // Servers that omit the index: a new id starts a new call, anything else continues the last.
  else if (id !== undefined) index = calls.byId.get(id) ?? guard.index(calls.next, 'tool call');
  else index = calls.byIndex.size === 0 ? 0 : calls.last;
  let call = calls.byIndex.get(index);
  if (!call) {
    call = { id: '', name: '', args: '' };
    calls.byIndex.set(index, call);
    calls.last = index;
    calls.next = Math.max(calls.next, index + 1);
  }
  if (id !== undefined) {
    call.id = id;
    calls.byId.set(id, index);
  }
  const fn = (delta.function ?? {}) as Record<string, unknown>;
  // The name normally arrives whole in the first delta; some servers repeat it, some split it.
  if (typeof fn.name === 'string' && fn.name !== call.name) call.name += guard.text(fn.name);
  if (typeof fn.arguments === 'string') call.args += guard.text(fn.arguments);
}

async function readStream(response: HttpResponse, request: ProviderRequest, facts: CallFacts, rateLimit: RateLimitHint | undefined, started: () => void): Promise<ModelCallOutput> {
  const guard = new ReplyGuard(request.maxTokens, facts, rateLimit);
  const reply: Reply = { text: '', refusal: '', calls: [] };
  const onText = textNotifier(request);
  const calls: StreamedCalls = { byIndex: new Map(), byId: new Map(), last: 0, next: 0 };
  let done = false;
  await guard.read(response.body, request.signal, (event) => {
    if (done) return;
    // Some compatible servers name an error event; its text is classified, JSON or not.
    if (event.event === 'error') throw classifyStreamError({ ...facts, data: event.data, ...(rateLimit ? { rateLimit } : {}) });
    // Chat Completions sends unnamed events only: a named one (a proxy's keep-alive, a newer
    // API's event) is not part of the reply, whatever its data.
    if (event.event !== 'message') return;
    if (event.data === '[DONE]') {
      done = true;
      return;
    }
    const chunk = jsonObjectOf(event.data);
    if (!chunk) throw malformedResponse(facts, 'a stream chunk is not a JSON object', rateLimit);
    if (chunk.error) throw classifyStreamError({ ...facts, data: event.data, ...(rateLimit ? { rateLimit } : {}) });
    started();
    reply.id ??= chunk.id;
    reply.model ??= chunk.model;
    const usage = openAIUsage(chunk.usage);
    if (usage) reply.usage = usage;
    for (const choice of (Array.isArray(chunk.choices) ? chunk.choices : []) as Record<string, unknown>[]) {
      if (!choice || (typeof choice.index === 'number' && choice.index !== 0)) continue;
      const delta = (choice.delta ?? {}) as Record<string, unknown>;
      if (typeof delta.content === 'string') {
        reply.text += guard.text(delta.content);
        onText?.(delta.content);
      }
      if (typeof delta.refusal === 'string') reply.refusal += guard.text(delta.refusal);
      if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) mergeToolCall(calls, (call ?? {}) as Record<string, unknown>, guard);
      if (choice.finish_reason != null) reply.finish = choice.finish_reason;
    }
  });
  const complete = done || (reply.finish !== undefined && reply.usage !== undefined);
  if (!complete) throw truncatedStream(facts, 'data: [DONE]', rateLimit);
  reply.calls = [...calls.byIndex].sort(([a], [b]) => a - b).map(([, call]) => call);
  return finish(reply, request, facts, rateLimit);
}

async function readJson(response: HttpResponse, request: ProviderRequest, facts: CallFacts, rateLimit: RateLimitHint | undefined): Promise<ModelCallOutput> {
  const body = await readJsonBody(response, facts, rateLimit);
  if (body.error) throw classifyStreamError({ ...facts, data: JSON.stringify(body), ...(rateLimit ? { rateLimit } : {}) });
  const choice = ((body.choices ?? []) as Record<string, unknown>[])[0];
  if (!choice) throw malformedResponse(facts, 'the completion has no choices', rateLimit);
  const message = (choice.message ?? {}) as Record<string, unknown>;
  const wireCalls = (Array.isArray(message.tool_calls) ? message.tool_calls : []) as Record<string, unknown>[];
  if (wireCalls.length > MAX_REPLY_BLOCKS) throw malformedResponse(facts, `the completion has ${wireCalls.length} tool calls (at most ${MAX_REPLY_BLOCKS} in one reply)`, rateLimit);
  const reply: Reply = {
    text: typeof message.content === 'string' ? message.content : '',
    refusal: typeof message.refusal === 'string' ? message.refusal : '',
    calls: wireCalls.map((call) => {
      const fn = (call.function ?? {}) as Record<string, unknown>;
      return { id: String(call.id ?? ''), name: String(fn.name ?? ''), args: typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {}) };
    }),
    finish: choice.finish_reason,
    id: body.id,
    model: body.model,
  };
  const usage = openAIUsage(body.usage);
  if (usage) reply.usage = usage;
  return finish(reply, request, facts, rateLimit);
}

/**
 * A Provider over an OpenAI-compatible Chat Completions API.
 *
 * @example
 * const provider = createOpenAIProvider({ organization: 'org-123' });
 */
export function createOpenAIProvider(options: OpenAIProviderOptions = {}): Provider {
  const baseURL = (options.baseURL ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
  const stream = options.stream ?? true;
  const http = new HttpClient({ headersTimeoutMs: options.headersTimeoutMs, bodyTimeoutMs: options.bodyTimeoutMs });

  return {
    type: 'openai',
    call(request: ProviderRequest): Promise<ModelCallOutput> {
      const facts: CallFacts = { provider: request.provider, model: request.model, keyId: request.key.id };
      const started = responseStartNotifier(request);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: stream ? 'text/event-stream' : 'application/json',
        authorization: `Bearer ${request.key.secret}`,
        ...callHeader(request),
      };
      if (options.organization) headers['openai-organization'] = options.organization;
      return exchange(
        http,
        {
          ...facts,
          url: `${baseURL}/chat/completions`,
          headers,
          body: openAIRequestBody(request, { stream, ...(options.maxTokensField ? { maxTokensField: options.maxTokensField } : {}) }),
          signal: request.signal,
          secret: request.key.secret,
          ...(options.now ? { now: options.now } : {}),
        },
        (response, rateLimit) => {
          // Only 2xx responses get here: a plain one has started once its headers are in.
          const type = String(response.headers['content-type'] ?? '');
          if (type.includes('text/event-stream')) return readStream(response, request, facts, rateLimit, started);
          started();
          return readJson(response, request, facts, rateLimit);
        },
      );
    },
    close: () => http.close(),
  };
}
