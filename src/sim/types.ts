/**
 * Types of the simulated provider server: the public options, server handle and stats first,
 * then the protocol-neutral request and reply shapes the two wire formats are parsed into.
 */
import type { Message } from '../../machines/protocol.js';

/**
 * Per-key limits, each a token bucket that refills continuously over a minute and is enforced
 * over short intervals (`burst`).
 */
export interface SimKeyLimits {
  /** Requests per minute. */
  rpm?: number;
  /** Input tokens per minute (uncached input plus cache writes; cache reads are free). */
  itpm?: number;
  /** Output tokens per minute (charged as max_tokens at the start, settled at the end). */
  otpm?: number;
  /**
   * What each limit lets through at once: the short-interval bucket. Default one second of the
   * rate, at least 1 ("60 RPM may be enforced as 1 request per second").
   */
  burst?: { rpm?: number; itpm?: number; otpm?: number };
}

/** Fault rates in [0, 1], decided per request from hash(seed, request content, times seen). */
export interface SimFaults {
  /** HTTP 500 (`api_error` / `server_error`). */
  http500?: number;
  /** Overloaded: 529 `overloaded_error` on Anthropic, 503 on OpenAI. */
  http529?: number;
  /** The connection is destroyed before any answer. */
  reset?: number;
  /** The request is accepted and never answered until `stallMs`, then the connection is cut. */
  stall?: number;
  /** Streams only: HTTP 200, some content, then an `error` event (Anthropic) or a cut (OpenAI). */
  streamError?: number;
}

export interface SimOptions {
  /** Default 0: an ephemeral port. The host is always 127.0.0.1. */
  port?: number;
  /** Seed of every reply and fault. Default 0. */
  seed?: number;
  /** Accepted secrets and their limits, or 'any' (the default): every key, no limits. */
  keys?: Record<string, SimKeyLimits> | 'any';
  /**
   * Time to first token (fixed, or [min, max] picked per request) and output speed.
   * `prefillMsPer1kTokens` adds prompt processing to the time to first token: that many ms per
   * 1,000 input tokens NOT read from the cache (a cached prefix is not processed again). Default 0.
   */
  latency?: { ttftMs?: number | [number, number]; tokensPerSecond?: number; prefillMsPer1kTokens?: number };
  faults?: SimFaults;
  /** How long a stalled request hangs before its connection is cut. Default 120000. */
  stallMs?: number;
  /** Lifetime of a prompt-cache entry (Anthropic's "5m" entries and OpenAI's). Default 300000. */
  cacheTtlMs?: number;
  /**
   * Anthropic: the shortest prefix a breakpoint caches, in tokens (the API's minimum cacheable
   * length; shorter prefixes are processed uncached, without an error). Default 1024.
   */
  minCacheTokens?: number;
  /** Prompts longer than this many input tokens get a context-length 400. Default 200000. */
  contextWindow?: number;
  /** Time source of the rate-limit buckets, cache TTLs and the request log. Default Date.now. */
  now?: () => number;
  /**
   * Whether the server says anything about its limits. Default true: `anthropic-ratelimit-*` /
   * `x-ratelimit-*` headers on every answer and `retry-after` on a 429. false: neither (many
   * OpenAI-compatible gateways and self-hosted servers): a client learns the limits from its 429s
   * alone. The limits are enforced the same either way.
   */
  headers?: boolean;
}

/** A running simulator. */
export interface SimServer {
  /** `http://127.0.0.1:<port>` (the Anthropic SDK's baseURL; OpenAI's is `${url}/v1`). */
  readonly url: string;
  readonly port: number;
  stats(): SimStats;
  /** Clears the counters and the request log (not the buckets or the cache). */
  resetStats(): void;
  /** Cuts every open connection and stops listening. */
  close(): Promise<void>;
}

export type SimProtocol = 'anthropic' | 'openai';
export type SimFaultKind = keyof SimFaults;

