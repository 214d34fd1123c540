/**
 * One actor per API key: knows the key's limits and what is out on it, and tells its parent (the
 * pool of its provider) whether it can take a request now.
 *
 *   ready ──grant fills it──▶ saturated ──clock refills / release──▶ ready
 *     │  ╲                        │
 *     │   ╲── 429 ──▶ backoff ◀───┘ (a 429 during backoff extends it)
 *     │               │ Retry-After passed ──▶ ready | saturated
 *     └── 401/403 ──▶ revoked (final)
 *
 * The key never decides by itself to take work: the pool sends `KEY.GRANT` only while the key
 * said `ready`. Because a `KEY.STATE` may be stale by the time the grant arrives, the key answers
 * every grant with `KEY.GRANTED` or `KEY.REJECTED`, and the pool tells the agent only after that.
 * The key's context holds its id and counts, never its secret.
 */
import { assign, enqueueActions, sendParent, setup, stateIn } from 'xstate';
import { clampDelay, nowOf } from './clock.js';
import {
  advance,
  awaiting,
  canGrant,
  fits,
  grant,
  grantLeavesRoom,
  holds,
  msUntilCapacity,
  newBook,
  rateOf,
  rateSourceOf,
  waitsForRelease,
  unpaced,
  type KeyBook,
  type RateSource,
} from './keyLimits.js';
import { release } from './keyRelease.js';
import type { KeyLimits, KeyState, LeaseOutcome, LeaseRequest, RunEvent } from './protocol.js';

/** What the key is spawned with. */
export interface KeyInput {
  keyId: string;
  limits: KeyLimits;
  /** One request at a time until the server has accepted the key once. Default false. */
  probation?: boolean;
}

/** What the pool sends its keys. */
export type KeyEvent =
  | { type: 'KEY.GRANT'; leaseId: string; request: LeaseRequest }
  | { type: 'KEY.RELEASE'; leaseId: string; outcome: LeaseOutcome };

/**
 * What a key sends its parent. `KEY.STATE` follows every event the key handles (duplicates are
 * normal); `KEY.GRANTED` / `KEY.REJECTED` answer each `KEY.GRANT`, before that `KEY.STATE`. A
 * grant that leaves the key ready says so in its `KEY.GRANTED` (`ready: true`) instead: one
 * message to the pool per grant rather than two, on the path every task takes.
 */
export type KeyReply =
  /** `until`: in backoff, when it ends (the pool denies requests whose deadline comes first). */
  | { type: 'KEY.STATE'; keyId: string; state: KeyState; until?: number }
  | { type: 'KEY.GRANTED'; keyId: string; leaseId: string; ready?: true }
  | { type: 'KEY.REJECTED'; keyId: string; leaseId: string; request: LeaseRequest };

