/**
 * One actor per API key: knows the key's limits and what is out on it, and tells its parent (the
 * pool of its provider) whether it can take a request now.
 *
 *   ready ──grant fills it──▶ saturated ──clock refills / release──▶ ready
 *     │  ╲                        │
 *     │   ╲── 429 ──▶ backoff ◀───┘ (a 429 during backoff extends it)
 *     │               │ Retry-After passed ──▶ ready | saturated
 *     ├── 401/403 ──▶ revoked (final)
 *     └── nothing but 429s for maxRateLimitedMs ──▶ setAside (from any state but revoked)
 *
 * A key that meets only 429s would otherwise be tried for ever: each attempt on it would wait out
 * its deadline. Its first 429 after any other answer starts a timer of `maxRateLimitedMs`; any
 * other answer (a success, an error) stops it. When it fires while the key is refusing (backing
 * off, or with leases out), the key is set aside for good (`key:set-aside`). Ready or paced with
 * nothing out, it is not known to be refused by anyone (it may have no work): its next answer
 * decides, a 429 setting it aside at once. A key set aside refuses every grant (the pool learns
 * it from `KEY.STATE` and sends it nothing more).
 *
 * The key never decides by itself to take work: the pool sends `KEY.GRANT` only while the key
 * said `ready`, and at most `room` of them (the requests of the likely size the key can take one
 * after another) before it hears from the key again. The key answers a grant it accepts to the
 * agent itself (`LEASE.GRANTED` to the request's `replyTo`) and one it refuses to the pool
 * (`KEY.REJECTED`: its `ready` went stale; the request goes back to its place in the queue).
 *
 * What the key tells the pool, and when: its state when it changes (`KEY.STATE`, with `room` when
 * ready, `until` in backoff), again when the pool has used the room it was last told while the key
 * is still ready, and after a refusal or a release the pool knows nothing about. A grant or a
 * release that leaves the key where it was tells the pool nothing: on the path every task takes,
 * a key with room costs KEY.GRANT and KEY.RELEASE and nothing else. `credit` is the key's count of
 * the grants the pool may still send on what it was told: the pool's own count is never lower
 * once their messages have crossed, so the key never waits for grants the pool will not send.
 * The key's context holds its id and counts, never its secret.
 */
import { assign, enqueueActions, sendParent, sendTo, setup, stateIn } from 'xstate';
import type { AnyActorRef } from 'xstate';
import { clampDelay, nowOf } from './clock.js';
import {
  advance,
  awaiting,
  canGrant,
  DEFAULT_MAX_RATE_LIMITED_MS,
  fits,
  grant,
  grantLeavesRoom,
  holds,
  msUntilCapacity,
  newBook,
  rateOf,
  roomOf,
  rateSourceOf,
  waitsForRelease,
  unpaced,
  type KeyBook,
  type RateSource,
} from './keyLimits.js';
import { adoptPeerRate } from './keyLearn.js';
import { release } from './keyRelease.js';
import type { KeyLimits, KeyState, LeaseOutcome, LeaseReply, LeaseRequest, RunEvent } from './protocol.js';

/** What the key is spawned with. */
export interface KeyInput {
  keyId: string;
  limits: KeyLimits;
  /** One request at a time until the server has accepted the key once. Default false. */
  probation?: boolean;
  /** The plan's provider, for events. Default: the key id. */
  provider?: string;
  /** Meeting nothing but 429s this long (ms) sets the key aside. Default DEFAULT_MAX_RATE_LIMITED_MS. */
  maxRateLimitedMs?: number;
}

/** What the pool sends its keys. `replyTo`: the agent that asked, told `LEASE.GRANTED` by the key. */
export type KeyEvent =
  | { type: 'KEY.GRANT'; leaseId: string; request: LeaseRequest; replyTo: AnyActorRef }
  | { type: 'KEY.RELEASE'; leaseId: string; outcome: LeaseOutcome }
  /** Another key of the same provider measured its rate (rpm): a key with none measured starts from it. */
  | { type: 'KEY.PEER_RATE'; rpm: number };

