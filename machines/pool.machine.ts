/**
 * One actor per provider: the only door agents knock on for an API key (systemId `pool:<provider>`).
 *
 *   agent ──LEASE.REQUEST──▶ pool ──KEY.GRANT──▶ key ──LEASE.GRANTED──▶ agent
 *   agent ──LEASE.RELEASE──▶ pool ──KEY.RELEASE──▶ key
 *
 * Requests wait in a priority queue (higher priority first, then arrival order); while a key
 * said it is ready, the request at the head goes to it, at most the `room` the key gave with its
 * `ready` before it speaks again (the keys with room take turns). Nobody polls: a key tells the
 * pool when its state changes, when the pool has used that room, and when it refuses a grant
 * (its `ready` went stale: `KEY.REJECTED`, and the request goes back to its place in the queue).
 * The key answers an accepted grant to the agent itself, so the agent hears `LEASE.GRANTED` only
 * once the key took it, and a task on a key with room costs the pool no message from the key.
 * When no key is left (each revoked, or set aside after nothing but 429s for `maxRateLimitedMs`),
 * the pool denies: `no_keys`, or `rate_limited` when any was set aside (the agent's fallbacks take
 * over, as at an open breaker). The pool is also the front desk of its routes'
 * breakers (breakerDesk.ts): a clean route's requests and successes never reach the breaker.
 *
 * The bookkeeping (heap, maps, ready set) is one mutable object created with the actor and never
 * copied (poolBook.ts): each event costs O(log n) at 10,000 queued requests.
 */
import { enqueueActions, sendTo, setup } from 'xstate';
import type { AnyActorRef, EventObject } from 'xstate';
import type { Env } from './breakerDesk.js';
import { backoffEnd, denial, pastDeadline } from './poolKeys.js';
import { dispatch, enqueueTicket, holdKey, keyActorId, newBook, nextLeaseId, popTicket, returnLease, type PoolBook, type Send, type Ticket } from './poolBook.js';
import { keyMachine } from './key.machine.js';
import type { KeyEvent, KeyInput, KeyReply } from './key.machine.js';
import { DEFAULT_MAX_RATE_LIMITED_MS } from './keyLimits.js';
import type { BreakerNews, BreakerReply, ErrorInfo, KeyLimits, LeaseEvent, LeaseRequest, RunEvent } from './protocol.js';

/** What the pool is spawned with. `maxRateLimitedMs`: the key's (see KeyInput). */
export interface PoolInput {
  provider: string;
  keys: { keyId: string; limits: KeyLimits; probation?: boolean; maxRateLimitedMs?: number }[];
}

export interface PoolContext {
  provider: string;
  keys: PoolInput['keys'];
  book: PoolBook;
}

export type PoolEvent = LeaseEvent | KeyReply | BreakerNews | Extract<BreakerReply, { type: 'BREAKER.REFUSED' }>;

/**
 * The agent hears no. A request its route's breaker let through (`guarded`) is withdrawn there
 * too: it may be the half-open probe, whose slot would otherwise wait for an outcome never sent.
 */
function deny(context: PoolContext, ticket: { request: LeaseRequest; replyTo: AnyActorRef; guarded: boolean }, out: Send[], env: Env, error?: ErrorInfo): void {
  const { requestId, route } = ticket.request;
  if (ticket.guarded && route !== undefined) context.book.desk.withdraw(route, requestId, out, env);
  out.push({ to: ticket.replyTo, event: { type: 'LEASE.DENIED', requestId, error: error ?? noKeyLeft(context) } });
}

/** The denial when no key is left, with what became of the keys. */
function noKeyLeft({ provider, keys, book }: PoolContext): ErrorInfo {
  const maxRateLimitedMs = Math.max(0, ...keys.map((k) => k.maxRateLimitedMs ?? DEFAULT_MAX_RATE_LIMITED_MS));
  return denial(provider, { count: book.keys.size, revoked: book.revoked, maxRateLimitedMs });
}

/** Denies the queued requests whose deadline comes before the earliest backoff end. O(queue), only while every key backs off. */
function denyPastDeadline(context: PoolContext, out: Send[], env: Env): void {
  const end = backoffEnd(context.book.keys.values());
  if (end === undefined || context.book.waiting === 0) return;
  for (const ticket of context.book.byRequest.values()) {
    if (ticket.phase !== 'queued' || ticket.cancelled || ticket.request.deadline === undefined || ticket.request.deadline >= end) continue;
    context.book.byRequest.delete(ticket.request.requestId);
    ticket.cancelled = true; // its heap entry is skipped when popped
    context.book.waiting--;
    deny(context, ticket, out, env, pastDeadline(context.provider));
  }
}

