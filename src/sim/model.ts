/**
 * The simulated model: a reply as a pure function of the request, its directives and the seed.
 * Directives are `[[sim:...]]` markers in the text of the last user message (docs/sim.md):
 *   [[sim:tool NAME {"json":"args"}]]  call that offered tool (args optional: made from its schema)
 *   [[sim:tools]]                      call every offered tool with minimal args
 *   [[sim:length N]]                   a reply of about N output tokens (max_tokens still caps it)
 *   [[sim:reply TEXT]]                 reply with exactly TEXT
 *   [[sim:replies A || B || C]]        the k-th request seen with this directive text replies with
 *                                      item min(k, n): counted by the server (server.ts), not here
 *   [[sim:error CODE [TIMES]]]         answer with an error (400|401|429|500|529|context), only the
 *                                      first TIMES times this request is seen when TIMES is given
 *   [[sim:invalid N [LABEL]]]          a request with a structured output: the first N requests seen
 *                                      with this directive text answer text that is not JSON
 * A request with a structured output (a JSON Schema) is answered with a value that follows it.
 * Without a tool directive the model answers with text, so a tool loop ends after one round.
 */
import type { ContentBlock, Message } from '../../machines/protocol.js';
import { deriveSeed, nextRandom } from '../../machines/random.js';
import { countTokens, truncateToTokens } from './tokenizer.js';
import { derivedId } from './hash.js';
import { SimHttpError, type SimReply, type SimRequest, type SimTool } from './types.js';
import { jsonValueEnd } from '../util/jsonScan.js';
import { MAX_SAMPLE_CHARS, MAX_SAMPLE_DEPTH, MAX_SAMPLE_ITEMS, MAX_SAMPLE_VALUES, sampleValue } from './structured.js';

export type ErrorDirective = '400' | '401' | '429' | '500' | '529' | 'context';

export interface Directives {
  tools: { name: string; input?: unknown }[];
  allTools: boolean;
  length?: number;
  reply?: string;
  /**
   * `[[sim:replies A || B]]`: `key` is the directive's text (trimmed), which the server counts
   * requests by; `items` the replies in order. The server picks one and passes it as `reply`.
   */
  replies?: { key: string; items: string[] };
  error?: { code: ErrorDirective; times?: number };
  /** `[[sim:invalid N]]`: `key` is the directive's text, counted by the server like `replies`. */
  invalid?: { key: string; times: number };
}

const ERROR_CODES: ReadonlySet<string> = new Set(['400', '401', '429', '500', '529', 'context']);
const MARK = '[[sim:';

/** The text of the last user message (tool results do not count). */
export function lastUserText(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (message.role !== 'user') continue;
    return message.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
  }
  return '';
}

