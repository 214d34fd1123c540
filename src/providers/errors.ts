/**
 * Provider errors: one class with a stable `code` from the error classes in
 * docs/architecture.md, and the facts (provider, model, key id, status, server message), never
 * a secret. The machines read `code`, `retryable` and `retryAfterMs`; people read `message`.
 */
import type { ErrorCode, ErrorInfo, RateLimitHint } from '../../machines/protocol.js';

const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['rate_limited', 'overloaded', 'server_error', 'timeout', 'network', 'auth']);

export interface ProviderErrorFacts {
  provider?: string;
  model?: string;
  keyId?: string;
  status?: number;
  retryAfterMs?: number;
  /** Rate-limit headers of the error response. */
  rateLimit?: RateLimitHint;
  /** Overrides the default for the code. */
  retryable?: boolean;
  /** The request never left: the connection failed before it was sent (not billed). */
  unsent?: boolean;
}

export class ProviderError extends Error implements ErrorInfo {
  override readonly name = 'ProviderError';
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly status?: number;
  readonly provider?: string;
  readonly model?: string;
  readonly keyId?: string;
  readonly rateLimit?: RateLimitHint;
  readonly unsent?: boolean;

  constructor(code: ErrorCode, message: string, facts: ProviderErrorFacts = {}) {
    super(message);
    this.code = code;
    this.retryable = facts.retryable ?? RETRYABLE.has(code);
    if (facts.retryAfterMs !== undefined) this.retryAfterMs = facts.retryAfterMs;
    if (facts.status !== undefined) this.status = facts.status;
    if (facts.provider !== undefined) this.provider = facts.provider;
    if (facts.model !== undefined) this.model = facts.model;
    if (facts.keyId !== undefined) this.keyId = facts.keyId;
    if (facts.rateLimit !== undefined) this.rateLimit = facts.rateLimit;
    if (facts.unsent === true) this.unsent = true;
  }

  toJSON(): ErrorInfo {
    const info: ErrorInfo = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.retryAfterMs !== undefined) info.retryAfterMs = this.retryAfterMs;
    if (this.status !== undefined) info.status = this.status;
    if (this.provider !== undefined) info.provider = this.provider;
    if (this.model !== undefined) info.model = this.model;
    if (this.keyId !== undefined) info.keyId = this.keyId;
    if (this.rateLimit !== undefined) info.rateLimit = this.rateLimit;
    if (this.unsent === true) info.unsent = true;
    return info;
  }
}

/** Anything thrown by an adapter, as a ProviderError that carries the call's facts. */
export function asProviderError(error: unknown, facts: ProviderErrorFacts): ProviderError {
  if (error instanceof ProviderError) {
    return new ProviderError(error.code, error.message, { ...facts, ...stripUndefined(error.toJSON()) });
  }
  if (error && typeof error === 'object' && (error as { name?: string }).name === 'AbortError') {
    return new ProviderError('cancelled', 'the call was aborted', { ...facts, retryable: false });
  }
  return new ProviderError('internal', `provider adapter failed: ${thrownMessage(error)}`, { ...facts, retryable: false });
}

/** How much of what was thrown a message shows. */
const MAX_THROWN_CHARS = 500;

/**
 * What was thrown, as a message can say it: an Error's message, a string, an object's `message`,
 * else the object as JSON (a thrown `{ status, detail }` says what it holds, not `[object
 * Object]`); at most MAX_THROWN_CHARS characters.
 *
 * @example
 * thrownMessage({ status: 'nope' }); // '{"status":"nope"}'
 */
export function thrownMessage(error: unknown): string {
  let text: string;
  if (error instanceof Error) text = error.message || error.name;
  else if (typeof error === 'string') text = error;
  else if (error !== null && typeof error === 'object') {
    const message = (error as { message?: unknown }).message;
    text = typeof message === 'string' && message !== '' ? message : jsonOf(error);
  } else text = String(error);
  return text.length > MAX_THROWN_CHARS ? `${text.slice(0, MAX_THROWN_CHARS)}…` : text;
}

function jsonOf(value: object): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    // A cycle, a BigInt, a getter that throws: its class name at least.
    return `a thrown ${value.constructor?.name ?? 'object'} that cannot be shown as JSON`;
  }
}

function stripUndefined(info: ErrorInfo): ProviderErrorFacts {
  const out: ProviderErrorFacts = { retryable: info.retryable };
  if (info.provider !== undefined) out.provider = info.provider;
  if (info.model !== undefined) out.model = info.model;
  if (info.keyId !== undefined) out.keyId = info.keyId;
  if (info.status !== undefined) out.status = info.status;
  if (info.retryAfterMs !== undefined) out.retryAfterMs = info.retryAfterMs;
  if (info.rateLimit !== undefined) out.rateLimit = info.rateLimit;
  if (info.unsent === true) out.unsent = true;
  return out;
}
