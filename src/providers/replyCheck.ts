/**
 * The one check of a model's reply, whatever made it: an HTTP adapter, an AI SDK model, a custom
 * provider's own code, a worker's job. Every reply goes through it at the run's boundary
 * (src/run/effects.ts) before any machine reads it, so a reply the machines cannot trust (a count
 * that is not a number, a cost without bound, content of the wrong shape) is a provider error,
 * never a completed task or an unbounded spend. Beside replyLimits.ts, whose bounds it reuses:
 *
 * | what                      | a reply is malformed when                                         |
 * |---------------------------|-------------------------------------------------------------------|
 * | the reply                 | not a plain object                                                |
 * | content                   | not an array, more than MAX_REPLY_BLOCKS blocks, a block that is not `text` (a string `text`) or `tool_use` (string `id` and `name`, an `input`) |
 * | text                      | more characters, summed, than replyLimits(maxTokens).text         |
 * | stopReason                | not one of the StopReason values                                  |
 * | usage                     | missing; a count that is not a finite number, is negative, or is above MAX_CALL_TOKENS; the input counts summed above MAX_CALL_TOKENS |
 * | rateLimit, sentAt         | present and not an object / not a finite number                   |
 *
 * A malformed reply is `server_error` (retried with backoff, as a malformed HTTP body is); a call
 * that got one may have been billed, so a budget charges it its worst case (machines/agent/settle.ts).
 */
import type { ContentBlock, ModelCallOutput, StopReason, Usage } from '../../machines/protocol.js';
import { type CallFacts, malformedResponse } from './classify.js';
import type { ProviderError } from './errors.js';
import { MAX_REPLY_BLOCKS, replyLimits, responseFacts } from './replyLimits.js';

/**
 * The most tokens one call can read or write: five times the largest context window of any
 * model offered today (2 million). A count above it is not a count, and priced it would make a
 * cost no budget could hold.
 */
export const MAX_CALL_TOKENS = 10_000_000;

const STOP_REASONS: ReadonlySet<string> = new Set<StopReason>(['end_turn', 'tool_use', 'max_tokens', 'stop_sequence', 'refusal', 'other']);
const USAGE_FIELDS = ['inputTokens', 'outputTokens', 'cacheWriteTokens', 'cacheReadTokens'] as const;

/**
 * What is wrong with one token count (`path` names it), or undefined when it is a count: a
 * finite number from 0 to MAX_CALL_TOKENS.
 *
 * @example
 * tokenCountProblem(Number.NaN, 'usage.inputTokens'); // 'usage.inputTokens is NaN, not a token count'
 */
export function tokenCountProblem(value: unknown, path: string): string | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value)) return `${path} is ${shownValue(value)}, not a token count`;
  if (value < 0) return `${path} is ${shownValue(value)}, below 0`;
  if (value > MAX_CALL_TOKENS) return `${path} is ${shownValue(value)}, above ${MAX_CALL_TOKENS} (no model reads or writes that many tokens in one call)`;
  return undefined;
}

/**
 * The reply as the machines may read it, or a ProviderError (`server_error`, "malformed
 * response") naming the first thing wrong. The result is a new object holding only the fields of
 * a reply (a provider cannot slip in a `verdict` of its own); its blocks are the reply's own.
 *
 * @example
 * checkReply({ content: 'hi', stopReason: 'end_turn', usage }, 100, facts); // throws: content is not an array
 */
export function checkReply(reply: unknown, maxTokens: number, facts: CallFacts): ModelCallOutput {
  const fail = (what: string): ProviderError => malformedResponse(facts, what);
  if (!isPlainObject(reply)) throw fail(`the reply is ${shownValue(reply)}, not an object`);
  const content = checkContent(reply.content, maxTokens, fail);
  if (typeof reply.stopReason !== 'string' || !STOP_REASONS.has(reply.stopReason)) throw fail(`stopReason is ${shownValue(reply.stopReason)}, not one of ${[...STOP_REASONS].join(', ')}`);
  const out: ModelCallOutput = { content, stopReason: reply.stopReason as StopReason, usage: checkUsage(reply.usage, fail) };
  if (reply.rateLimit !== undefined) {
    if (!isPlainObject(reply.rateLimit)) throw fail(`rateLimit is ${shownValue(reply.rateLimit)}, not an object`);
    out.rateLimit = reply.rateLimit;
  }
  if (reply.sentAt !== undefined) {
    if (typeof reply.sentAt !== 'number' || !Number.isFinite(reply.sentAt)) throw fail(`sentAt is ${shownValue(reply.sentAt)}, not a time`);
    out.sentAt = reply.sentAt;
  }
  // What the provider said of its response (strings only, bounded): the GenAI span attributes read it.
  if (isPlainObject(reply.response)) {
    const response = responseFacts(reply.response.id, reply.response.model, reply.response.provider);
    if (response) out.response = response;
  }
  return out;
}

function checkContent(content: unknown, maxTokens: number, fail: (what: string) => ProviderError): ContentBlock[] {
  if (!Array.isArray(content)) throw fail(`content is not an array (it is ${shownValue(content)})`);
  if (content.length > MAX_REPLY_BLOCKS) throw fail(`content has ${content.length} blocks (at most ${MAX_REPLY_BLOCKS} in one reply)`);
  const textBound = replyLimits(maxTokens).text;
  let text = 0;
  content.forEach((block: unknown, i) => {
    const at = `content[${i}]`;
    if (!isPlainObject(block)) throw fail(`${at} is ${shownValue(block)}, not a block`);
    if (block.type === 'text') {
      if (typeof block.text !== 'string') throw fail(`${at}.text is ${block.text === undefined ? 'missing' : shownValue(block.text)}, not a string`);
      text += block.text.length;
      if (text > textBound) throw fail(`the reply's text passes ${textBound} characters (the bound for maxTokens ${maxTokens})`);
    } else if (block.type === 'tool_use') {
      for (const field of ['id', 'name'] as const) {
        if (typeof block[field] !== 'string' || block[field] === '') throw fail(`${at}.${field} is ${block[field] === undefined ? 'missing' : shownValue(block[field])}, not a name`);
      }
      if (block.input === undefined) throw fail(`${at}.input is missing (a tool call's arguments)`);
    } else throw fail(`${at}.type is ${shownValue(block.type)}: a reply holds "text" and "tool_use" blocks`);
  });
  return content as ContentBlock[];
}

function checkUsage(usage: unknown, fail: (what: string) => ProviderError): Usage {
  if (usage === undefined || usage === null) throw fail('usage is missing (every reply says what it used)');
  if (!isPlainObject(usage)) throw fail(`usage is ${shownValue(usage)}, not an object`);
  const out = {} as Usage;
  for (const field of USAGE_FIELDS) {
    const problem = tokenCountProblem(usage[field], `usage.${field}`);
    if (problem) throw fail(problem);
    out[field] = usage[field] as number;
  }
  const input = out.inputTokens + out.cacheReadTokens + out.cacheWriteTokens;
  if (input > MAX_CALL_TOKENS) throw fail(`the input counts of usage sum to ${input}, above ${MAX_CALL_TOKENS} (no model reads that many tokens in one call)`);
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A value as a message names it: short, and never more than a few dozen characters of it. */
export function shownValue(value: unknown): string {
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : String(value);
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return value === null ? 'null' : 'an object';
  return typeof value === 'bigint' ? `${value}n` : typeof value;
}
