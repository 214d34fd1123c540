/** Breaker protocol: agent <-> breaker (systemId `breaker:<provider>/<model>`). */
import type { AnyActorRef } from 'xstate';

/** `neutral`: the call says nothing about the route's health (4xx, 429, cancelled). */
export type BreakerVerdict = 'success' | 'failure' | 'neutral';

export type BreakerEvent =
  | {
      type: 'BREAKER.ADMIT';
      requestId: string;
      replyTo: AnyActorRef;
      /** Sent on to `to` when admitted, instead of BREAKER.ADMITTED: a lease request passes the breaker on its way to the pool. */
      then?: { to: AnyActorRef; event: { type: string } };
      /** Refuse (BREAKER.REFUSED) rather than hold the request while open: the caller has somewhere else to go. */
      unlessOpen?: boolean;
    }
  | { type: 'BREAKER.WITHDRAW'; requestId: string }
  | { type: 'BREAKER.REPORT'; requestId: string; verdict: BreakerVerdict }
  /** Is the route open? Answered at once with BREAKER.STATUS; admits nothing. */
  | { type: 'BREAKER.PEEK'; requestId: string; replyTo: AnyActorRef };

export type BreakerReply =
  | { type: 'BREAKER.ADMITTED'; requestId: string; probe: boolean }
  | { type: 'BREAKER.REFUSED'; requestId: string }
  | { type: 'BREAKER.STATUS'; requestId: string; open: boolean };