// Handlers: plain functions of (context, event, out). Each mutates the book and appends the
// messages to send; `run` delivers them in order.

type EventOf<T extends PoolEvent['type']> = Extract<PoolEvent, { type: T }>;
type Handler<T extends PoolEvent['type']> = (context: PoolContext, event: EventOf<T>, out: Send[], env: Env) => void;

const onRequest: Handler<'LEASE.REQUEST'> = (context, event, out, env) => {
  const { book } = context;
  // A duplicate (the first one stands) is neither handed to the breaker again nor booked.
  const booked = book.byRequest.has(event.requestId);
  if (book.desk.holds(event, booked, out, env) || booked) return;
  const { replyTo } = event;
  const request = requestOf(event);
  const end = request.deadline === undefined ? undefined : backoffEnd(book.keys.values());
  const guarded = event.admitted === true;
  if (end !== undefined && request.deadline! < end) return deny(context, { request, replyTo, guarded }, out, env, pastDeadline(context.provider));
  const ticket: Ticket = { request, replyTo, seq: book.arrivals++, phase: 'queued', cancelled: false, guarded };
  book.byRequest.set(request.requestId, ticket);
  enqueueTicket(book, ticket);
  dispatch(book, out);
};

/** Denied, once its route's breaker let it through (an open one holds it first, as it would any request). */
const onRequestWhenExhausted: Handler<'LEASE.REQUEST'> = (context, event, out, env) => {
  if (context.book.desk.holds(event, context.book.byRequest.has(event.requestId), out, env)) return;
  deny(context, { request: requestOf(event), replyTo: event.replyTo, guarded: event.admitted === true }, out, env);
};

const onCancel: Handler<'LEASE.CANCEL'> = ({ book }, { requestId }, out, env) => {
  if (book.desk.cancel(requestId, out, env)) return;
  const ticket = book.byRequest.get(requestId);
  if (ticket === undefined) return;
  book.byRequest.delete(requestId);
  if (ticket.guarded) book.desk.withdraw(ticket.request.route!, requestId, out, env);
  // Sent to its key: the agent went away before using it, so the key gets its slot back (a key
  // that refused it finds no such lease and says where it is).
  if (ticket.phase === 'granted') return returnLease(book, ticket, { kind: 'unused' }, out);
  book.waiting--;
  ticket.cancelled = true; // skipped when popped
};

const onRelease: Handler<'LEASE.RELEASE'> = ({ book }, { leaseId, outcome, verdict }, out, env) => {
  const ticket = book.byLease.get(leaseId);
  if (ticket?.phase !== 'granted') return; // twice, or unknown
  returnLease(book, ticket, outcome, out);
  if (verdict !== undefined && ticket.request.route !== undefined) book.desk.report(ticket.request.route, ticket.request.requestId, verdict, out, env);
};

const onBreakerState: Handler<'BREAKER.STATE'> = ({ book }, news) => book.desk.note(news);

const onBreakerRefused: Handler<'BREAKER.REFUSED'> = ({ book }, { requestId }, out) => book.desk.refused(requestId, out);

/** A refusal: the key's room is gone (it speaks again when it has some); the request keeps its place. */
const onKeyRejected: Handler<'KEY.REJECTED'> = ({ book }, { keyId, leaseId }, out) => {
  if (book.keys.has(keyId)) holdKey(book, keyId);
  const ticket = book.byLease.get(leaseId);
  if (ticket === undefined) return; // cancelled since: its release already went to the key
  book.byLease.delete(leaseId);
  enqueueTicket(book, ticket); // same seq: back to its place, ahead of later arrivals
  dispatch(book, out);
};

const onKeyRejectedWhenExhausted: Handler<'KEY.REJECTED'> = (context, { leaseId }, out, env) => {
  const ticket = context.book.byLease.get(leaseId);
  if (ticket === undefined) return;
  context.book.byLease.delete(leaseId);
  context.book.byRequest.delete(ticket.request.requestId);
  deny(context, ticket, out, env);
};

