/** Breaker protocol: agent <-> breaker (systemId `breaker:<provider>/<model>`). */
import type { AnyActorRef } from 'xstate';

/** `neutral`: the call says nothing about the route's health (4xx, 429, cancelled). */
export type BreakerVerdict = 'success' | 'failure' | 'neutral';

export type BreakerEvent =
  | { type: 'BREAKER.ADMIT'; requestId: string; replyTo: AnyActorRef }
  | { type: 'BREAKER.WITHDRAW'; requestId: string }
  | { type: 'BREAKER.REPORT'; requestId: string; verdict: BreakerVerdict };

export type BreakerReply = { type: 'BREAKER.ADMITTED'; requestId: string; probe: boolean };
