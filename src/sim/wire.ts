/**
 * What both wire formats share: the contract a protocol module implements, request validation
 * helpers, prompt units (the token counts every limit and usage figure comes from) and the
 * tool_use / tool_result pairing rule both APIs enforce.
 */
import type { ContentBlock, Message } from '../../machines/protocol.js';
import { countTokens } from './tokenizer.js';
import type { CachePlan, PromptCache } from './cache.js';
import { SimHttpError, type PromptUnit, type RateLimitReport, type SimProtocol, type SimReply, type SimRequest, type SimTool, type SimUsage } from './types.js';

/** Per-message framing the APIs add. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** Facts of one answer every format needs. */
export interface ReplyMeta {
  id: string;
  model: string;
  /** Unix seconds. */
  created: number;
}

/** A stream as frames: pacing applies to `body`; a mid-stream fault strikes inside it. */
export interface StreamPlan {
  /** Sent with the headers, before time to first token. */
  head: string;
  body: { text: string; tokens: number }[];
  tail: string;
  /** Written before ending a faulted stream; null: the connection is cut instead. */
  faultFrame: string | null;
}

/** One wire protocol: parsing, answers, errors and headers. */
export interface WireProtocol {
  readonly name: SimProtocol;
  readonly toolIdPrefix: string;
  readonly messageIdPrefix: string;
  readonly requestIdHeader: string;
  /** @throws SimHttpError for a request the API would refuse with a 400. */
  parse(body: unknown): SimRequest;
  planCache(cache: PromptCache, request: SimRequest): CachePlan;
  /** Whether cache writes are billed apart from input (Anthropic) or as input (OpenAI). */
  readonly billsCacheWrites: boolean;
  error(error: SimHttpError, requestId: string): { status: number; body: unknown };
  rateLimitHeaders(report: RateLimitReport, now: number): Record<string, string>;
  message(reply: SimReply, usage: SimUsage, meta: ReplyMeta): unknown;
  stream(reply: SimReply, usage: SimUsage, meta: ReplyMeta, includeUsage: boolean): StreamPlan;
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

export function invalid(message: string): SimHttpError {
  return new SimHttpError('invalid_request', message);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function requireRecord(value: unknown, path: string): Record<string, unknown> {
  if (!isRecord(value)) throw invalid(`${path}: expected an object`);
  return value;
}

export function requireString(value: unknown, path: string, nonEmpty = false): string {
  if (typeof value !== 'string' || (nonEmpty && value === '')) throw invalid(`${path}: ${nonEmpty ? 'a non-empty string is required' : 'expected a string'}`);
  return value;
}

export function optionalPositiveInt(value: unknown, path: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw invalid(`${path}: expected an integer >= 1`);
  return value;
}

/**
 * The sampling fields, checked as the real APIs check them (the simulator's answers do not depend
 * on them): `temperature` (0-1 on Anthropic, 0-2 on OpenAI), `top_p` (0-1), and
 * `stop_sequences` (Anthropic: strings) or `stop` (OpenAI: a string or at most 4).
 */
export function checkSampling(body: Record<string, unknown>, protocol: 'anthropic' | 'openai'): void {
  const inRange = (value: unknown, path: string, max: number) => {
    if (value === undefined || value === null) return;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > max) throw invalid(`${path}: expected a number from 0 to ${max}`);
  };
  inRange(body.temperature, 'temperature', protocol === 'anthropic' ? 1 : 2);
  inRange(body.top_p, 'top_p', 1);
  const stops = protocol === 'anthropic' ? body.stop_sequences : body.stop;
  const path = protocol === 'anthropic' ? 'stop_sequences' : 'stop';
  if (stops === undefined || stops === null || (protocol === 'openai' && typeof stops === 'string')) return;
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string')) throw invalid(`${path}: expected a list of strings`);
  if (protocol === 'openai' && stops.length > 4) throw invalid(`${path}: at most 4 sequences`);
}

export function optionalBoolean(value: unknown, path: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw invalid(`${path}: expected a boolean`);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Prompt units: counted by a real tokenizer (./tokenizer.ts), one unit per tool, system part and block
// ---------------------------------------------------------------------------------------------

export function toolUnit(tool: SimTool): PromptUnit {
  const text = tool.name + (tool.description ?? '') + JSON.stringify(tool.inputSchema);
  return { text: `\u0000tool${text}`, tokens: countTokens(text) };
}

export function systemUnit(text: string): PromptUnit {
  return { text: `\u0000system${text}`, tokens: countTokens(text) };
}

/** The role marker of a message: carries the per-message overhead. */
export function messageUnit(role: string): PromptUnit {
  return { text: `\u0000${role}`, tokens: MESSAGE_OVERHEAD_TOKENS };
}

export function blockUnit(block: ContentBlock): PromptUnit {
  const text =
    block.type === 'text' ? block.text : block.type === 'tool_use' ? block.name + JSON.stringify(block.input ?? null) : block.content;
  const tag = block.type === 'tool_use' ? `${block.type}${block.id}` : block.type === 'tool_result' ? `${block.type}${block.toolUseId}${block.isError ? '!' : ''}` : block.type;
  return { text: `\u0000${tag}\u0000${text}`, tokens: countTokens(text) };
}

export function sumTokens(units: readonly PromptUnit[]): number {
  let total = 0;
  for (const unit of units) total += unit.tokens;
  return total;
}

export type PairingProblem =
  | { kind: 'missing_results'; index: number; ids: string[] }
  | { kind: 'orphan_results'; index: number; ids: string[] };

/**
 * Every tool_use of an assistant turn needs a tool_result in the next message, and every
 * tool_result needs a tool_use in the turn before: both APIs refuse anything else with a 400.
 */
export function checkToolPairing(messages: readonly Message[]): PairingProblem | undefined {
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (message.role === 'assistant') {
      const uses = message.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
      if (uses.length === 0) continue;
      const next = messages[i + 1];
      const answered = new Set(next?.role === 'user' ? next.content.flatMap((b) => (b.type === 'tool_result' ? [b.toolUseId] : [])) : []);
      const missing = uses.filter((id) => !answered.has(id));
      if (missing.length > 0) return { kind: 'missing_results', index: i, ids: missing };
    } else {
      const results = message.content.flatMap((b) => (b.type === 'tool_result' ? [b.toolUseId] : []));
      if (results.length === 0) continue;
      const previous = messages[i - 1];
      const asked = new Set(previous?.role === 'assistant' ? previous.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : [])) : []);
      const orphans = results.filter((id) => !asked.has(id));
      if (orphans.length > 0) return { kind: 'orphan_results', index: i, ids: orphans };
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

/** Pieces of about 5 tokens, fewer and larger for long texts (at most ~200 a block). */
export function pieces(text: string): string[] {
  if (text === '') return [];
  const size = Math.max(20, Math.ceil(text.length / 200));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** An SSE frame with an event name (Anthropic) or without (OpenAI). */
export function sseFrame(data: unknown, event?: string): string {
  const json = typeof data === 'string' ? data : JSON.stringify(data);
  return event ? `event: ${event}\ndata: ${json}\n\n` : `data: ${json}\n\n`;
}

const PIECE_MARK = '\u0000sim:piece\u0000';
const PIECE_MARK_JSON = JSON.stringify(PIECE_MARK);

/**
 * A stream's delta frames differ only in their piece of text: `frameOf(piece)` must equal
 * `build(piece)`, for the cost of one JSON.stringify of the piece instead of the whole frame. The
 * frame is built once around a marker and cut there (or built each time, should the marker occur
 * elsewhere in the frame).
 */
export function pieceFramer(build: (piece: string) => string): (piece: string) => string {
  const parts = build(PIECE_MARK).split(PIECE_MARK_JSON);
  if (parts.length !== 2) return build;
  const [before, after] = parts as [string, string];
  return (piece) => before + JSON.stringify(piece) + after;
}
