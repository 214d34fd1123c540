/**
 * The Anthropic Messages API adapter: POST {baseURL}/v1/messages, streamed (SSE) or not.
 *
 * - The key goes in `x-api-key` and nowhere else; errors are scrubbed of it whatever the server
 *   echoes.
 * - Prompt caching: with `cache` on, `cache_control: {type: "ephemeral"}` breakpoints go on the
 *   last tool, the system prompt and the first user message (the task's shared brief): the
 *   prefix every turn and every sibling task repeats. Three of the API's four; the fourth is left
 *   free (a rolling breakpoint on the newest message would turn every turn into a cache write).
 * - Usage: input_tokens -> inputTokens, output_tokens -> outputTokens,
 *   cache_creation_input_tokens -> cacheWriteTokens, cache_read_input_tokens -> cacheReadTokens
 *   (disjoint counts, as the API reports them). message_delta's usage is cumulative: it replaces.
 * - A stream that ends without message_stop is truncated (`network`, retried); an `error` event
 *   after HTTP 200 is classified by its type (overloaded_error -> `overloaded`, ...).
 * - A structured output goes as `output_config: {format: {type: "json_schema", schema}}` (the
 *   Messages API's structured outputs; the answer is the text of the reply).
 * - Content blocks other than text and tool_use (thinking, server tools) are not part of the
 *   normalized conversation and are skipped.
 * - Named events other than the five a reply is built from and `error` are skipped unread,
 *   whatever their data. A reply is held to the bounds of replyLimits.ts.
 * - `request.onResponseStart` fires once, on `message_start` of a 2xx stream, or when the headers
 *   of a 2xx plain reply arrive.
 *
 * @example
 * const anthropic = createAnthropicProvider({ baseURL: 'http://127.0.0.1:8080' });
 * const out = await anthropic.call(request);
 * await anthropic.close();
 */
import type { ContentBlock, Message, ModelCallOutput, RateLimitHint, StopReason, Usage } from '../../machines/protocol.js';
import { type CallFacts, classifyStreamError, jsonObjectOf, malformedResponse, toolInputOf, truncatedStream } from './classify.js';
import { exchange, HttpClient, type HttpResponse } from './http.js';
import { MAX_REPLY_BLOCKS, ReplyGuard, readJsonBody, responseFacts } from './replyLimits.js';
import { type Provider, type ProviderRequest, responseStartNotifier, callHeader, textNotifier } from './types.js';

export interface AnthropicProviderOptions {
  /** Default https://api.anthropic.com */
  baseURL?: string;
  /** Stream the response (SSE). Default true. */
  stream?: boolean;
  /** The `anthropic-version` header. Default 2023-06-01. */
  version?: string;
  /** Max wait for the response headers. Default 60 000 ms. */
  headersTimeoutMs?: number;
  /** Max silence between two chunks of the body. Default 120 000 ms. */
  bodyTimeoutMs?: number;
  /** Place cache_control breakpoints (last tool, system, first user message). Default true. */
  cache?: boolean;
  /** The clock that reads rate-limit reset times (the swarm passes its own). Default Date.now. */
  now?: () => number;
}

const EPHEMERAL = Object.freeze({ type: 'ephemeral' });

type WireBlock = Record<string, unknown>;

/** The request body for one call (exported for tests and the simulated server's checks). */
export function anthropicRequestBody(request: ProviderRequest, options: { stream: boolean; cache: boolean }): Record<string, unknown> {
  const tools: WireBlock[] = request.tools.map((tool) => ({
    name: tool.name,
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    input_schema: tool.inputSchema,
  }));
  if (options.cache && tools.length > 0) tools[tools.length - 1]!.cache_control = EPHEMERAL;

  const messages = request.messages.map(toWireMessage);
  if (options.cache) {
    const first = messages.find((m) => m.role === 'user');
    const blocks = first?.content;
    if (blocks && blocks.length > 0) blocks[blocks.length - 1]!.cache_control = EPHEMERAL;
  }

  const body: Record<string, unknown> = { model: request.model, max_tokens: request.maxTokens };
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.stopSequences !== undefined) body.stop_sequences = request.stopSequences;
  if (request.system) {
    body.system = options.cache ? [{ type: 'text', text: request.system, cache_control: EPHEMERAL }] : request.system;
  }
  body.messages = messages;
  if (tools.length > 0) body.tools = tools;
  if (request.output) body.output_config = { format: { type: 'json_schema', schema: request.output.schema } };
  if (options.stream) body.stream = true;
  return body;
}

function toWireMessage(message: Message): { role: string; content: WireBlock[] } {
  let blocks = message.content;
  // The API rejects empty text blocks, and wants tool results before any text in a user turn.
  const nonEmpty = blocks.filter((b) => b.type !== 'text' || b.text !== '');
  if (nonEmpty.length > 0) blocks = nonEmpty;
  if (message.role === 'user') {
    blocks = [...blocks.filter((b) => b.type === 'tool_result'), ...blocks.filter((b) => b.type !== 'tool_result')];
  }
  return { role: message.role, content: blocks.map(toWireBlock) };
}