/** The directives of a request, checked against it (a tool must be offered). */
export function readDirectives(request: SimRequest): Directives {
  const text = lastUserText(request.messages);
  const out: Directives = { tools: [], allTools: false };
  let from = 0;
  for (let start = text.indexOf(MARK); start >= 0; start = text.indexOf(MARK, from)) {
    const nameMatch = /^[a-z]+/.exec(text.slice(start + MARK.length));
    const name = nameMatch?.[0] ?? '';
    let at = start + MARK.length + name.length;
    if (name === 'tool') {
      const tool = /^\s+([^\s\]{]+)\s*/.exec(text.slice(at));
      if (!tool) throw bad(`[[sim:tool]] needs a tool name, as in [[sim:tool NAME {"arg":1}]]`);
      at += tool[0].length;
      let input: unknown;
      if (text[at] === '{') {
        const end = jsonValueEnd(text, at);
        try {
          input = JSON.parse(text.slice(at, end));
        } catch {
          throw bad(`[[sim:tool ${tool[1]}]] has arguments that are not a JSON object`);
        }
        at = end;
      }
      const close = /^\s*\]\]/.exec(text.slice(at));
      if (!close) throw bad(`[[sim:tool ${tool[1]}]] is not closed with "]]"`);
      from = at + close[0].length;
      out.tools.push(input === undefined ? { name: tool[1]! } : { name: tool[1]!, input });
      continue;
    }
    const end = text.indexOf(']]', at);
    if (end < 0) throw bad(`a [[sim:${name}]] directive is not closed with "]]"`);
    const arg = text.slice(at, end).trim();
    from = end + 2;
    switch (name) {
      case 'tools':
        out.allTools = true;
        break;
      case 'length': {
        const n = Number(arg);
        if (!Number.isInteger(n) || n < 0) throw bad(`[[sim:length N]] needs a whole number of tokens, got "${arg}"`);
        out.length = n;
        break;
      }
      case 'reply':
        out.reply = arg;
        break;
      case 'replies': {
        const items = arg.split('||').map((item) => item.trim());
        if (arg === '' || items.some((item) => item === '')) throw bad(`[[sim:replies A || B]] needs non-empty replies separated by "||", got "${arg}"`);
        if (out.replies) throw bad('only one [[sim:replies]] directive is allowed in a message');
        out.replies = { key: arg, items };
        break;
      }
      case 'error': {
        const [code = '', times, ...rest] = arg.split(/\s+/);
        const n = times === undefined ? undefined : Number(times);
        if (!ERROR_CODES.has(code) || rest.length > 0 || (n !== undefined && (!Number.isInteger(n) || n < 1))) {
          throw bad(`[[sim:error CODE [TIMES]]] needs CODE in 400|401|429|500|529|context and TIMES >= 1, got "${arg}"`);
        }
        out.error = n === undefined ? { code: code as ErrorDirective } : { code: code as ErrorDirective, times: n };
        break;
      }
      case 'invalid': {
        const n = Number(arg.split(/\s+/)[0]);
        if (!Number.isInteger(n) || n < 1) throw bad(`[[sim:invalid N [LABEL]]] needs N >= 1 (invalid answers before valid ones), got "${arg}"`);
        out.invalid = { key: `invalid ${arg}`, times: n };
        break;
      }
      default:
        throw bad(`unknown directive [[sim:${name}]]; known: tool, tools, length, reply, replies, error, invalid (docs/sim.md)`);
    }
  }
  if (out.replies && out.reply !== undefined) throw bad('[[sim:reply]] and [[sim:replies]] cannot be combined');
  for (const call of out.tools) {
    if (!request.tools.some((t) => t.name === call.name)) {
      const offered = request.tools.map((t) => t.name).join(', ') || 'none';
      throw bad(`[[sim:tool ${call.name}]] names a tool the request does not offer (offered: ${offered})`);
    }
  }
  return out;
}

export interface ReplyContext {
  seed: number;
  /** Identity of the request content (model, tools, system, messages). */
  contentHash: string;
  /** 'toolu_' or 'call_'. */
  toolIdPrefix: string;
}

