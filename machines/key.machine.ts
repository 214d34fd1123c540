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
import { nowOf } from './clock.js';
import {
  advance,
  canGrant,
  grant,
  holds,
  msUntilCapacity,
  newBook,
  release,
  waitsForRelease,
  type KeyBook,
} from './keyLimits.js';
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
 * normal); `KEY.GRANTED` / `KEY.REJECTED` answer each `KEY.GRANT`, before that `KEY.STATE`.
 */
export type KeyReply =
  | { type: 'KEY.STATE'; keyId: string; state: KeyState }
  | { type: 'KEY.GRANTED'; keyId: string; leaseId: string }
  | { type: 'KEY.REJECTED'; keyId: string; leaseId: string; request: LeaseRequest };

export interface KeyContext extends KeyBook {
  keyId: string;
  /** The state last announced (undefined before the first). */
  state?: KeyState;
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
    /** Brings refills, window and pause up to the system clock: first action of every event. */
    sync: assign(({ context, self }) => advance(context, nowOf(self))),
    grant: assign(({ context, event }) => {
      if (event.type !== 'KEY.GRANT') return {};
      return grant(context, event.leaseId, event.request);
    }),
    release: assign(({ context, event }) => {
      if (event.type !== 'KEY.RELEASE') return {};
      return release(context, event.leaseId, event.outcome);
    }),
    confirm: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'KEY.GRANT') return;
      enqueueEffect(enqueue, { type: 'tellPool', params: { type: 'KEY.GRANTED', keyId: context.keyId, leaseId: event.leaseId } });
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
      enqueueEffect(enqueue, { type: 'tellPool', params: { type: 'KEY.STATE', keyId, state } });
      if (context.state !== state) {
        enqueue.assign({ state });
        enqueueEffect(enqueue, { type: 'report', params: { type: 'key:state', keyId, state } });
      }
    }),
    /** Staying in a state after an event: the pool still hears where the key is. */
    announce: enqueueActions(({ context, enqueue }) => {
      const { keyId, state } = context;
      if (state !== undefined) enqueueEffect(enqueue, { type: 'tellPool', params: { type: 'KEY.STATE', keyId, state } });
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
    waitsForRelease: ({ context }) => waitsForRelease(context),
    unknownLease: ({ context, event }) => event.type === 'KEY.RELEASE' && !holds(context, event.leaseId),
    authFailed: ({ event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'auth',
    rateLimited: ({ event }) => event.type === 'KEY.RELEASE' && event.outcome.kind === 'rate_limited',
    inBackoff: stateIn('backoff'),
  },
  delays: {
    /** Until the window, the buckets and any pause allow one more grant. */
    refill: ({ context }) => msUntilCapacity(context),
    /** Until the latest Retry-After has passed: never sooner. */
    backoffEnds: ({ context }) => Math.max(1, Math.ceil(context.backoffUntil - context.at)),
  },
}).createMachine({
  id: 'key',
  context: ({ input, self }) => ({ keyId: input.keyId, ...newBook(input.limits, nowOf(self), input.probation) }),
  initial: 'deciding',
  on: {
    'KEY.RELEASE': [
      // Released twice, or by an agent that was cancelled: nothing to settle.
      { guard: 'unknownLease', actions: 'announce' },
      { guard: 'authFailed', target: '.revoked', actions: ['sync', 'release'] },
      // Re-entering backoff restarts its timer from the (never earlier) new backoffUntil.
      { guard: 'rateLimited', target: '.backoff', actions: ['sync', 'release', 'reportBackoff'] },
      { guard: 'inBackoff', actions: ['sync', 'release', 'announce'] },
      { target: '.deciding', actions: ['sync', 'release'] },
    ],
  },
  states: {
    /** A choice point, never at rest: where the book says the key is now. */
    deciding: {
      always: [
        { guard: 'hasCapacity', target: 'ready' },
        { guard: 'waitsForRelease', target: 'saturated.untilRelease' },
        { target: 'saturated.untilRefill' },
      ],
    },
    ready: {
      entry: { type: 'enter', params: { state: 'ready' } },
      on: {
        'KEY.GRANT': { target: 'deciding', actions: ['sync', 'grant', 'confirm'] },
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