const onKeyState: Handler<'KEY.STATE'> = (context, { keyId, state, until, room }, out, env) => {
  const { book } = context;
  const slot = book.keys.get(keyId);
  if (slot === undefined || slot.state === 'revoked' || slot.state === 'setAside') return;
  slot.state = state;
  slot.until = state === 'backoff' ? until : undefined;
  slot.room = state === 'ready' && !slot.closed ? (room ?? Infinity) : 0;
  if (slot.room > 0) book.ready.add(keyId); // keeps its place if already there
  else book.ready.delete(keyId);
  // A key goes final only on the auth release the pool sends it last (it sends a closed key
  // nothing), so every grant it was sent has been answered by then: nothing to take back. A key
  // set aside refuses the grants it is sent after that (KEY.REJECTED: they go back in the queue).
  if (state === 'revoked') book.revoked++;
  if (state === 'setAside') book.setAside++;
  if (state === 'revoked' || state === 'setAside') slot.closed = true;
  if (state === 'backoff' || state === 'revoked' || state === 'setAside') denyPastDeadline(context, out, env);
  dispatch(book, out);
};

function denyWaiting(context: PoolContext, out: Send[], env: Env): void {
  for (let t = popTicket(context.book); t !== undefined; t = popTicket(context.book)) {
    context.book.byRequest.delete(t.request.requestId);
    deny(context, t, out, env);
  }
}

// The common ways, without an action list: a request a ready key takes at once (nothing queued),
// and a release that goes back to its key. Each sends one message, read before the book changes
// (a fixed `sendTo`), then books it.

/** Nothing waits, a key has room and this request is new: it goes to that key now. */
function grantsAtOnce(book: PoolBook, event: PoolEvent): boolean {
  return (
    event.type === 'LEASE.REQUEST' &&
    book.waiting === 0 &&
    book.ready.size > 0 &&
    event.admitted === undefined &&
    (event.route === undefined || book.desk.isClear(event.route)) &&
    !book.byRequest.has(event.requestId)
  );
}

/** The key whose turn it is: the one `dispatch` would pick. */
const nextReadyKey = (book: PoolBook) => book.ready.values().next().value as string;

const requestOf = ({ type: _, replyTo: _r, unlessOpen: _u, admitted: _a, ...request }: EventOf<'LEASE.REQUEST'>): LeaseRequest => request;

/** Books the grant `grantsAtOnce` allowed, as `onRequest` + `dispatch` would. */
const bookGrant: Handler<'LEASE.REQUEST'> = ({ book }, event, out) => {
  const ticket: Ticket = { request: requestOf(event), replyTo: event.replyTo, seq: book.arrivals++, phase: 'queued', cancelled: false, guarded: false };
  book.byRequest.set(ticket.request.requestId, ticket);
  enqueueTicket(book, ticket);
  dispatch(book, out);
};

/** A granted lease released by the key that holds it, which is still open, with nothing for the breaker: it goes back there. */
function releasesToKey(book: PoolBook, event: PoolEvent): boolean {
  if (event.type !== 'LEASE.RELEASE') return false;
  const ticket = book.byLease.get(event.leaseId);
  if (ticket?.phase !== 'granted' || ticket.keyId !== event.keyId || book.keys.get(event.keyId)?.closed !== false) return false;
  const { route } = ticket.request;
  return event.verdict === undefined || route === undefined || !book.desk.tells(route, event.verdict);
}

/** What an enqueueActions action is given, as `run` uses it. */
interface RunArgs extends Env {
  context: PoolContext;
  event: PoolEvent;
  enqueue: unknown;
}

/** Runs a handler and sends what it decided, in order. */
function run<T extends PoolEvent['type']>({ enqueue, context, event, self, system }: RunArgs, handle: Handler<T>): void {
  const out: Send[] = [];
  handle(context, event as EventOf<T>, out, { self, system });
  const sender = enqueue as { sendTo: (to: AnyActorRef | string, event: EventObject) => void };
  for (const { to, event: message } of out) sender.sendTo(to, message);
}

/**
 * The key pool of one provider. Spawn it with systemId `pool:<provider>`; agents send it
 * LeaseEvents and get LeaseReplies.
 *
 * @example
 * spawnChild('pool', { id: 'pool:anthropic', systemId: 'pool:anthropic', input: { provider: 'anthropic', keys } })
 */