/** What a key sends its parent (see the header for when). */
export type KeyReply =
  /**
   * `until`: in backoff, when it ends (the pool denies requests whose deadline comes first).
   * `room`: when ready, how many grants the pool may send before it hears from the key again
   * (absent: no bound, a key that limits nothing).
   */
  | { type: 'KEY.STATE'; keyId: string; state: KeyState; until?: number; room?: number }
  | { type: 'KEY.REJECTED'; keyId: string; leaseId: string; request: LeaseRequest }
  /** The key measured its request rate from its 429s (machines/keyLearn.ts): the pool passes it to the others. */
  | { type: 'KEY.LEARNED'; keyId: string; rpm: number };

/** The key's own timer: `maxRateLimitedMs` after the first 429 of a run of them. */
type KeyTimer = { type: 'KEY.LIMITED_TOO_LONG' };
const LIMIT_TIMER = 'limitedTooLong';

export interface KeyContext extends KeyBook {
  keyId: string;
  provider: string;
  maxRateLimitedMs: number;
  /** The state last announced (undefined before the first). */
  state?: KeyState;
  /** The request rate last reported (`key:rate`), rounded; undefined before the first. */
  reportedRate?: { rpm: number | null; source: RateSource };
  /** Grants the pool may still send on what the key last told it (<= 0: it is owed a KEY.STATE if ready). */
  credit: number;
}

/** What a `key:rate` event would say now: the paced request rate, rounded to 0.1 rpm. */
function rateNow(book: KeyBook): { rpm: number | null; source: RateSource } {
  const rate = rateOf(book, 'requests');
  return { rpm: rate === undefined ? null : Math.round(rate * 10) / 10, source: rateSourceOf(book) };
}

/** A rate worth reporting: its source changed, or it moved by 10% or more (AIMD raises it in small steps). */
function rateMoved(before: KeyContext['reportedRate'], now: { rpm: number | null; source: RateSource }): boolean {
  if (before === undefined) return now.rpm !== null;
  if (before.source !== now.source || (before.rpm === null) !== (now.rpm === null)) return true;
  return before.rpm !== null && now.rpm !== null && Math.abs(now.rpm - before.rpm) >= 0.1 * before.rpm;
}

/** The key's state as its pool hears it (with the end of a backoff, or the room when ready). */
function stateReply(context: KeyContext, state: KeyState, room: number): KeyReply {
  if (state === 'backoff') return { type: 'KEY.STATE', keyId: context.keyId, state, until: context.backoffUntil };
  if (state === 'ready' && room !== Infinity) return { type: 'KEY.STATE', keyId: context.keyId, state, room };
  return { type: 'KEY.STATE', keyId: context.keyId, state };
}

/**
 * Whether entering `state` is news to the pool: a change, a backoff (its end may have moved), or
 * ready with the pool's room used up (or taken back by a refusal).
 */
const isNews = (context: KeyContext, state: KeyState) =>
  context.state !== state || state === 'backoff' || (state === 'ready' && context.credit <= 0);

type Grant = Extract<KeyEvent, { type: 'KEY.GRANT' }>;

/**
 * The grant leaves the key ready. Judged on the book before the clock's sync, which only adds
 * capacity: a `true` here holds after it too.
 */
const keepsReady = (context: KeyContext, event: KeyEvent | KeyTimer) =>
  event.type === 'KEY.GRANT' && fits(context, event.request) && grantLeavesRoom(context, event.leaseId, event.request);

/** The two named effects the actions below enqueue: typed here, since setup cannot infer them. */
type Effect = { type: 'tellPool'; params: KeyReply } | { type: 'report'; params: RunEvent };
const enqueueEffect = (enqueue: unknown, effect: Effect) => (enqueue as (action: Effect) => void)(effect);

/** Tells the pool `state` (with the room it may now use), and the run when the state changed. */
function announceTo(context: KeyContext, enqueue: unknown, state: KeyState): void {
  const room = state === 'ready' ? roomOf(context) : 0;
  enqueueEffect(enqueue, { type: 'tellPool', params: stateReply(context, state, room) });
  (enqueue as { assign: (patch: Partial<KeyContext>) => void }).assign(context.state === state ? { credit: room } : { state, credit: room });
  if (context.state !== state) enqueueEffect(enqueue, { type: 'report', params: { type: 'key:state', keyId: context.keyId, state } });
}

/**
 * The API-key actor. Spawn it from a pool with input `{ keyId, limits }`.
 *
 * @example
 * spawnChild('key', { id: 'key:' + keyId, systemId: 'key:' + keyId, input: { keyId, limits } })
 */
