/**
 * Bounds on one successful reply, so that a broken or hostile server costs a call a bounded
 * amount of memory and CPU, streamed or not. A reply cannot legitimately be much larger than
 * its `maxTokens` allow, so the stream bounds grow with them:
 *
 * | what                                   | bound                                               |
 * |----------------------------------------|-----------------------------------------------------|
 * | bytes of a streamed body               | 1 MiB + 512 bytes a token of maxTokens, at most 64 MiB |
 * | text of a reply (text, refusal, tool arguments, summed) | 64 Ki + 64 characters a token, at most 16 Mi (the plain-JSON body limit) |
 * | one SSE line, or one event's data      | 8 Mi characters (sse.ts)                            |
 * | content blocks / tool calls            | 1024, indexes 0-1023                                |
 * | a plain (JSON) body                    | 16 MiB (JSON_BODY_LIMIT)                            |
 *
 * Passing one is a malformed response (`server_error`, retried with backoff) that names the
 * bound. Wire bytes get the larger allowance because SSE framing repeats JSON around every few
 * characters of text (an OpenAI chunk is about 200 bytes for one token).
 */
import type { Readable } from 'node:stream';
import type { ModelCallOutput, RateLimitHint } from '../../machines/protocol.js';
import { type CallFacts, jsonObjectOf, malformedResponse } from './classify.js';
import type { ProviderError } from './errors.js';
import { type HttpResponse, JSON_BODY_LIMIT } from './http.js';
import { SSE_MAX_LINE, SseLimitError, SseParser, type SseEvent } from './sse.js';

const MiB = 1024 * 1024;
export const STREAM_BYTES_FLOOR = MiB;
export const STREAM_BYTES_PER_TOKEN = 512;
export const STREAM_BYTES_MAX = 64 * MiB;
export const TEXT_FLOOR = 64 * 1024;
export const TEXT_PER_TOKEN = 64;
/** Content blocks (Anthropic) or tool calls (OpenAI) in one reply. */
export const MAX_REPLY_BLOCKS = 1024;

export interface ReplyLimits {
  /** Bytes of a streamed body. */
  bytes: number;
  /** Characters of text, refusal and tool arguments, summed. */
  text: number;
  /** Content blocks or tool calls; their indexes are 0 to blocks - 1. */
  blocks: number;
  /** One SSE line or one event's data, in characters. */
  line: number;
}

/**
 * The bounds of a reply to a call of `maxTokens`.
 *
 * @example
 * replyLimits(64); // { bytes: 1_081_344, text: 69_632, blocks: 1024, line: 8_388_608 }
 */
export function replyLimits(maxTokens: number): ReplyLimits {
  const tokens = Number.isFinite(maxTokens) && maxTokens > 0 ? maxTokens : 0;
  return {
    bytes: Math.min(STREAM_BYTES_MAX, STREAM_BYTES_FLOOR + tokens * STREAM_BYTES_PER_TOKEN),
    text: Math.min(JSON_BODY_LIMIT, TEXT_FLOOR + tokens * TEXT_PER_TOKEN),
    blocks: MAX_REPLY_BLOCKS,
    line: SSE_MAX_LINE,
  };
}

/**
 * Holds one reply to its limits while an adapter reads it.
 *
 * @example
 * const guard = new ReplyGuard(request.maxTokens, facts, rateLimit);
 * for await (const events of guard.events(response.body, request.signal)) for (const event of events) text += guard.text(delta);
 */
export class ReplyGuard {
  readonly limits: ReplyLimits;
  private textSoFar = 0;

  constructor(
    private readonly maxTokens: number,
    private readonly facts: CallFacts,
    private readonly rateLimit: RateLimitHint | undefined,
  ) {
    this.limits = replyLimits(maxTokens);
  }

