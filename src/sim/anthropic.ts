/**
 * The Anthropic Messages wire format (`POST /v1/messages`): request parsing and validation,
 * message JSON, the SSE event sequence, error bodies and `anthropic-ratelimit-*` headers.
 */
import { anthropicOutputSchema } from './structured.js';
import type { ContentBlock, Message } from '../../machines/protocol.js';
import type { PromptUnit, RateLimitReport, SimReply, SimRequest, SimTool, SimToolChoice, SimUsage } from './types.js';
import type { SimErrorKind, SimHttpError } from './types.js';
import {
  blockUnit,
  checkToolPairing,
  invalid,
  isRecord,
  messageUnit,
  optionalBoolean,
  checkSampling,
  optionalPositiveInt,
  pieceFramer,
  pieces,
  requireRecord,
  requireString,
  sseFrame,
  sumTokens,
  systemUnit,
  toolUnit,
  type ReplyMeta,
  type StreamPlan,
  type WireProtocol,
} from './wire.js';

const MAX_BREAKPOINTS = 4;
const PING_FRAME = sseFrame({ type: 'ping' }, 'ping');
/** What an image or document block counts for, whatever its size (a typical image's tokens). */
const MEDIA_TOKENS = 1600;

const ERRORS: Record<SimErrorKind, [status: number, type: string]> = {
  invalid_request: [400, 'invalid_request_error'],
  context_length: [400, 'invalid_request_error'],
  authentication: [401, 'authentication_error'],
  not_found: [404, 'not_found_error'],
  too_large: [413, 'request_too_large'],
  rate_limit: [429, 'rate_limit_error'],
  api_error: [500, 'api_error'],
  overloaded: [529, 'overloaded_error'],
};

export const anthropic: WireProtocol = {
  name: 'anthropic',
  toolIdPrefix: 'toolu_01',
  messageIdPrefix: 'msg_01',
  requestIdHeader: 'request-id',
  billsCacheWrites: true,
  parse: parseRequest,
  planCache: (cache, request) => cache.planAnthropic(`anthropic\u0000${request.model}`, request.units),
  error(error: SimHttpError, requestId: string) {
    const [status, type] = ERRORS[error.kind];
    return { status, body: { type: 'error', error: { type, message: error.message }, request_id: requestId } };
  },
  rateLimitHeaders(report: RateLimitReport, now: number) {
    const headers: Record<string, string> = {};
    const buckets = [
      ['requests', report.requests],
      ['input-tokens', report.inputTokens],
      ['output-tokens', report.outputTokens],
    ] as const;
    for (const [name, bucket] of buckets) {
      if (!bucket) continue;
      headers[`anthropic-ratelimit-${name}-limit`] = String(bucket.limit);
      headers[`anthropic-ratelimit-${name}-remaining`] = String(bucket.remaining);
      headers[`anthropic-ratelimit-${name}-reset`] = rfc3339(now + bucket.resetMs);
    }
    return headers;
  },
  message(reply: SimReply, usage: SimUsage, meta: ReplyMeta) {
    return {
      id: meta.id,
      type: 'message',
      role: 'assistant',
      model: meta.model,
      content: reply.blocks.map((b) => (b.type === 'text' ? { type: 'text', text: b.text } : { type: 'tool_use', id: b.id, name: b.name, input: b.input })),
      stop_reason: reply.stopReason,
      stop_sequence: null,
      usage: usageJson(usage),
    };
  },
  stream(reply: SimReply, usage: SimUsage, meta: ReplyMeta): StreamPlan {
    const start = {
      type: 'message_start',
      message: { id: meta.id, type: 'message', role: 'assistant', model: meta.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usageJson(usage), output_tokens: 1 } },
    };
    const body: StreamPlan['body'] = [];
    reply.blocks.forEach((block, index) => {
      const opening = block.type === 'text' ? { type: 'text', text: '' } : { type: 'tool_use', id: block.id, name: block.name, input: {} };
      body.push({ text: sseFrame({ type: 'content_block_start', index, content_block: opening }, 'content_block_start'), tokens: 0 });
      if (index === 0) body.push({ text: PING_FRAME, tokens: 0 });
      const text = block.type === 'text' ? block.text : JSON.stringify(block.input ?? {});
      const frame = pieceFramer((piece) =>
        sseFrame({ type: 'content_block_delta', index, delta: block.type === 'text' ? { type: 'text_delta', text: piece } : { type: 'input_json_delta', partial_json: piece } }, 'content_block_delta'),
      );
      for (const piece of pieces(text)) body.push({ text: frame(piece), tokens: piece.length / 4 });
      body.push({ text: sseFrame({ type: 'content_block_stop', index }, 'content_block_stop'), tokens: 0 });
    });
    const { cache_creation: _, service_tier: __, ...cumulative } = usageJson(usage);
    const tail =
      sseFrame({ type: 'message_delta', delta: { stop_reason: reply.stopReason, stop_sequence: null }, usage: cumulative }, 'message_delta') +
      sseFrame({ type: 'message_stop' }, 'message_stop');
    const fault = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
    return { head: sseFrame(start, 'message_start'), body, tail, faultFrame: sseFrame(fault, 'error') };
  },
};