export const keyMachine = setup({
  types: {
    context: {} as KeyContext,
    events: {} as KeyEvent | KeyTimer,
    input: {} as KeyInput,
  },
  actions: {
    /** Public run event (src forwards it to the event stream). */
    report: (_, _event: RunEvent) => {},
    /** Every message to the pool goes through here (a graph walk, with no parent, stubs it). */
    tellPool: sendParent((_, reply: KeyReply) => reply),
    /**
     * Brings refills, window and pause up to the system clock. The actions below that change the
     * book do it first themselves: one assign per event, since each one copies the context.
     */
    sync: assign(({ context, self }) => advance(context, nowOf(self))),
    /** Records the grant and spends one of the pool's credit. The book is fresh unless the lease was out already. */
    grant: assign(({ context, event, self }) => {
      const { leaseId, request } = event as Grant;
      const book = grant(advance(context, nowOf(self)), leaseId, request);
      const credit = context.credit - 1;
      return book === context ? { credit } : Object.assign(book as KeyContext, { credit });
    }),
    /** The key's answer to the agent; the pool hears nothing of a grant it accepts. */
    tellAgent: sendTo(
      ({ event }) => (event as Grant).replyTo,
      ({ context, event }): LeaseReply => ({ type: 'LEASE.GRANTED', requestId: (event as Grant).request.requestId, leaseId: (event as Grant).leaseId, keyId: context.keyId }),
    ),
    /**
     * A request larger than the buckets hold now: remember its size, so `ready` waits for it. The
     * pool stops sending on hearing the refusal, so its credit is gone too.
     */
    awaitSize: assign(({ context, event, self }) => ({ ...awaiting(advance(context, nowOf(self)), (event as Grant).request), credit: 0 })),
    release: assign(({ context, event, self }) => {
      if (event.type !== 'KEY.RELEASE') return {};
      return release(advance(context, nowOf(self)), event.leaseId, event.outcome);
    }),
    reject: enqueueActions(({ context, event, enqueue }) => {
      const { leaseId, request } = event as Grant;
      enqueueEffect(enqueue, { type: 'tellPool', params: { type: 'KEY.REJECTED', keyId: context.keyId, leaseId, request } });
    }),
    /** Entering a state: tell the pool when it is news to it, and the run when it changed. */
    enter: enqueueActions(({ context, enqueue }, params: { state: KeyState }) => {
      if (isNews(context, params.state)) announceTo(context, enqueue, params.state);
    }),
    /** Tells the pool where the key is now (and the room it may use), news or not. */
    announce: enqueueActions(({ context, enqueue }) => {
      if (context.state !== undefined) announceTo(context, enqueue, context.state);
    }),
    /** The paced request rate changed (stated at start, learned from headers, cut or raised): the run hears it. */
    noteRate: enqueueActions(({ context, enqueue }) => {
      const now = rateNow(context);
      if (!rateMoved(context.reportedRate, now)) return;
      enqueue.assign({ reportedRate: now });
      enqueueEffect(enqueue, { type: 'report', params: { type: 'key:rate', keyId: context.keyId, ...now } });
    }),
    reportBackoff: enqueueActions(({ context, enqueue }) => {
      const retryAfterMs = Math.max(0, context.backoffUntil - context.at);
      enqueueEffect(enqueue, { type: 'report', params: { type: 'key:backoff', keyId: context.keyId, retryAfterMs } });
    }),
    /** The key measured its rate from its 429s: the pool passes it on to the other keys. */
    shareLearned: enqueueActions(({ context, enqueue }) => {
      const learning = context.learning;
      if (learning?.measured === undefined || learning.measured === learning.told) return;
      enqueue.assign({ learning: { ...learning, told: learning.measured } });
      enqueueEffect(enqueue, { type: 'tellPool', params: { type: 'KEY.LEARNED', keyId: context.keyId, rpm: learning.measured } });
    }),
    /** Starts from the rate another key of the provider measured (its own measurement comes later). */
    adoptPeerRate: assign(({ context, event, self }) => (event.type === 'KEY.PEER_RATE' ? adoptPeerRate(advance(context, nowOf(self)), event.rpm) : {})),
    reportRevoked: enqueueActions(({ context, enqueue }) => {
      enqueueEffect(enqueue, { type: 'report', params: { type: 'key:revoked', keyId: context.keyId } });
    }),
    /** The first 429 after any other answer: the count of `maxRateLimitedMs` starts (after `release`). */
    watchLimited: enqueueActions(({ context, enqueue }) => {
      if (context.limited?.responses === 1) enqueue.raise({ type: 'KEY.LIMITED_TOO_LONG' }, { id: LIMIT_TIMER, delay: 'maxRateLimited' });
    }),
    /** Before `release`: an answer that is not a 429 ends the run of 429s, and its timer. */
    unwatchLimited: enqueueActions(({ context, event, enqueue }) => {
      if (context.limited === undefined || event.type !== 'KEY.RELEASE') return;
      if (event.outcome.kind === 'ok' || event.outcome.kind === 'error') enqueue.cancel(LIMIT_TIMER);
    }),
    /** The count's end with nothing out and no backoff: the next answer decides (a 429 sets the key aside). */
    markDue: assign(({ context }) => (context.limited === undefined ? {} : { limited: { ...context.limited, due: true } })),
    reportSetAside: enqueueActions(({ context, enqueue }) => {
      const { keyId, provider } = context;
      const rateLimitedMs = context.at - (context.limited?.since ?? context.at);
      const responses = context.limited?.responses ?? 0;
      enqueueEffect(enqueue, { type: 'report', params: { type: 'key:set-aside', keyId, provider, rateLimitedMs, responses } });
    }),
  },
  guards: {
    hasCapacity: ({ context }) => canGrant(context),
    fitsRequest: ({ context, event }) => event.type === 'KEY.GRANT' && fits(context, event.request),
    /** The grant leaves the key ready: it stays in `ready` without the round trip through `deciding`, the common case. */
    grantKeepsReady: ({ context, event }) => keepsReady(context, event),
    /** As `grantKeepsReady`, and the pool has credit left after this grant: it needs to hear nothing. */
    grantKeepsReadyQuietly: ({ context, event }) => context.credit > 1 && keepsReady(context, event),
    /**
     * The same for a release in `ready`, judged without settling it: for a key that paces
     * nothing, a release without rate-limit headers only frees a slot (no rate, pause or backoff
     * moves). The other outcomes were taken by the transitions before this one.
     */
    releaseKeepsReady: ({ context, event }) =>
      event.type === 'KEY.RELEASE' &&
      context.state === 'ready' &&
      context.limited === undefined &&
      context.learning?.closing === undefined &&
      unpaced(context) &&
      (event.outcome as { rateLimit?: unknown }).rateLimit === undefined,
    waitsForRelease: ({ context }) => waitsForRelease(context),
    unknownLease: ({ context, event }) => event.type === 'KEY.RELEASE' && !holds(context, event.leaseId),
    authFailed: ({ event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'auth',
    rateLimited: ({ event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'rate_limited',
    inBackoff: stateIn('backoff'),
    /** At the end of `maxRateLimitedMs` since the first of a run of 429s: the key still refuses (it backs off, or has leases out). */
    refusing: ({ context }) => context.limited !== undefined && (context.state === 'backoff' || context.leasesOut > 0),
    /** A 429 once the key's time of nothing but 429s is up. */
    rateLimitedPastDue: ({ context, event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'rate_limited' && context.limited?.due === true,
    /** Read in `deciding`, after a sync: the backoff has not ended yet. */
    stillBackingOff: ({ context }) => context.backoffUntil > context.at,
    /** Ready or paced, with no rate of its own: a peer's measured rate sets its pace. */
    takesPeerRate: ({ context, event }) =>
      event.type === 'KEY.PEER_RATE' && (context.state === 'ready' || context.state === 'saturated') && adoptPeerRate(context, event.rpm) !== context,
    /** A window measured the rate while the key backed off: its pace spaces the requests now (keyRelease.ts `closeWindow`). */
    backoffCleared: ({ context }) => context.backoffUntil < context.at,
  },
  delays: {
    /** Until the window, the buckets and any pause allow one more grant. */
    refill: ({ context }) => clampDelay(msUntilCapacity(context), 1),
    /** Until the latest Retry-After has passed: never sooner (a longer one is waited in steps). */
    backoffEnds: ({ context }) => clampDelay(context.backoffUntil - context.at, 1),
    /** From the first 429 of a run of them until the key is set aside. */
    maxRateLimited: ({ context }) => clampDelay(context.maxRateLimitedMs, 1),
  },
}).createMachine({
  id: 'key',
  context: ({ input, self }) => ({
    keyId: input.keyId,
    provider: input.provider ?? input.keyId,
    maxRateLimitedMs: input.maxRateLimitedMs ?? DEFAULT_MAX_RATE_LIMITED_MS,
    ...newBook(input.limits, nowOf(self), input.probation),
    credit: 0,
  }),
  initial: 'deciding',
  entry: 'noteRate',
  on: {
    'KEY.RELEASE': [
      // Released twice, or by an agent that was cancelled: nothing to settle.
      { guard: 'unknownLease', actions: 'announce' },
      { guard: 'authFailed', target: '.revoked', actions: 'release' },
      { guard: 'rateLimitedPastDue', target: '.setAside', actions: 'release' },
      // Re-entering backoff restarts its timer from the (never earlier) new backoffUntil.
      { guard: 'rateLimited', target: '.backoff', actions: ['release', 'watchLimited', 'noteRate', 'shareLearned', 'reportBackoff'] },
      // The pool knows the key backs off, and a release does not move its end: nothing to tell.
      { guard: 'inBackoff', actions: ['unwatchLimited', 'release', 'noteRate', 'shareLearned'] },
      // Unpaced, no headers and no run of 429s to end: the rate cannot have moved either.
      { guard: 'releaseKeepsReady', actions: 'release' },
      { target: '.deciding', actions: ['unwatchLimited', 'release', 'noteRate', 'shareLearned'] },
    ],
    'KEY.PEER_RATE': { guard: 'takesPeerRate', target: '.deciding', actions: ['adoptPeerRate', 'noteRate'] },
    'KEY.LIMITED_TOO_LONG': [{ guard: 'refusing', target: '.setAside', actions: 'sync' }, { actions: 'markDue' }],
  },
  states: {
    /** A choice point, never at rest: where the book says the key is now. */
    deciding: {
      always: [
        // A backoff longer than a timer can hold (2^31 ms) wakes early: it goes on to its end.
        { guard: 'stillBackingOff', target: 'backoff' },
        { guard: 'hasCapacity', target: 'ready' },
        { guard: 'waitsForRelease', target: 'saturated.untilRelease' },
        { target: 'saturated.untilRefill' },
      ],
    },
    ready: {
      entry: { type: 'enter', params: { state: 'ready' } },
      on: {
        'KEY.GRANT': [
          { guard: 'grantKeepsReadyQuietly', actions: ['grant', 'tellAgent'] },
          // The pool's last credit: it hears the room the key has now.
          { guard: 'grantKeepsReady', actions: ['grant', 'tellAgent', 'announce'] },
          { guard: 'fitsRequest', target: 'deciding', actions: ['grant', 'tellAgent'] },
          // Bigger than the buckets hold now: refused, and the key waits until it fits.
          { target: 'deciding', actions: ['awaitSize', 'reject'] },
        ],
      },
    },
    saturated: {
      entry: { type: 'enter', params: { state: 'saturated' } },
      on: {
        // A grant sent before the pool heard the key fill up: the state it will hear is this one.
        'KEY.GRANT': { actions: 'reject' },
      },
      initial: 'untilRefill',
      states: {
        /** Time alone frees capacity (window, buckets, pause): re-check when it has. */
        untilRefill: {
          after: { refill: { target: '#key.deciding', actions: 'sync' } },
        },
        /** Every lease slot is out: no timer, the next release re-checks. */
        untilRelease: {},
      },
    },
    backoff: {
      entry: { type: 'enter', params: { state: 'backoff' } },
      always: { guard: 'backoffCleared', target: 'deciding' },
      on: {
        'KEY.GRANT': { actions: 'reject' },
      },
      after: { backoffEnds: { target: 'deciding', actions: 'sync' } },
    },
    revoked: {
      type: 'final',
      entry: [{ type: 'enter', params: { state: 'revoked' } }, 'reportRevoked'],
    },
    /**
     * Met nothing but 429s for `maxRateLimitedMs`: out of service for the run. Not final: a grant
     * the pool sent before it heard is refused here, and a lease still out is settled.
     */
    setAside: {
      entry: [{ type: 'enter', params: { state: 'setAside' } }, 'reportSetAside'],
      on: {
        'KEY.GRANT': { actions: 'reject' },
        'KEY.RELEASE': { actions: 'release' },
        'KEY.LIMITED_TOO_LONG': {},
      },
    },
  },
});
