/** Lease protocol: agent <-> pool (systemId `pool:<provider>`) <-> key (child of the pool). */
import type { AnyActorRef } from 'xstate';
import type { ErrorInfo, RateLimitHint, Usage } from './data.js';

export interface LeaseRequest {
  requestId: string;
  /** Higher first; ties FIFO. */
  priority: number;
  /** Estimated input tokens of the call (charged to itpm at grant, settled at release). */
  inputTokens: number;
  /** maxTokens of the call (charged to otpm at grant, settled at release). */
  outputTokens: number;
  /**
   * The requesting attempt's deadline (system clock, ms). When every live key is backing off past
   * it, the pool denies at once (`rate_limited`) instead of letting the attempt wait to its end.
   */
  deadline?: number;
}

/** How a lease ended: tells the key what happened on it. */
export type LeaseOutcome =
  /**
   * `sentAt`: when the request really left, if later than the grant (a distributed run's call
   * waits in a queue for a worker): the key takes back the refill it counted in between.
   */
  | { kind: 'ok'; usage: Usage; rateLimit?: RateLimitHint; sentAt?: number }
  | { kind: 'rate_limited'; retryAfterMs?: number; rateLimit?: RateLimitHint }
  | { kind: 'auth' }
  | { kind: 'error'; usage?: Usage; rateLimit?: RateLimitHint }
  /** The lease was not used for a request (cancelled before the call): its request slot is refunded. */
  | { kind: 'unused' };

export type LeaseEvent =
  | ({ type: 'LEASE.REQUEST'; replyTo: AnyActorRef } & LeaseRequest)
  | { type: 'LEASE.CANCEL'; requestId: string }
  | { type: 'LEASE.RELEASE'; leaseId: string; keyId: string; outcome: LeaseOutcome };

export type LeaseReply =
  | { type: 'LEASE.GRANTED'; requestId: string; leaseId: string; keyId: string }
  | { type: 'LEASE.DENIED'; requestId: string; error: ErrorInfo };
