/**
 * The OpenAI Chat Completions wire format (`POST /v1/chat/completions`): request parsing and
 * validation, chat.completion JSON, chat.completion.chunk streams (tool call arguments streamed
 * by index, a final usage chunk with `stream_options.include_usage`, `data: [DONE]`), error
 * bodies and `x-ratelimit-*` headers.
 */
import { openAIOutputSchema } from './structured.js';
import type { ContentBlock, Message } from '../../machines/protocol.js';
import type { PromptUnit, RateLimitReport, SimErrorKind, SimHttpError, SimReply, SimRequest, SimTool, SimToolChoice, SimUsage } from './types.js';
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

/** max_tokens when the request names none (the model's own cap, for the output-token bucket). */
export const OPENAI_DEFAULT_MAX_TOKENS = 4096;
const MEDIA_TOKENS = 1600;

const ERRORS: Record<SimErrorKind, [status: number, type: string, code: string | null]> = {
  invalid_request: [400, 'invalid_request_error', null],
  context_length: [400, 'invalid_request_error', 'context_length_exceeded'],
  authentication: [401, 'invalid_request_error', 'invalid_api_key'],
  not_found: [404, 'invalid_request_error', 'unknown_url'],
  too_large: [413, 'invalid_request_error', null],
  rate_limit: [429, 'requests', 'rate_limit_exceeded'],
  api_error: [500, 'server_error', null],
  overloaded: [503, 'server_error', 'service_unavailable'],
};

const FINISH = { end_turn: 'stop', tool_use: 'tool_calls', max_tokens: 'length' } as const;

export const openai: WireProtocol = {
  name: 'openai',
  toolIdPrefix: 'call_',
  messageIdPrefix: 'chatcmpl-',
  requestIdHeader: 'x-request-id',
  billsCacheWrites: false,
  parse: parseRequest,
  planCache: (cache, request) => cache.planOpenAI(`openai\u0000${request.model}`, request.units, request.inputTokens),
  error(error: SimHttpError) {
    const [status, baseType, code] = ERRORS[error.kind];
    const type = error.kind === 'rate_limit' && error.limit === 'tokens' ? 'tokens' : baseType;
    const param = error.kind === 'context_length' ? 'messages' : null;
    return { status, body: { error: { message: error.message, type, param, code } } };
  },
  rateLimitHeaders(report: RateLimitReport) {
    const headers: Record<string, string> = {};
    const tokens = report.inputTokens ?? report.outputTokens;
    const buckets = [
      ['requests', report.requests],
      ['tokens', tokens],
    ] as const;
    for (const [name, bucket] of buckets) {
      if (!bucket) continue;
      headers[`x-ratelimit-limit-${name}`] = String(bucket.limit);
      headers[`x-ratelimit-remaining-${name}`] = String(bucket.remaining);
      headers[`x-ratelimit-reset-${name}`] = formatDuration(bucket.resetMs);
    }
    return headers;
  },
  message(reply: SimReply, usage: SimUsage, meta: ReplyMeta) {
    const text = reply.blocks.flatMap((b) => (b.type === 'text' ? [b.text] : []));
    const calls = reply.blocks.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input) } }] : []));
    const message: Record<string, unknown> = { role: 'assistant', content: text.length > 0 ? text.join('') : null, refusal: null, annotations: [] };
    if (calls.length > 0) message.tool_calls = calls;
    return {
      id: meta.id,
      object: 'chat.completion',
      created: meta.created,
      model: meta.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: FINISH[reply.stopReason] }],
      usage: usageJson(usage),
      service_tier: 'default',
      system_fingerprint: 'fp_sim',
    };
  },
  stream(reply: SimReply, usage: SimUsage, meta: ReplyMeta, includeUsage: boolean): StreamPlan {
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      sseFrame({
        id: meta.id,
        object: 'chat.completion.chunk',
        created: meta.created,
        model: meta.model,
        service_tier: 'default',
        system_fingerprint: 'fp_sim',
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        ...(includeUsage ? { usage: null } : {}),
      });
    const body: StreamPlan['body'] = [];
    let toolIndex = 0;
    for (const block of reply.blocks) {
      if (block.type === 'text') {
        const frame = pieceFramer((piece) => chunk({ content: piece }));
        for (const piece of pieces(block.text)) body.push({ text: frame(piece), tokens: piece.length / 4 });
        continue;
      }
      const index = toolIndex++;
      body.push({ text: chunk({ tool_calls: [{ index, id: block.id, type: 'function', function: { name: block.name, arguments: '' } }] }), tokens: 0 });
      const frame = pieceFramer((piece) => chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
      for (const piece of pieces(JSON.stringify(block.input))) body.push({ text: frame(piece), tokens: piece.length / 4 });
    }
    let tail = chunk({}, FINISH[reply.stopReason]);
    if (includeUsage) {
      tail += sseFrame({ id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, service_tier: 'default', system_fingerprint: 'fp_sim', choices: [], usage: usageJson(usage) });
    }
    tail += sseFrame('[DONE]');
    return { head: chunk({ role: 'assistant', content: '', refusal: null }), body, tail, faultFrame: null };
  },
};