/** The reply to a request: text, or the tool calls its directives or tool_choice ask for. */
export function planReply(request: SimRequest, directives: Directives, ctx: ReplyContext): SimReply {
  let random = deriveSeed(ctx.seed, ctx.contentHash);
  const draw = (): number => {
    const [value, next] = nextRandom(random);
    random = next;
    return value;
  };

  const calls = chooseCalls(request, directives);
  const last = request.messages[request.messages.length - 1];
  const results = last?.role === 'user' ? last.content.filter((b) => b.type === 'tool_result') : [];

  let text: string;
  if (directives.reply !== undefined) text = directives.reply;
  else if (calls.length > 0 && directives.length === undefined) text = '';
  // Structured output: a value that follows the schema (compact JSON, like a real model's).
  else if (request.outputSchema) text = JSON.stringify(sampleValue(request.outputSchema));
  else {
    // Filler runs about 4.5 characters a token: 6 per asked-for token leaves room to cut.
    const chars = (directives.length ?? 16 + Math.floor(draw() * 48)) * (directives.length !== undefined ? 6 : 4);
    const lead = results.length > 0 ? `Received ${results.length} tool result${results.length === 1 ? '' : 's'}${toolNames(request.messages, results)}. ` : '';
    const full = lead + filler(draw, chars);
    // An asked-for length is met exactly (in tokens); otherwise the reply ends with its last sentence.
    text = directives.length !== undefined ? truncateToTokens(full, directives.length) : full.trimEnd();
  }

  const budget = request.maxTokens;
  const blocks: SimReply['blocks'] = [];
  let used = 0;
  let truncated = false;
  if (text !== '' || calls.length === 0) {
    if (countTokens(text) > budget) {
      text = truncateToTokens(text, budget);
      truncated = true;
    }
    blocks.push({ type: 'text', text });
    used += countTokens(text);
  }
  calls.forEach((call, i) => {
    if (truncated) return;
    const tokens = countTokens(call.name + JSON.stringify(call.input));
    if (used + tokens > budget) {
      truncated = true;
      return;
    }
    used += tokens;
    blocks.push({ type: 'tool_use', id: derivedId(ctx.toolIdPrefix, 24, 'tool', ctx.contentHash, ctx.seed, i), name: call.name, input: call.input });
  });
  const hasTool = blocks.some((b) => b.type === 'tool_use');
  return { blocks, stopReason: truncated ? 'max_tokens' : hasTool ? 'tool_use' : 'end_turn', outputTokens: Math.max(1, used) };
}

function chooseCalls(request: SimRequest, directives: Directives): { name: string; input: unknown }[] {
  const choice = request.toolChoice;
  if (choice.type === 'none' || request.tools.length === 0) return [];
  const byName = (name: string): SimTool => request.tools.find((t) => t.name === name)!;
  let calls = directives.allTools
    ? request.tools.map((t) => ({ name: t.name, input: minimalValue(t.inputSchema) }))
    : directives.tools.map((c) => ({ name: c.name, input: c.input ?? minimalValue(byName(c.name).inputSchema) }));
  if (choice.type === 'tool') {
    calls = calls.filter((c) => c.name === choice.name);
    const forced = request.tools.find((t) => t.name === choice.name);
    if (calls.length === 0 && forced) calls = [{ name: forced.name, input: minimalValue(forced.inputSchema) }];
  } else if (choice.type === 'any' && calls.length === 0) {
    const first = request.tools[0]!;
    calls = [{ name: first.name, input: minimalValue(first.inputSchema) }];
  }
  return calls;
}

/** " from a, b" naming the tools whose results these are, when the previous turn shows them. */
function toolNames(messages: readonly Message[], results: readonly ContentBlock[]): string {
  const ids = new Set(results.map((b) => (b.type === 'tool_result' ? b.toolUseId : '')));
  const names = new Set<string>();
  for (const m of messages) for (const b of m.content) if (b.type === 'tool_use' && ids.has(b.id)) names.add(b.name);
  return names.size > 0 ? ` from ${[...names].join(', ')}` : '';
}

const WORDS = [
  'alpha', 'delta', 'sigma', 'omega', 'kappa', 'lambda', 'theta', 'gamma', 'zeta', 'rho', 'tau', 'phi',
  'the', 'plan', 'task', 'result', 'checks', 'out', 'and', 'then', 'with', 'each', 'step', 'is', 'done',
  'simulated', 'reply', 'notes', 'that', 'a', 'value', 'holds', 'for', 'now', 'so', 'we', 'continue',
];

/** Sentences of pseudo-words, at least `chars` long. */
function filler(draw: () => number, chars: number): string {
  let out = '';
  while (out.length < chars) {
    const n = 4 + Math.floor(draw() * 9);
    const words = Array.from({ length: n }, () => WORDS[Math.floor(draw() * WORDS.length)]!);
    words[0] = words[0]!.charAt(0).toUpperCase() + words[0]!.slice(1);
    out += words.join(' ') + '. ';
  }
  return out;
}

