/** Lease protocol: agent <-> pool (systemId `pool:<provider>`) <-> key (child of the pool); the pool <-> the route's breaker in breaker.ts. */
import type { AnyActorRef } from 'xstate';
import type { ErrorInfo, RateLimitHint, Usage } from './data.js';
import type { BreakerVerdict } from './breaker.js';

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
  /**
   * The route (`<provider>/<model>`) of the call: the pool hands the request to that route's
   * breaker, when the route has one, unless it knows the breaker is closed and clean.
   */
  route?: string;
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
  | ({
      type: 'LEASE.REQUEST';
      replyTo: AnyActorRef;
      /** With a route: refused (BREAKER.REFUSED), not held, while its breaker is open (the turn has a fallback). */
      unlessOpen?: boolean;
      /** Set by the pool on the request it handed to the breaker, when the breaker lets it through. */
      admitted?: boolean;
    } & LeaseRequest)
  /** Cancels the request wherever it is: queued, granted but not yet heard of, or held by the breaker. */
  | { type: 'LEASE.CANCEL'; requestId: string }
  /** `verdict`: what the call says of its route, for the route's breaker (the pool passes it on when the route has one and it can change it). */
  | { type: 'LEASE.RELEASE'; leaseId: string; keyId: string; outcome: LeaseOutcome; verdict?: BreakerVerdict };

export type LeaseReply =
  | { type: 'LEASE.GRANTED'; requestId: string; leaseId: string; keyId: string }
  | { type: 'LEASE.DENIED'; requestId: string; error: ErrorInfo };