function toWireBlock(block: ContentBlock): WireBlock {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text };
    case 'tool_use':
      return { type: 'tool_use', id: block.id, name: block.name, input: block.input ?? {} };
    case 'tool_result':
      return { type: 'tool_result', tool_use_id: block.toolUseId, content: block.content, ...(block.isError ? { is_error: true } : {}) };
  }
}

/** Anthropic's stop_reason -> StopReason. */
export function anthropicStopReason(reason: unknown): StopReason {
  switch (reason) {
    case 'end_turn':
    case 'tool_use':
    case 'max_tokens':
    case 'stop_sequence':
    case 'refusal':
      return reason;
    case 'model_context_window_exceeded':
      return 'max_tokens';
    default:
      return 'other';
  }
}

/** Overwrites the usage fields the server sent (message_start, then cumulative message_delta). */
function applyUsage(usage: Usage, wire: unknown): void {
  if (!wire || typeof wire !== 'object') return;
  const u = wire as Record<string, unknown>;
  const take = (field: string, into: keyof Usage) => {
    if (typeof u[field] === 'number') usage[into] = u[field];
  };
  take('input_tokens', 'inputTokens');
  take('output_tokens', 'outputTokens');
  take('cache_creation_input_tokens', 'cacheWriteTokens');
  take('cache_read_input_tokens', 'cacheReadTokens');
}

interface BlockState {
  type: string;
  text: string;
  id: string;
  name: string;
  json: string;
  /** The input given at content_block_start, used when no delta follows. */
  startInput: unknown;
}

/** A content block as it starts (streamed) or stands (a plain reply), before its deltas. */
function blockStateOf(block: Record<string, unknown>): BlockState {
  return {
    type: String(block.type),
    text: typeof block.text === 'string' ? block.text : '',
    id: String(block.id ?? ''),
    name: String(block.name ?? ''),
    json: '',
    startInput: block.input,
  };
}

/** Builds the normalized content from the blocks in index order. */
function contentOf(blocks: Map<number, BlockState>, stopReason: StopReason, facts: CallFacts, rateLimit?: RateLimitHint): ContentBlock[] {
  const content: ContentBlock[] = [];
  for (const index of [...blocks.keys()].sort((a, b) => a - b)) {
    const block = blocks.get(index)!;
    if (block.type === 'text') {
      if (block.text !== '') content.push({ type: 'text', text: block.text });
    } else if (block.type === 'tool_use') {
      const input = block.json === '' ? (block.startInput ?? {}) : toolInputOf(block.json, block.name, stopReason === 'max_tokens', facts, rateLimit);
      if (input !== undefined) content.push({ type: 'tool_use', id: block.id, name: block.name, input });
    }
  }
  return content;
}

/** The events a reply is built from: their data must be JSON. Other named events are skipped unread. */
const NEEDED = new Set(['message_start', 'content_block_start', 'content_block_delta', 'message_delta', 'message_stop']);

/** Reads an SSE response to its message_stop. `started` fires on message_start. */
async function readStream(
  response: HttpResponse,
  request: ProviderRequest,
  facts: CallFacts,
  rateLimit: RateLimitHint | undefined,
  started: () => void,
): Promise<ModelCallOutput> {
  const guard = new ReplyGuard(request.maxTokens, facts, rateLimit);
  const onText = textNotifier(request);
  const blocks = new Map<number, BlockState>();
  const usage: Usage = { inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0 };
  let stopReason: StopReason = 'other';
  let stopped = false;
  let message: Record<string, unknown> | undefined;

  await guard.read(response.body, request.signal, (event) => {
    // Keep reading after message_stop: the body ends right after, and a fully read body keeps
    // the connection alive for the next call.
    if (stopped) return;
    // An `error` event is classified from its text, JSON or not.
    if (event.event === 'error') throw classifyStreamError({ ...facts, data: event.data, ...(rateLimit ? { rateLimit } : {}) });
    // ping, content_block_stop (inputs are parsed once, at the end) and event types added after
    // this adapter was written: whatever their data, they are not part of the reply. An unnamed
    // event says its type inside its data only, so it is read.
    if (event.event !== 'message' && !NEEDED.has(event.event)) return;
    const data = jsonObjectOf(event.data);
    if (!data) {
      if (event.event === 'message') return;
      throw malformedResponse(facts, `event "${event.event}" carries no JSON object`, rateLimit);
    }
    const type = event.event === 'message' ? String(data.type) : event.event;
    switch (type) {
      case 'message_start':
        started();
        message = data.message as Record<string, unknown> | undefined;
        applyUsage(usage, message?.usage);
        break;
      case 'content_block_start': {
        const index = guard.index(data.index, 'content block');
        const block = blockStateOf((data.content_block ?? {}) as Record<string, unknown>);
        guard.text(block.text);
        if (block.type === 'text') onText?.(block.text);
        blocks.set(index, block);
        break;
      }
      case 'content_block_delta': {
        const block = blocks.get(Number(data.index));
        const delta = (data.delta ?? {}) as Record<string, unknown>;
        if (!block) throw malformedResponse(facts, `content_block_delta for unknown block ${String(data.index).slice(0, 40)}`, rateLimit);
        if (delta.type === 'text_delta' && typeof delta.text === 'string') {
          block.text += guard.text(delta.text);
          if (block.type === 'text') onText?.(delta.text);
        }
        else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') block.json += guard.text(delta.partial_json);
        break;
      }
      case 'message_delta': {
        const delta = (data.delta ?? {}) as Record<string, unknown>;
        if ('stop_reason' in delta) stopReason = anthropicStopReason(delta.stop_reason);
        applyUsage(usage, data.usage);
        break;
      }
      case 'message_stop':
        stopped = true;
        break;
      case 'error':
        throw classifyStreamError({ ...facts, data: event.data, ...(rateLimit ? { rateLimit } : {}) });
      default:
        // An unnamed event of a type this adapter does not know.
        break;
    }
  });
  if (!stopped) throw truncatedStream(facts, 'message_stop', rateLimit);
  const content = contentOf(blocks, stopReason, facts, rateLimit);
  return withRateLimit(withResponse({ content, stopReason, usage }, message), rateLimit);
}

