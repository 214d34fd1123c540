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
  }

  toJSON(): ErrorInfo {
    const info: ErrorInfo = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.retryAfterMs !== undefined) info.retryAfterMs = this.retryAfterMs;
    if (this.status !== undefined) info.status = this.status;
    if (this.provider !== undefined) info.provider = this.provider;
    if (this.model !== undefined) info.model = this.model;
    if (this.keyId !== undefined) info.keyId = this.keyId;
    if (this.rateLimit !== undefined) info.rateLimit = this.rateLimit;
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
  const message = error instanceof Error ? error.message : String(error);
  return new ProviderError('internal', `provider adapter failed: ${message}`, { ...facts, retryable: false });
}

function stripUndefined(info: ErrorInfo): ProviderErrorFacts {
  const out: ProviderErrorFacts = { retryable: info.retryable };
  if (info.provider !== undefined) out.provider = info.provider;
  if (info.model !== undefined) out.model = info.model;
  if (info.keyId !== undefined) out.keyId = info.keyId;
  if (info.status !== undefined) out.status = info.status;
  if (info.retryAfterMs !== undefined) out.retryAfterMs = info.retryAfterMs;
  if (info.rateLimit !== undefined) out.rateLimit = info.rateLimit;
  return out;
}