/** One request as the log keeps it. `status` 0: no HTTP answer (reset, stall). */
export interface SimLogEntry {
  /** `now()` when the request arrived. */
  at: number;
  /** sha256 of the key, first 8 hex digits ("none" when no key was sent). */
  key: string;
  protocol: SimProtocol;
  model: string;
  status: number;
  stream: boolean;
  fault?: SimFaultKind;
  retryAfterMs?: number;
  /** The client went away before the answer was complete. */
  aborted?: true;
  /** `now()` when the answer was complete (or the request ended otherwise). */
  endedAt?: number;
  /** The client's `x-swarmstate-call` header: `<task id>;<attempt>;<turn>` (swarmstate's adapters send it). */
  call?: string;
  /** The JSON Schema the request asked its answer to follow (structured outputs), as it came. */
  outputSchema?: Record<string, unknown>;
  /** The tools the request offered (name, description, JSON Schema of the input), as they came. */
  tools?: SimTool[];
}

export interface SimKeyStats {
  requests: number;
  ok: number;
  /** 429s. */
  rateLimited: number;
  /** 401s. */
  unauthorized: number;
  /** Injected faults (SimFaults), whatever their status. */
  faults: number;
}

export interface SimModelStats {
  requests: number;
  ok: number;
  /** Uncached input tokens (Anthropic's input_tokens; OpenAI prompt tokens less cached ones). */
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export interface SimStats {
  requests: number;
  ok: number;
  faults: number;
  /** Requests by HTTP status ("0" for a reset or stall). */
  byStatus: Record<string, number>;
  /** By key fingerprint: never the key. */
  byKey: Record<string, SimKeyStats>;
  byModel: Record<string, SimModelStats>;
  cache: { readRequests: number; writeRequests: number; readTokens: number; writeTokens: number };
  /** Model requests arrived and not yet ended (not in the log yet). */
  inFlight: number;
  /** The most model requests in flight at once since the start or the last `resetStats()`. */
  peakInFlight: number;
  /** The last 100,000 requests, oldest first. */
  log: SimLogEntry[];
}

// ---------------------------------------------------------------------------------------------
// Internal: what a wire format is parsed into
// ---------------------------------------------------------------------------------------------

/** One piece of the prompt in cache order (tools, system, messages), with its token count. */
export interface PromptUnit {
  /** What the piece says, for hashing (kind marker + content). */
  text: string;
  tokens: number;
  /** Set on a piece that carries an Anthropic `cache_control` breakpoint: the entry's TTL. */
  breakpointTtl?: '5m' | '1h';
}

export interface SimTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

export type SimToolChoice = { type: 'auto' } | { type: 'any' } | { type: 'none' } | { type: 'tool'; name: string };

/** A request of either protocol, normalized. */
export interface SimRequest {
  protocol: SimProtocol;
  model: string;
  maxTokens: number;
  stream: boolean;
  /** OpenAI `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Conversation without system messages; tool results are user `tool_result` blocks. */
  messages: Message[];
  tools: SimTool[];
  toolChoice: SimToolChoice;
  units: PromptUnit[];
  /** Sum of the units' tokens. */
  inputTokens: number;
  /** The JSON Schema the answer must follow (structured outputs), when the request asks for one. */
  outputSchema?: Record<string, unknown>;
}

/** The error classes the simulator answers with; each protocol maps them to status and body. */
export type SimErrorKind =
  | 'invalid_request'
  | 'context_length'
  | 'authentication'
  | 'not_found'
  | 'too_large'
  | 'rate_limit'
  | 'api_error'
  | 'overloaded';

/** An error answer in the making. The message must never contain a key. */
export class SimHttpError extends Error {
  override readonly name = 'SimHttpError';
  constructor(
    readonly kind: SimErrorKind,
    message: string,
    readonly retryAfterMs?: number,
    /** For OpenAI's 429 type: which limit was hit. */
    readonly limit?: 'requests' | 'tokens',
  ) {
    super(message);
  }
}

/** The model's answer before it is written in a wire format. */
export interface SimReply {
  blocks: ({ type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown })[];
  stopReason: 'end_turn' | 'tool_use' | 'max_tokens';
  outputTokens: number;
}

/** Token accounting of one answer. `inputTokens` excludes cache reads and writes. */
export interface SimUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  cacheWrite5mTokens: number;
  cacheWrite1hTokens: number;
}

/** A rate-limit bucket as headers report it. */
export interface BucketReport {
  limit: number;
  remaining: number;
  /** ms until the bucket is full again. */
  resetMs: number;
}

export interface RateLimitReport {
  requests?: BucketReport;
  inputTokens?: BucketReport;
  outputTokens?: BucketReport;
}
