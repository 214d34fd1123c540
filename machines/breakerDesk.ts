/**
 * The pool as its routes' breakers' front desk: what the pool believes of each breaker, and the
 * requests it handed to one and has not had back. Mutable, part of the pool's book (never copied).
 *
 * A breaker tells its pool BREAKER.STATE when `clear` (closed, no failure counted) changes. While
 * the pool believes a route clear it lets the route's requests through itself (what the closed
 * breaker would do with them) and keeps the outcomes that cannot change it (a success or a neutral:
 * with no failure counted there is nothing to reset). Otherwise a request goes to the breaker as
 * BREAKER.ADMIT, which comes back through the pool as the request `admitted`, and every outcome
 * is passed on (the half-open probe's among them).
 *
 * Why the belief is never too optimistic: a breaker stops being clear only by counting a failure,
 * and every outcome reaches it through this pool, which counts what it passes on (`seq`) and
 * notes the last failure. News of `clear` counts only if the breaker had heard that failure when
 * it said so; until news that recent comes, the route is not clear. So when the pool lets a
 * request through, the breaker is closed with no failure counted, or will be once it processed
 * outcomes the pool passed on after the request; the latter is the race that exists without the
 * pool in between too (a closed breaker passing an ADMIT on just before a failure opens it). A
 * route the pool has no news of yet is not clear: its requests go through the breaker, as before.
 */
import type { AnyActorRef, EventObject } from 'xstate';
import type { BreakerEvent, BreakerNews, BreakerReply, BreakerVerdict, LeaseEvent } from './protocol.js';

/** What the pool's handlers need of the actor: itself (admitted requests come back to it) and the system (the breakers). */
export interface Env {
  self: AnyActorRef;
  system: { get(id: string): AnyActorRef | undefined };
}

/** The pool's list of messages to send, in order. */
type Out = { to: AnyActorRef | string; event: EventObject }[];

type Request = Extract<LeaseEvent, { type: 'LEASE.REQUEST' }>;

const breakerOf = (env: Env, route: string) => env.system.get(`breaker:${route}`);

interface RouteView {
  /** The last news said clear. */
  clear: boolean;
  /** The news' `heard`. */
  heard: number;
  /** Outcomes passed on to this route's breaker. */
  seq: number;
  /** The `seq` of the last failure passed on (0: none). */
  lastFailure: number;
}

export class BreakerDesk {
  private readonly routes = new Map<string, RouteView>();
  /** Requests handed to a breaker and not back yet (admitted or refused): whose, and which breaker. */
  private readonly away = new Map<string, { replyTo: AnyActorRef; route: string }>();

  private view(route: string): RouteView {
    let view = this.routes.get(route);
    if (view === undefined) this.routes.set(route, (view = { clear: false, heard: 0, seq: 0, lastFailure: 0 }));
    return view;
  }

  /** The breaker is closed with no failure counted, news of it is current: a request may pass, a success need not be told. */
  isClear(route: string): boolean {
    const view = this.routes.get(route);
    return view !== undefined && view.clear && view.heard >= view.lastFailure;
  }

  note(news: BreakerNews): void {
    const view = this.view(news.route);
    view.clear = news.clear;
    view.heard = news.heard;
  }

  /** Whether an outcome can change the route's breaker: a failure always; anything while it is not clear. */
  tells(route: string, verdict: BreakerVerdict): boolean {
    return verdict === 'failure' || !this.isClear(route);
  }

  /** The `seq` of an outcome passed on now. */
  passOn(route: string, verdict: BreakerVerdict): number {
    const view = this.view(route);
    view.seq++;
    if (verdict === 'failure') view.lastFailure = view.seq;
    return view.seq;
  }

  /** Requests at a breaker now (held by it, or on their way back). */
  get awaySize(): number {
    return this.away.size;
  }

  /**
   * Whether a request is not the pool's to book now: one whose route's breaker must see it first
   * (handed to it as BREAKER.ADMIT, to come back `admitted`), or one back from the breaker that
   * was cancelled meanwhile (the breaker was told). A route with no breaker actor is unguarded.
   * `booked`: the pool already has this request (a duplicate: the first one stands).
   */
  holds(event: Request, booked: boolean, out: Out, env: Env): boolean {
    if (event.admitted === true) return !this.away.delete(event.requestId);
    if (event.route === undefined || this.isClear(event.route)) return false;
    const breaker = breakerOf(env, event.route);
    if (breaker === undefined) return false;
    if (booked || this.away.has(event.requestId)) return true;
    this.away.set(event.requestId, { replyTo: event.replyTo, route: event.route });
    const { unlessOpen, ...request } = event;
    const admitted: Request = { ...request, admitted: true };
    const admit: Extract<BreakerEvent, { type: 'BREAKER.ADMIT' }> = { type: 'BREAKER.ADMIT', requestId: event.requestId, replyTo: env.self, then: { to: env.self, event: admitted } };
    if (unlessOpen === true) admit.unlessOpen = true;
    out.push({ to: breaker, event: admit });
    return true;
  }

  /** A call's outcome, passed on to its route's breaker when it can change it. */
  report(route: string, requestId: string, verdict: BreakerVerdict, out: Out, env: Env): void {
    if (!this.tells(route, verdict)) return;
    const breaker = breakerOf(env, route);
    if (breaker === undefined) return;
    const report: BreakerEvent = { type: 'BREAKER.REPORT', requestId, verdict, seq: this.passOn(route, verdict) };
    out.push({ to: breaker, event: report });
  }

  /** A cancelled request the breaker let through may be its half-open probe (or one it holds): it hears of the cancel. */
  withdraw(route: string, requestId: string, out: Out, env: Env): void {
    const breaker = breakerOf(env, route);
    const event: BreakerEvent = { type: 'BREAKER.WITHDRAW', requestId };
    if (breaker !== undefined) out.push({ to: breaker, event });
  }

  /** A cancel of a request at the breaker: withdrawn there; if it comes back, nobody waits for it. False: not here. */
  cancel(requestId: string, out: Out, env: Env): boolean {
    const away = this.away.get(requestId);
    if (away === undefined) return false;
    this.away.delete(requestId);
    this.withdraw(away.route, requestId, out, env);
    return true;
  }

  /** The breaker refused a request that asked to be refused rather than held (it is open): its agent hears it. */
  refused(requestId: string, out: Out): void {
    const away = this.away.get(requestId);
    if (away === undefined) return; // cancelled since
    this.away.delete(requestId);
    const refusal: BreakerReply = { type: 'BREAKER.REFUSED', requestId };
    out.push({ to: away.replyTo, event: refusal });
  }
}