function usageJson(usage: SimUsage) {
  return {
    input_tokens: usage.inputTokens,
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cacheReadTokens,
    cache_creation: { ephemeral_5m_input_tokens: usage.cacheWrite5mTokens, ephemeral_1h_input_tokens: usage.cacheWrite1hTokens },
    output_tokens: usage.outputTokens,
    service_tier: 'standard',
  };
}

/** RFC 3339 in whole seconds, rounded up (the reset is never earlier than said). */
function rfc3339(ms: number): string {
  return new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function parseRequest(raw: unknown): SimRequest {
  const body = requireRecord(raw, 'body');
  const model = requireString(body.model, 'model', true);
  const maxTokens = optionalPositiveInt(body.max_tokens, 'max_tokens');
  if (maxTokens === undefined) throw invalid('max_tokens: Field required');
  checkSampling(body, 'anthropic');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalid('messages: at least one message is required');
  const stream = optionalBoolean(body.stream, 'stream');
  let breakpoints = 0;
  /** The TTL of a block's cache_control, counting breakpoints as it goes. */
  const ttlOf = (block: Record<string, unknown>, path: string): '5m' | '1h' | undefined => {
    const control = block.cache_control;
    if (control === undefined || control === null) return undefined;
    const c = requireRecord(control, `${path}.cache_control`);
    if (c.type !== 'ephemeral') throw invalid(`${path}.cache_control.type: Input should be 'ephemeral'`);
    const ttl = c.ttl ?? '5m';
    if (ttl !== '5m' && ttl !== '1h') throw invalid(`${path}.cache_control.ttl: Input should be '5m' or '1h'`);
    breakpoints++;
    return ttl;
  };
  const withTtl = (unit: PromptUnit, ttl: '5m' | '1h' | undefined): PromptUnit => (ttl ? { ...unit, breakpointTtl: ttl } : unit);

  const units: PromptUnit[] = [];
  const tools: SimTool[] = [];
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw invalid('tools: expected an array');
    body.tools.forEach((t, i) => {
      const path = `tools.${i}`;
      const tool = requireRecord(t, path);
      const name = requireString(tool.name, `${path}.name`, true);
      // Server tools (a `type` such as web_search_20250305, no schema) are offered but never called here.
      const isServerTool = tool.type !== undefined && tool.type !== 'custom' && tool.input_schema === undefined;
      const inputSchema = isServerTool ? {} : requireRecord(tool.input_schema, `${path}.input_schema`);
      const spec: SimTool = { name, inputSchema };
      if (typeof tool.description === 'string') spec.description = tool.description;
      if (!isServerTool) tools.push(spec);
      units.push(withTtl(toolUnit(spec), ttlOf(tool, path)));
    });
  }

  if (typeof body.system === 'string') units.push(systemUnit(body.system));
  else if (Array.isArray(body.system)) {
    body.system.forEach((b, i) => {
      const block = requireRecord(b, `system.${i}`);
      if (block.type !== 'text') throw invalid(`system.${i}.type: Input should be 'text'`);
      units.push(withTtl(systemUnit(requireString(block.text, `system.${i}.text`)), ttlOf(block, `system.${i}`)));
    });
  } else if (body.system !== undefined) throw invalid('system: expected a string or a list of text blocks');

  const messages: Message[] = body.messages.map((m, i) => {
    const path = `messages.${i}`;
    const message = requireRecord(m, path);
    if (message.role !== 'user' && message.role !== 'assistant') throw invalid(`${path}.role: Input should be 'user' or 'assistant'`);
    units.push(messageUnit(message.role));
    const content: ContentBlock[] = [];
    if (typeof message.content === 'string') {
      content.push({ type: 'text', text: message.content });
      units.push(blockUnit(content[0]!));
    } else if (Array.isArray(message.content)) {
      message.content.forEach((b, j) => {
        const bpath = `${path}.content.${j}`;
        const block = requireRecord(b, bpath);
        const ttl = ttlOf(block, bpath);
        const normalized = toBlock(block, bpath);
        if (normalized) {
          content.push(normalized);
          units.push(withTtl(blockUnit(normalized), ttl));
        } else units.push(withTtl({ text: `\u0000${String(block.type)}\u0000${JSON.stringify(block)}`, tokens: block.type === 'thinking' || block.type === 'redacted_thinking' ? 0 : MEDIA_TOKENS }, ttl));
      });
    } else throw invalid(`${path}.content: expected a string or a list of content blocks`);
    return { role: message.role, content };
  });
  if (breakpoints > MAX_BREAKPOINTS) throw invalid(`A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${breakpoints}.`);

  const problem = checkToolPairing(messages);
  if (problem?.kind === 'missing_results') {
    throw invalid(
      `messages.${problem.index + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${problem.ids.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
    );
  }
  if (problem?.kind === 'orphan_results') {
    throw invalid(
      `messages.${problem.index}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${problem.ids.join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
    );
  }

  return {
    protocol: 'anthropic',
    model,
    maxTokens,
    stream,
    includeUsage: true,
    messages,
    tools,
    toolChoice: parseToolChoice(body.tool_choice, tools),
    units,
    inputTokens: sumTokens(units),
    ...withSchema(anthropicOutputSchema(body.output_config)),
  };
}

const withSchema = (schema: Record<string, unknown> | undefined) => (schema ? { outputSchema: schema } : {});

/** A content block as the normalized conversation holds it; undefined for media and thinking. */
function toBlock(block: Record<string, unknown>, path: string): ContentBlock | undefined {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: requireString(block.text, `${path}.text`) };
    case 'tool_use':
      return { type: 'tool_use', id: requireString(block.id, `${path}.id`, true), name: requireString(block.name, `${path}.name`, true), input: block.input ?? {} };
    case 'tool_result': {
      const id = requireString(block.tool_use_id, `${path}.tool_use_id`, true);
      let text = '';
      if (typeof block.content === 'string') text = block.content;
      else if (Array.isArray(block.content)) text = block.content.map((c) => (isRecord(c) && c.type === 'text' && typeof c.text === 'string' ? c.text : '')).join('\n');
      else if (block.content !== undefined) throw invalid(`${path}.content: expected a string or a list of blocks`);
      return block.is_error === true ? { type: 'tool_result', toolUseId: id, content: text, isError: true } : { type: 'tool_result', toolUseId: id, content: text };
    }
    case 'image':
    case 'document':
    case 'thinking':
    case 'redacted_thinking':
      return undefined;
    default:
      throw invalid(`${path}.type: unknown content block type ${JSON.stringify(block.type)}`);
  }
}

function parseToolChoice(raw: unknown, tools: readonly SimTool[]): SimToolChoice {
  if (raw === undefined || raw === null) return { type: 'auto' };
  const choice = requireRecord(raw, 'tool_choice');
  switch (choice.type) {
    case 'auto':
    case 'any':
    case 'none':
      return { type: choice.type };
    case 'tool': {
      const name = requireString(choice.name, 'tool_choice.name', true);
      if (!tools.some((t) => t.name === name)) throw invalid(`tool_choice: tool '${name}' not found in tools`);
      return { type: 'tool', name };
    }
    default:
      throw invalid(`tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'`);
  }
}