/**
 * The smallest value a JSON Schema accepts, near enough: required properties, minimum sizes,
 * local `$ref`s (`#`, `#/json/pointer`) followed. Built synchronously from a schema the caller
 * sent, so capped as structured-output samples are (MAX_SAMPLE_ITEMS, MAX_SAMPLE_VALUES,
 * MAX_SAMPLE_CHARS, MAX_SAMPLE_DEPTH): past a cap the value is smaller and may fail its check,
 * and a schema that refers to itself ends in `{}`.
 */
export function minimalValue(schema: unknown, depth = 0, left: { values: number } = { values: MAX_SAMPLE_VALUES }, root: unknown = schema): unknown {
  left.values -= 1;
  if (!schema || typeof schema !== 'object' || depth > MAX_SAMPLE_DEPTH) return {};
  const s = schema as Record<string, unknown>;
  const next = (sub: unknown) => minimalValue(sub, depth + 1, left, root);
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if ('default' in s) return s.default;
  if (typeof s.$ref === 'string') return next(localRef(root, s.$ref));
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const options = s[key];
    if (Array.isArray(options) && options.length > 0) return next(options[0]);
  }
  const types = Array.isArray(s.type) ? s.type.filter((t) => t !== 'null') : [s.type];
  const type = types[0] ?? (s.properties ? 'object' : undefined);
  switch (type) {
    case 'string': {
      const min = typeof s.minLength === 'number' ? Math.min(s.minLength, MAX_SAMPLE_CHARS) : 0;
      return 'sim'.padEnd(min, 'x');
    }
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? (type === 'integer' ? Math.ceil(s.minimum) : s.minimum) : typeof s.exclusiveMinimum === 'number' ? Math.floor(s.exclusiveMinimum) + 1 : 0;
    case 'boolean':
      return false;
    case 'null':
      return null;
    case 'array': {
      const n = typeof s.minItems === 'number' ? Math.min(s.minItems, MAX_SAMPLE_ITEMS) : 0;
      const out: unknown[] = [];
      for (let i = 0; i < n && left.values > 0; i++) out.push(next(s.items));
      return out;
    }
    default: {
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      const required = Array.isArray(s.required) ? (s.required as unknown[]) : [];
      const out: Record<string, unknown> = {};
      for (const key of required) {
        if (left.values <= 0) break;
        if (typeof key === 'string') out[key] = next(properties[key]);
      }
      return out;
    }
  }
}

/** The schema a local `$ref` (`#`, `#/$defs/a~1b`) names in the root, or undefined (then `{}`). */
function localRef(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let value = root;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function bad(message: string): SimHttpError {
  return new SimHttpError('invalid_request', `sim: ${message}`);
}

/** The context-window 400 in the protocol's wording. */
export function contextError(request: SimRequest, window: number): SimHttpError {
  return new SimHttpError(
    'context_length',
    request.protocol === 'anthropic'
      ? `prompt is too long: ${request.inputTokens} tokens > ${window} maximum`
      : `This model's maximum context length is ${window} tokens. However, your messages resulted in ${request.inputTokens} tokens. Please reduce the length of the messages.`,
  );
}

/** The error a [[sim:error CODE]] directive asks for. */
export function directiveError(code: ErrorDirective, request: SimRequest, window: number): SimHttpError {
  switch (code) {
    case '400':
      return new SimHttpError('invalid_request', 'sim: [[sim:error 400]] asked for a bad request');
    case '401':
      return new SimHttpError('authentication', 'invalid x-api-key');
    case '429':
      return new SimHttpError('rate_limit', 'sim: [[sim:error 429]] asked for a rate limit', 1000, 'requests');
    case '500':
      return new SimHttpError('api_error', 'Internal server error');
    case '529':
      return new SimHttpError('overloaded', 'Overloaded');
    case 'context':
      return contextError({ ...request, inputTokens: Math.max(request.inputTokens, window + 1) }, window);
  }
}