function usageJson(usage: SimUsage) {
  const prompt = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: usage.outputTokens,
    total_tokens: prompt + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cacheReadTokens, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

/**
 * A duration as OpenAI's reset headers spell it: `20ms`, `1.5s`, `6m0s`, `1h2m3s`.
 * @example formatDuration(360_000) // '6m0s'
 */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms));
  if (total < 1000) return `${total}ms`;
  const h = Math.floor(total / 3_600_000);
  const m = Math.floor((total % 3_600_000) / 60_000);
  const s = `${(total % 60_000) / 1000}s`;
  if (h > 0) return `${h}h${m}m${s}`;
  if (m > 0) return `${m}m${s}`;
  return s;
}

/** Text of a `content` that is a string or a list of parts; media parts count as MEDIA_TOKENS. */
function contentText(raw: unknown, path: string, nullable: boolean): { text: string; media: number } {
  if (typeof raw === 'string') return { text: raw, media: 0 };
  if ((raw === null || raw === undefined) && nullable) return { text: '', media: 0 };
  if (!Array.isArray(raw)) throw invalid(`${path}: expected a string or an array of content parts`);
  let text = '';
  let media = 0;
  raw.forEach((p, i) => {
    const part = requireRecord(p, `${path}.${i}`);
    if (part.type === 'text') text += requireString(part.text, `${path}.${i}.text`);
    else if (part.type === 'refusal') text += typeof part.refusal === 'string' ? part.refusal : '';
    else if (part.type === 'image_url' || part.type === 'input_audio' || part.type === 'file') media++;
    else throw invalid(`${path}.${i}.type: unknown content part type ${JSON.stringify(part.type)}`);
  });
  return { text, media };
}

