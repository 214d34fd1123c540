/**
 * The pool's bookkeeping (pool.machine.ts): its tickets (one per lease request), the queue they
 * wait in, the keys with room, and the grants and releases that move tickets between them. One
 * mutable object per pool actor, never copied: each event costs O(log n) at 10,000 queued requests.
 */
import type { AnyActorRef } from 'xstate';
import { BreakerDesk } from './breakerDesk.js';
import { Heap } from './heap.js';
import type { KeyEvent } from './key.machine.js';
import type { KeySlot } from './poolKeys.js';
import type { BreakerEvent, BreakerReply, LeaseOutcome, LeaseReply, LeaseRequest } from './protocol.js';

/** One request, from LEASE.REQUEST until its lease is released, it is cancelled, or denied. */
export interface Ticket {
  request: LeaseRequest;
  replyTo: AnyActorRef;
  /** Arrival order: FIFO among equal priorities, and a rejected request's place in the queue. */
  seq: number;
  /** queued: in the heap. granted: KEY.GRANT sent (the key answers the agent, or refuses to the pool). */
  phase: 'queued' | 'granted';
  leaseId?: string;
  keyId?: string;
  /** Cancelled while queued: a stale heap entry. */
  cancelled: boolean;
  /** Let through by its route's breaker (not by the pool): a cancel withdraws it there too (it may be the probe). */
  guarded: boolean;
}

/** The pool's bookkeeping: mutable on purpose, created once per actor, never copied. */
export interface PoolBook {
  queue: Heap<Ticket>;
  /** Live (not cancelled) tickets in the queue. */
  waiting: number;
  byRequest: Map<string, Ticket>;
  byLease: Map<string, Ticket>;
  keys: Map<string, KeySlot>;
  /** Keys whose last word was `ready` with room left, the longest since their last grant first. */
  ready: Set<string>;
  revoked: number;
  /** Keys set aside after meeting nothing but 429s (key.machine.ts). */
  setAside: number;
  arrivals: number;
  leases: number;
  /** What the pool knows of its routes' breakers (breakerDesk.ts). */
  desk: BreakerDesk;
}

/** A message the pool decided to send; the machine's actions deliver them in order. */
export type Send = { to: AnyActorRef | string; event: LeaseReply | KeyEvent | BreakerEvent | BreakerReply };

export const keyActorId = (keyId: string) => `key:${keyId}`;

export function newBook(keys: readonly { keyId: string }[]): PoolBook {
  const before = (a: Ticket, b: Ticket) => a.request.priority > b.request.priority || (a.request.priority === b.request.priority && a.seq < b.seq);
  return {
    queue: new Heap(before),
    waiting: 0,
    byRequest: new Map(),
    byLease: new Map(),
    keys: new Map(keys.map((k) => [k.keyId, { state: 'starting', closed: false, room: 0 }])),
    ready: new Set(),
    revoked: 0,
    setAside: 0,
    arrivals: 0,
    leases: 0,
    desk: new BreakerDesk(),
  };
}

export function enqueueTicket(book: PoolBook, ticket: Ticket): void {
  ticket.phase = 'queued';
  ticket.leaseId = ticket.keyId = undefined;
  book.queue.push(ticket);
  book.waiting++;
}

export function popTicket(book: PoolBook): Ticket | undefined {
  for (let t = book.queue.pop(); t !== undefined; t = book.queue.pop()) {
    if (t.cancelled) continue; // lazily dropped: cancelling a queued request is O(1)
    book.waiting--;
    return t;
  }
  return undefined;
}

/** The id the next grant's lease gets (on `keyId`): one place, for `dispatch` and the machine's fast `grantNow`. */
export const nextLeaseId = (book: PoolBook, keyId: string) => `${keyId}#${book.leases + 1}`;

/** Hands the best waiting requests to ready keys, in turns, each within the room it gave. */
export function dispatch(book: PoolBook, out: Send[]): void {
  while (book.waiting > 0 && book.ready.size > 0) {
    const keyId = book.ready.values().next().value as string;
    const ticket = popTicket(book)!;
    book.ready.delete(keyId);
    if (--book.keys.get(keyId)!.room > 0) book.ready.add(keyId); // to the back of the turn
    const leaseId = nextLeaseId(book, keyId);
    book.leases++;
    ticket.phase = 'granted';
    ticket.leaseId = leaseId;
    ticket.keyId = keyId;
    book.byLease.set(leaseId, ticket);
    out.push({ to: keyActorId(keyId), event: { type: 'KEY.GRANT', leaseId, request: ticket.request, replyTo: ticket.replyTo } });
  }
}

/** The pool sends a key nothing more until the key speaks (it will: see key.machine.ts). */
export function holdKey(book: PoolBook, keyId: string): void {
  book.keys.get(keyId)!.room = 0;
  book.ready.delete(keyId);
}

/** Gives a lease back to its key (unless the key is gone) and forgets it. */
export function returnLease(book: PoolBook, ticket: Ticket, outcome: LeaseOutcome, out: Send[]): void {
  const { leaseId, keyId } = ticket as Required<Ticket>;
  book.byLease.delete(leaseId);
  if (book.byRequest.get(ticket.request.requestId) === ticket) book.byRequest.delete(ticket.request.requestId);
  const slot = book.keys.get(keyId)!;
  if (slot.closed) return;
  // A 429 sends the key into backoff and it says so; until then its `ready` is stale. Other
  // outcomes only give capacity back (a key that learns less from headers refuses what no longer fits).
  if (outcome.kind === 'rate_limited' || outcome.kind === 'auth') holdKey(book, keyId);
  if (outcome.kind === 'auth') slot.closed = true;
  out.push({ to: keyActorId(keyId), event: { type: 'KEY.RELEASE', leaseId, outcome } });
}