/** Reads a non-streamed JSON message. */
async function readJson(response: HttpResponse, facts: CallFacts, rateLimit: RateLimitHint | undefined): Promise<ModelCallOutput> {
  const message = await readJsonBody(response, facts, rateLimit);
  if (!Array.isArray(message.content)) throw malformedResponse(facts, 'the message has no content array', rateLimit);
  if (message.content.length > MAX_REPLY_BLOCKS) throw malformedResponse(facts, `the message has ${message.content.length} content blocks (at most ${MAX_REPLY_BLOCKS} in one reply)`, rateLimit);
  const stopReason = anthropicStopReason(message.stop_reason);
  const usage: Usage = { inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0 };
  applyUsage(usage, message.usage);
  const blocks = new Map<number, BlockState>();
  (message.content as Record<string, unknown>[]).forEach((block, index) => blocks.set(index, blockStateOf(block)));
  return withRateLimit(withResponse({ content: contentOf(blocks, stopReason, facts, rateLimit), stopReason, usage }, message), rateLimit);
}

/** The message's id and the model that answered (message_start's, or the plain reply's), where it says them. */
function withResponse(out: ModelCallOutput, message: Record<string, unknown> | undefined): ModelCallOutput {
  const response = responseFacts(message?.id, message?.model);
  if (response) out.response = response;
  return out;
}

function withRateLimit(output: ModelCallOutput, rateLimit: RateLimitHint | undefined): ModelCallOutput {
  if (rateLimit) output.rateLimit = rateLimit;
  return output;
}

/**
 * A Provider over the Anthropic Messages API.
 *
 * @example
 * const provider = createAnthropicProvider({ cache: true });
 */
export function createAnthropicProvider(options: AnthropicProviderOptions = {}): Provider {
  const baseURL = (options.baseURL ?? 'https://api.anthropic.com').replace(/\/+$/, '');
  const stream = options.stream ?? true;
  const cache = options.cache ?? true;
  const version = options.version ?? '2023-06-01';
  const http = new HttpClient({ headersTimeoutMs: options.headersTimeoutMs, bodyTimeoutMs: options.bodyTimeoutMs });

  return {
    type: 'anthropic',
    call(request: ProviderRequest): Promise<ModelCallOutput> {
      const facts: CallFacts = { provider: request.provider, model: request.model, keyId: request.key.id };
      const started = responseStartNotifier(request);
      return exchange(
        http,
        {
          ...facts,
          url: `${baseURL}/v1/messages`,
          headers: {
            'content-type': 'application/json',
            accept: stream ? 'text/event-stream' : 'application/json',
            'anthropic-version': version,
            'x-api-key': request.key.secret,
            ...callHeader(request),
          },
          body: anthropicRequestBody(request, { stream, cache }),
          signal: request.signal,
          secret: request.key.secret,
          ...(options.now ? { now: options.now } : {}),
        },
        (response, rateLimit) => {
          // Only 2xx responses get here. A server may answer a streaming request with plain JSON
          // (a proxy, a cached reply): such a response has started once its headers are in.
          const type = String(response.headers['content-type'] ?? '');
          if (type.includes('text/event-stream')) return readStream(response, request, facts, rateLimit, started);
          started();
          return readJson(response, facts, rateLimit);
        },
      );
    },
    close: () => http.close(),
  };
}