function parseRequest(raw: unknown): SimRequest {
  const body = requireRecord(raw, 'body');
  const model = requireString(body.model, 'model', true);
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalid("Invalid 'messages': empty array. Expected an array with minimum length 1.");
  const maxTokens = optionalPositiveInt(body.max_completion_tokens, 'max_completion_tokens') ?? optionalPositiveInt(body.max_tokens, 'max_tokens') ?? OPENAI_DEFAULT_MAX_TOKENS;
  checkSampling(body, 'openai');
  const stream = optionalBoolean(body.stream, 'stream');
  const includeUsage = isRecord(body.stream_options) && body.stream_options.include_usage === true;
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw invalid("sim: only 'n': 1 is supported");

  const units: PromptUnit[] = [];
  const tools: SimTool[] = [];
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw invalid("Invalid type for 'tools': expected an array");
    body.tools.forEach((t, i) => {
      const tool = requireRecord(t, `tools[${i}]`);
      if (tool.type !== 'function') throw invalid(`tools[${i}].type: only 'function' tools are supported`);
      const fn = requireRecord(tool.function, `tools[${i}].function`);
      const spec: SimTool = { name: requireString(fn.name, `tools[${i}].function.name`, true), inputSchema: isRecord(fn.parameters) ? fn.parameters : {} };
      if (typeof fn.description === 'string') spec.description = fn.description;
      tools.push(spec);
      units.push(toolUnit(spec));
    });
  }

  const messages: Message[] = [];
  let previousWasTool = false;
  body.messages.forEach((m, i) => {
    const path = `messages[${i}]`;
    const message = requireRecord(m, path);
    const role = message.role;
    const isTool = role === 'tool';
    if (role === 'system' || role === 'developer') {
      units.push(messageUnit(role), systemUnit(contentText(message.content, `${path}.content`, false).text));
    } else if (role === 'user') {
      const { text, media } = contentText(message.content, `${path}.content`, false);
      const block: ContentBlock = { type: 'text', text };
      messages.push({ role: 'user', content: [block] });
      units.push(messageUnit(role), blockUnit(block));
      if (media > 0) units.push({ text: `\u0000media${media}`, tokens: media * MEDIA_TOKENS });
    } else if (role === 'assistant') {
      const { text } = contentText(message.content, `${path}.content`, true);
      const content: ContentBlock[] = text === '' ? [] : [{ type: 'text', text }];
      if (message.tool_calls !== undefined && message.tool_calls !== null) {
        if (!Array.isArray(message.tool_calls)) throw invalid(`${path}.tool_calls: expected an array`);
        message.tool_calls.forEach((c, j) => {
          const call = requireRecord(c, `${path}.tool_calls[${j}]`);
          const fn = requireRecord(call.function, `${path}.tool_calls[${j}].function`);
          const args = requireString(fn.arguments, `${path}.tool_calls[${j}].function.arguments`);
          content.push({ type: 'tool_use', id: requireString(call.id, `${path}.tool_calls[${j}].id`, true), name: requireString(fn.name, `${path}.tool_calls[${j}].function.name`, true), input: parseArguments(args) });
        });
      }
      messages.push({ role: 'assistant', content });
      units.push(messageUnit(role), ...content.map(blockUnit));
    } else if (isTool) {
      const block: ContentBlock = { type: 'tool_result', toolUseId: requireString(message.tool_call_id, `${path}.tool_call_id`, true), content: contentText(message.content, `${path}.content`, false).text };
      // Consecutive tool messages answer one assistant turn: one user message of tool results.
      if (previousWasTool) messages[messages.length - 1]!.content.push(block);
      else messages.push({ role: 'user', content: [block] });
      units.push(messageUnit(role), blockUnit(block));
    } else {
      throw invalid(`Invalid value for '${path}.role': expected one of 'system', 'developer', 'user', 'assistant', 'tool'`);
    }
    previousWasTool = isTool;
  });

  const problem = checkToolPairing(messages);
  if (problem?.kind === 'missing_results') {
    throw invalid(`An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${problem.ids.join(', ')}`);
  }
  if (problem?.kind === 'orphan_results') {
    throw invalid("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.");
  }

  const outputSchema = openAIOutputSchema(body.response_format);
  return { protocol: 'openai', model, maxTokens, stream, includeUsage, messages, tools, toolChoice: parseToolChoice(body.tool_choice, tools), units, inputTokens: sumTokens(units), ...(outputSchema ? { outputSchema } : {}) };
}

/** Arguments as an object when they are JSON (models can write broken JSON: kept as the string). */
function parseArguments(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function parseToolChoice(raw: unknown, tools: readonly SimTool[]): SimToolChoice {
  if (raw === undefined || raw === null || raw === 'auto') return { type: 'auto' };
  if (raw === 'none') return { type: 'none' };
  if (raw === 'required') return { type: 'any' };
  const choice = requireRecord(raw, 'tool_choice');
  if (choice.type === 'function' && isRecord(choice.function)) {
    const name = requireString(choice.function.name, 'tool_choice.function.name', true);
    if (!tools.some((t) => t.name === name)) throw invalid(`Invalid value for 'tool_choice': tool '${name}' not found in 'tools'`);
    return { type: 'tool', name };
  }
  throw invalid("Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named function");
}