  /**
   * The SSE events of a body, within the byte and line bounds, as the chunks complete them: one
   * array a chunk (a whole streamed reply often arrives in one), so the adapter's loop resumes
   * once a chunk rather than through a generator per event. The signal is looked at before each
   * chunk: a server that never stops sending cannot keep a call past its deadline.
   */
  async *events(body: AsyncIterable<Uint8Array>, signal?: AbortSignal): AsyncGenerator<SseEvent[]> {
    const feed = this.feed(signal);
    try {
      for await (const chunk of body) {
        const events = feed.push(chunk);
        if (events.length > 0) yield events;
      }
      const rest = feed.end();
      if (rest.length > 0) yield rest;
    } catch (error) {
      throw this.failureOf(error);
    }
  }

  /**
   * The same events, each handed to `onEvent` as its chunk completes it: what the adapters use.
   * No generator sits between the body and the adapter. A live Node stream (undici's body) is
   * read by its events, not `for await`: its async iterator cost each call a generator, a
   * promise a chunk and end-of-stream bookkeeping of its own (thousands of calls in flight each
   * paid it). Leaving early (a throw, from here or `onEvent`) destroys the body, as a `for await`
   * does; a body that closes before its end fails as `for await` fails it (premature close).
   */
  read(body: AsyncIterable<Uint8Array>, signal: AbortSignal | undefined, onEvent: (event: SseEvent) => void): Promise<void> {
    const feed = this.feed(signal);
    if (!isLiveStream(body)) return this.iterate(body, feed, onEvent);
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (error?: unknown) => {
        if (settled) return;
        settled = true;
        body.off('data', onData).off('end', onEnd).off('close', onClose);
        // After a failure the error listener stays: the body destroyed next (here, or by undici
        // when the call is aborted) still emits 'error', and a stream error nobody listens for is
        // an uncaught exception that takes the process down. A body that ended emits no more.
        if (error === undefined) body.off('error', onError);
        if (error === undefined) resolve();
        else reject(this.failureOf(error));
      };
      const onData = (chunk: Uint8Array) => {
        try {
          for (const event of feed.push(chunk)) onEvent(event);
        } catch (error) {
          settle(error);
          body.destroy();
        }
      };
      const onEnd = () => {
        try {
          for (const event of feed.end()) onEvent(event);
          settle();
        } catch (error) {
          settle(error);
        }
      };
      const onError = (error: unknown) => settle(error);
      const onClose = () => settle(prematureClose());
      body.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    });
  }

  /** `read` over any async iterable (a body that is not a live Node stream). */
  private async iterate(body: AsyncIterable<Uint8Array>, feed: ReturnType<ReplyGuard['feed']>, onEvent: (event: SseEvent) => void): Promise<void> {
    try {
      for await (const chunk of body) for (const event of feed.push(chunk)) onEvent(event);
      for (const event of feed.end()) onEvent(event);
    } catch (error) {
      throw this.failureOf(error);
    }
  }

  /** One body's parse: each chunk after a look at the signal and within the byte bound. */
  private feed(signal: AbortSignal | undefined): { push(chunk: Uint8Array): SseEvent[]; end(): SseEvent[] } {
    const limits = this.limits;
    const parser = new SseParser({ maxLine: limits.line });
    let bytes = 0;
    return {
      push: (chunk) => {
        signal?.throwIfAborted();
        bytes += chunk.byteLength;
        if (bytes > limits.bytes) throw this.fail(`the streamed reply is larger than ${size(limits.bytes)} (${this.bound('bytes')})`);
        return parser.push(chunk);
      },
      end: () => parser.end(),
    };
  }

  /** A line past the parser's bound is the reply's error, with its facts; anything else as it came. */
  private failureOf(error: unknown): unknown {
    return error instanceof SseLimitError ? this.fail(error.message) : error;
  }

  /** Counts a piece of text the reply accumulates; returns it. Throws past the text bound. */
  text(piece: string): string {
    this.textSoFar += piece.length;
    if (this.textSoFar > this.limits.text) {
      throw this.fail(`the reply's text and tool arguments pass ${this.limits.text} characters (${this.bound('text')})`);
    }
    return piece;
  }

  /** Checks a block or tool-call index before the adapter stores anything under it. */
  index(index: unknown, what: string): number {
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= this.limits.blocks) {
      throw this.fail(`${what} index ${String(index).slice(0, 40)} is not an integer from 0 to ${this.limits.blocks - 1} (at most ${this.limits.blocks} in one reply)`);
    }
    return index;
  }

  private bound(kind: 'bytes' | 'text'): string {
    const [floor, per, max] = kind === 'bytes' ? [STREAM_BYTES_FLOOR, STREAM_BYTES_PER_TOKEN, STREAM_BYTES_MAX] : [TEXT_FLOOR, TEXT_PER_TOKEN, JSON_BODY_LIMIT];
    const [show, unit] = kind === 'bytes' ? [size, 'bytes'] : [String, 'characters'];
    return `the bound for maxTokens ${this.maxTokens}: ${show(floor)} + ${per} ${unit} a token, at most ${show(max)}; raise maxTokens if replies this long are expected`;
  }

  private fail(what: string): ProviderError {
    return malformedResponse(this.facts, what, this.rateLimit);
  }
}