export const poolMachine = setup({
  types: {
    context: {} as PoolContext,
    events: {} as PoolEvent,
    input: {} as PoolInput,
  },
  actors: { key: keyMachine },
  actions: {
    /** Public run event (src forwards it). The pool has none of its own; its keys report theirs. */
    report: (_, _event: RunEvent) => {},
    spawnKeys: enqueueActions(({ context, enqueue }) => {
      for (const { keyId, limits, probation, maxRateLimitedMs } of context.keys) {
        const input: KeyInput = { keyId, limits, provider: context.provider };
        if (probation !== undefined) input.probation = probation;
        if (maxRateLimitedMs !== undefined) input.maxRateLimitedMs = maxRateLimitedMs;
        enqueue.spawnChild('key', { id: keyActorId(keyId), systemId: keyActorId(keyId), input });
      }
    }),
    admit: enqueueActions((args) => run(args, onRequest)),
    grantNow: sendTo(
      ({ context }) => keyActorId(nextReadyKey(context.book)),
      ({ context, event }): KeyEvent => {
        const request = event as EventOf<'LEASE.REQUEST'>;
        const keyId = nextReadyKey(context.book);
        return { type: 'KEY.GRANT', leaseId: nextLeaseId(context.book, keyId), request: requestOf(request), replyTo: request.replyTo };
      },
    ),
    /** After grantNow: the same grant in the book (its one message already sent). */
    bookGrant: ({ context, event, self, system }) => bookGrant(context, event as EventOf<'LEASE.REQUEST'>, [], { self, system }),
    releaseToKey: sendTo(
      ({ event }) => keyActorId((event as EventOf<'LEASE.RELEASE'>).keyId),
      ({ event }): KeyEvent => {
        const { leaseId, outcome } = event as EventOf<'LEASE.RELEASE'>;
        return { type: 'KEY.RELEASE', leaseId, outcome };
      },
    ),
    /** After releaseToKey: the lease forgotten (its one message already sent). */
    bookRelease: ({ context, event, self, system }) => onRelease(context, event as EventOf<'LEASE.RELEASE'>, [], { self, system }),
    refuse: enqueueActions((args) => run(args, onRequestWhenExhausted)),
    cancel: enqueueActions((args) => run(args, onCancel)),
    release: enqueueActions((args) => run(args, onRelease)),
    requeue: enqueueActions((args) => run(args, onKeyRejected)),
    denyRejected: enqueueActions((args) => run(args, onKeyRejectedWhenExhausted)),
    noteKeyState: enqueueActions((args) => run(args, onKeyState)),
    /** A key measured its rate: every other open key of the provider hears it (`KEY.PEER_RATE`). */
    sharePeerRate: enqueueActions(({ context, event, enqueue }) => {
      const { keyId, rpm } = event as EventOf<'KEY.LEARNED'>;
      for (const [other, slot] of context.book.keys) {
        if (other !== keyId && !slot.closed) enqueue.sendTo(keyActorId(other), { type: 'KEY.PEER_RATE', rpm } satisfies KeyEvent);
      }
    }),
    denyWaiting: enqueueActions((args) => run(args, (c, _e, out, env) => denyWaiting(c, out, env))),
    noteBreaker: enqueueActions((args) => run(args, onBreakerState)),
    relayRefusal: enqueueActions((args) => run(args, onBreakerRefused)),
  },
  guards: {
    noKeyLeft: ({ context }) => context.book.revoked + context.book.setAside === context.book.keys.size,
    grantsAtOnce: ({ context, event }) => grantsAtOnce(context.book, event),
    releasesToKey: ({ context, event }) => releasesToKey(context.book, event),
  },
}).createMachine({
  id: 'pool',
  context: ({ input }) => ({ provider: input.provider, keys: input.keys, book: newBook(input.keys) }),
  entry: 'spawnKeys',
  initial: 'serving',
  on: {
    'LEASE.CANCEL': { actions: 'cancel' },
    'LEASE.RELEASE': [{ guard: 'releasesToKey', actions: ['releaseToKey', 'bookRelease'] }, { actions: 'release' }],
    'BREAKER.STATE': { actions: 'noteBreaker' },
    'BREAKER.REFUSED': { actions: 'relayRefusal' },
  },
  states: {
    serving: {
      always: { guard: 'noKeyLeft', target: 'exhausted' },
      on: {
        'LEASE.REQUEST': [{ guard: 'grantsAtOnce', actions: ['grantNow', 'bookGrant'] }, { actions: 'admit' }],
        'KEY.STATE': { actions: 'noteKeyState' },
        'KEY.REJECTED': { actions: 'requeue' },
        'KEY.LEARNED': { actions: 'sharePeerRate' },
      },
    },
    /** No key is left (each revoked or set aside, or there were none): deny what waits and whatever comes. */
    exhausted: {
      entry: 'denyWaiting',
      on: {
        'LEASE.REQUEST': { actions: 'refuse' },
        'KEY.REJECTED': { actions: 'denyRejected' },
      },
    },
  },
});