export interface KeyContext extends KeyBook {
  keyId: string;
  /** The state last announced (undefined before the first). */
  state?: KeyState;
  /** The request rate last reported (`key:rate`), rounded; undefined before the first. */
  reportedRate?: { rpm: number | null; source: RateSource };
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

/** The key's state as its pool hears it (with the end of a backoff). */
function stateReply(context: KeyContext, state: KeyState): KeyReply {
  return state === 'backoff'
    ? { type: 'KEY.STATE', keyId: context.keyId, state, until: context.backoffUntil }
    : { type: 'KEY.STATE', keyId: context.keyId, state };
}

/** The two named effects the actions below enqueue: typed here, since setup cannot infer them. */
type Effect = { type: 'tellPool'; params: KeyReply } | { type: 'report'; params: RunEvent };
const enqueueEffect = (enqueue: unknown, effect: Effect) => (enqueue as (action: Effect) => void)(effect);

/**
 * The API-key actor. Spawn it from a pool with input `{ keyId, limits }`.
 *
 * @example
 * spawnChild('key', { id: 'key:' + keyId, systemId: 'key:' + keyId, input: { keyId, limits } })
 */
export const keyMachine = setup({
  types: {
    context: {} as KeyContext,
    events: {} as KeyEvent,
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
    grant: assign(({ context, event, self }) => {
      if (event.type !== 'KEY.GRANT') return {};
      return grant(advance(context, nowOf(self)), event.leaseId, event.request);
    }),
    /** A request larger than the buckets hold now: remember its size, so `ready` waits for it. */
    awaitSize: assign(({ context, event, self }) => (event.type === 'KEY.GRANT' ? awaiting(advance(context, nowOf(self)), event.request) : {})),
    release: assign(({ context, event, self }) => {
      if (event.type !== 'KEY.RELEASE') return {};
      return release(advance(context, nowOf(self)), event.leaseId, event.outcome);
    }),
    /** Accepts the grant; `ready`: the key stays ready, and the reply stands for its KEY.STATE. */
    confirm: enqueueActions(({ context, event, enqueue }, params?: { ready: true }) => {
      if (event.type !== 'KEY.GRANT') return;
      const reply: KeyReply = params?.ready ? { type: 'KEY.GRANTED', keyId: context.keyId, leaseId: event.leaseId, ready: true } : { type: 'KEY.GRANTED', keyId: context.keyId, leaseId: event.leaseId };
      enqueueEffect(enqueue, { type: 'tellPool', params: reply });
    }),
    reject: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'KEY.GRANT') return;
      const { leaseId, request } = event;
      enqueueEffect(enqueue, { type: 'tellPool', params: { type: 'KEY.REJECTED', keyId: context.keyId, leaseId, request } });
    }),
    /** Entering a state: tell the pool (always) and the run (when it changed). */
    enter: enqueueActions(({ context, enqueue }, params: { state: KeyState }) => {
      const { keyId } = context;
      const { state } = params;
      enqueueEffect(enqueue, { type: 'tellPool', params: stateReply(context, state) });
      if (context.state !== state) {
        enqueue.assign({ state });
        enqueueEffect(enqueue, { type: 'report', params: { type: 'key:state', keyId, state } });
      }
    }),
    /** Staying in a state after an event: the pool still hears where the key is. */
    announce: enqueueActions(({ context, enqueue }) => {
      if (context.state !== undefined) enqueueEffect(enqueue, { type: 'tellPool', params: stateReply(context, context.state) });
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
    reportRevoked: enqueueActions(({ context, enqueue }) => {
      enqueueEffect(enqueue, { type: 'report', params: { type: 'key:revoked', keyId: context.keyId } });
    }),
  },
  guards: {
    hasCapacity: ({ context }) => canGrant(context),
    fitsRequest: ({ context, event }) => event.type === 'KEY.GRANT' && fits(context, event.request),
    /**
     * The grant leaves the key ready: it stays in `ready` (and says so) without the round trip
     * through `deciding`, the common case of a key with room. Judged on the book before the
     * clock's sync, which only adds capacity: a `true` here holds after it too.
     */
    grantKeepsReady: ({ context, event }) =>
      event.type === 'KEY.GRANT' && fits(context, event.request) && grantLeavesRoom(context, event.leaseId, event.request),
    /** The same for a release in `ready`, for a key that paces nothing (where the clock changes nothing). */
    releaseKeepsReady: ({ context, event }) => {
      if (event.type !== 'KEY.RELEASE' || context.state !== 'ready' || !unpaced(context)) return false;
      const after = release(context, event.leaseId, event.outcome);
      return after.backoffUntil <= after.at && canGrant(after);
    },
    waitsForRelease: ({ context }) => waitsForRelease(context),
    unknownLease: ({ context, event }) => event.type === 'KEY.RELEASE' && !holds(context, event.leaseId),
    authFailed: ({ event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'auth',
    rateLimited: ({ event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'rate_limited',
    inBackoff: stateIn('backoff'),
    /** Read in `deciding`, after a sync: the backoff has not ended yet. */
    stillBackingOff: ({ context }) => context.backoffUntil > context.at,
  },
  delays: {
    /** Until the window, the buckets and any pause allow one more grant. */
    refill: ({ context }) => clampDelay(msUntilCapacity(context), 1),
    /** Until the latest Retry-After has passed: never sooner (a longer one is waited in steps). */
    backoffEnds: ({ context }) => clampDelay(context.backoffUntil - context.at, 1),
  },
}).createMachine({
  id: 'key',
  context: ({ input, self }) => ({ keyId: input.keyId, ...newBook(input.limits, nowOf(self), input.probation) }),
  initial: 'deciding',
  entry: 'noteRate',
  on: {
    'KEY.RELEASE': [
      // Released twice, or by an agent that was cancelled: nothing to settle.
      { guard: 'unknownLease', actions: 'announce' },
      { guard: 'authFailed', target: '.revoked', actions: 'release' },
      // Re-entering backoff restarts its timer from the (never earlier) new backoffUntil.
      { guard: 'rateLimited', target: '.backoff', actions: ['release', 'noteRate', 'reportBackoff'] },
      { guard: 'inBackoff', actions: ['release', 'noteRate', 'announce'] },
      { guard: 'releaseKeepsReady', actions: ['release', 'noteRate', 'announce'] },
      { target: '.deciding', actions: ['release', 'noteRate'] },
    ],
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
          { guard: 'grantKeepsReady', actions: ['grant', { type: 'confirm', params: { ready: true } }] },
          { guard: 'fitsRequest', target: 'deciding', actions: ['grant', 'confirm'] },
          // Bigger than the buckets hold now: refused, and the key waits until it fits.
          { target: 'deciding', actions: ['awaitSize', 'reject'] },
        ],
      },
    },
    saturated: {
      entry: { type: 'enter', params: { state: 'saturated' } },
      on: {
        'KEY.GRANT': { actions: ['reject', 'announce'] },
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
      on: {
        'KEY.GRANT': { actions: ['reject', 'announce'] },
      },
      after: { backoffEnds: { target: 'deciding', actions: 'sync' } },
    },
    revoked: {
      type: 'final',
      entry: [{ type: 'enter', params: { state: 'revoked' } }, 'reportRevoked'],
    },
  },
});
