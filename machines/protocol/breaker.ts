/**
 * Breaker protocol: pool <-> breaker (systemId `breaker:<provider>/<model>`), and agent <-> breaker
 * for PEEK. Agents send their lease requests and outcomes to the pool, which is the breaker's front
 * desk: it hands a request to the breaker (BREAKER.ADMIT) unless it knows the route is closed and
 * clean, and passes on an outcome (BREAKER.REPORT) only when it can change the breaker.
 */
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
  /** `seq`: the pool's count of reports it passed on for this route (echoed in BREAKER.STATE). */
  | { type: 'BREAKER.REPORT'; requestId: string; verdict: BreakerVerdict; seq?: number }
  /** Is the route open? Answered at once with BREAKER.STATUS; admits nothing. */
  | { type: 'BREAKER.PEEK'; requestId: string; replyTo: AnyActorRef };

/**
 * The breaker's news to its pool (`pool:<provider>`), sent at its start and whenever `clear`
 * changes: `clear` is "closed with no failure counted", the one state in which the pool may let a
 * request through and drop a success or neutral outcome without asking. `heard`: the `seq` of the
 * last report the breaker had processed when it said so (0: none).
 */
export type BreakerNews = { type: 'BREAKER.STATE'; route: string; clear: boolean; heard: number };

export type BreakerReply =
  | { type: 'BREAKER.ADMITTED'; requestId: string; probe: boolean }
  | { type: 'BREAKER.REFUSED'; requestId: string }
  | { type: 'BREAKER.STATUS'; requestId: string; open: boolean };