/**
 * A plain (non-streamed) reply's body as a JSON object, read up to JSON_BODY_LIMIT bytes.
 *
 * @example
 * const message = await readJsonBody(response, facts, rateLimit);
 */
export async function readJsonBody(response: HttpResponse, facts: CallFacts, rateLimit: RateLimitHint | undefined): Promise<Record<string, unknown>> {
  const { text, complete } = await response.readText(JSON_BODY_LIMIT);
  if (!complete) throw malformedResponse(facts, `the body is larger than ${size(JSON_BODY_LIMIT)} (the limit of a plain reply)`, rateLimit);
  const body = jsonObjectOf(text);
  if (!body) throw malformedResponse(facts, 'the body is not a JSON object', rateLimit);
  return body;
}

/** Longest response id or model name kept (a server's strings are bounded like everything else it sends). */
const RESPONSE_FACT_MAX = 256;

/**
 * A reply's id, the model that answered and (an AI SDK model's `provider`, e.g.
 * `anthropic.messages`) who served it, where the server or model said them as strings
 * (OpenTelemetry's `gen_ai.response.*` and `gen_ai.provider.name`).
 */
export function responseFacts(id: unknown, model: unknown, provider?: unknown): ModelResponseFacts | undefined {
  const out: ModelResponseFacts = {};
  if (typeof id === 'string' && id !== '') out.id = id.slice(0, RESPONSE_FACT_MAX);
  if (typeof model === 'string' && model !== '') out.model = model.slice(0, RESPONSE_FACT_MAX);
  if (typeof provider === 'string' && provider !== '') out.provider = provider.slice(0, RESPONSE_FACT_MAX);
  return Object.keys(out).length > 0 ? out : undefined;
}

type ModelResponseFacts = NonNullable<ModelCallOutput['response']>;

type LiveStream = AsyncIterable<Uint8Array> & Pick<Readable, 'on' | 'off' | 'destroy' | 'destroyed'>;

/** A Node readable not yet ended or destroyed (one that is goes the `for await` way, which reports it as before). */
function isLiveStream(body: AsyncIterable<Uint8Array>): body is LiveStream {
  const b = body as Partial<Readable>;
  return typeof b.on === 'function' && typeof b.off === 'function' && typeof b.destroy === 'function' && b.destroyed === false && b.readableEnded === false && b.readableFlowing !== true;
}

/** What `for await` throws for a stream closed before its end (the code classify.ts reads as `network`). */
function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

function size(bytes: number): string {
  return bytes >= MiB ? `${Math.round((bytes / MiB) * 100) / 100} MiB` : `${bytes} bytes`;
}
