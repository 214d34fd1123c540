/**
 * The run's ledger (systemId `ledger`, one per run): before a model call, an agent reserves the
 * call's worst-case cost; after it, the agent settles the reservation at the actual cost, or
 * releases it when the call was never sent.
 *
 *   agent ──LEDGER.RESERVE──▶ ledger ──LEDGER.RESERVED | LEDGER.DENIED──▶ agent
 *   agent ──LEDGER.SETTLE / LEDGER.RELEASE──▶ ledger                      (no reply)
 *
 * A reservation is granted when it fits in every budget that applies to it (the run's, its
 * task's, its model's), counting settled spend and all outstanding reservations. One actor
 * handles one event at a time, so two agents can never both be granted the last dollar: as long
 * as no call costs more than it reserved, settled spend never exceeds a budget, however many
 * agents run at once.
 *
 * A request that would fit once outstanding reservations settle (they usually cost less than the
 * worst case they hold) waits instead of being refused, FIFO, and so does every request behind
 * it: each settle or release answers the head of the queue while it can be answered. Only a
 * request that settled spend alone leaves no room for is refused at once. Nothing waits forever:
 * a head can only lack room while some reservation is outstanding.
 *
 * The bookkeeping lives in a mutable {@link LedgerBook} held by reference in context (see
 * ledgerBook.ts): every event is O(1).
 */
import { enqueueActions, setup, type AnyActorRef } from 'xstate';
import { LedgerBook, denialMessage } from './ledgerBook.js';
import type { LedgerInput } from './ledgerBook.js';
import type { ErrorInfo, LedgerEvent, LedgerReply, RunEvent } from './protocol.js';
import { enqueueReport } from './kit.js';

export { LedgerBook, denialMessage, formatUsd } from './ledgerBook.js';
export type { AccountView, Denial, LedgerBudgets, LedgerCounts, LedgerInput, ReserveOutcome } from './ledgerBook.js';

export interface LedgerContext {
  /** All the accounts and reservations, mutated in place (never copied per event). */
  book: LedgerBook;
  /**
   * A reservation was refused by the RUN budget: the run cannot afford all its work, and the
   * supervisor reports the run as over budget. Task and model denials do not set it.
   */
  runDenied: boolean;
  /**
   * Requests that could fit once outstanding reservations settle (they may cost less than the
   * worst case they hold), in arrival order; answered as settlements make room.
   */
  waiting: Reserve[];
}

type Reserve = Extract<LedgerEvent, { type: 'LEDGER.RESERVE' }>;

function invalidAmount(event: Reserve): ErrorInfo {
  const message = `reservation ${event.reservationId} of task "${event.taskId}" asked for ${String(event.amountUsd)} USD: an amount must be a finite, non-negative number`;
  return { code: 'internal', retryable: false, message, model: event.model };
}

/** Grants or refuses one request now, and tells its agent. */
function answer(context: LedgerContext, e: Reserve, enqueue: EnqueueLike): void {
  const outcome = context.book.reserve(e.reservationId, e.taskId, e.model, e.amountUsd);
  let reply: LedgerReply;
  if (outcome.kind === 'reserved') reply = { type: 'LEDGER.RESERVED', reservationId: e.reservationId };
  else if (outcome.kind === 'invalid') reply = { type: 'LEDGER.DENIED', reservationId: e.reservationId, error: invalidAmount(e) };
  else {
    const { denial } = outcome;
    const error: ErrorInfo = { code: 'budget_exceeded', retryable: false, message: denialMessage(denial), model: e.model };
    reply = { type: 'LEDGER.DENIED', reservationId: e.reservationId, error };
    const { taskId, model, amountUsd, budget, limitUsd, spentUsd, reservedUsd } = denial;
    enqueueReport(enqueue, { type: 'budget:denied', taskId, model, amountUsd, budget, limitUsd, spentUsd, reservedUsd });
    // Bookkeeping held by reference, like the book: set where it is decided.
    if (budget === 'run') context.runDenied = true;
  }
  enqueue.sendTo(e.replyTo, reply);
}

type EnqueueLike = { sendTo: (to: AnyActorRef, event: LedgerReply) => void };


/**
 * The ledger of one run. Spawn it with systemId `ledger`; agents send it LedgerEvents and get
 * LedgerReplies. Its only effect is the `report` action (`budget:denied`).
 *
 * @example
 * spawnChild('ledger', { id: 'ledger', systemId: 'ledger', input: { budgets: { runUsd: 5, perModelUsd: { opus: 2 } } } })
 * ledger.send({ type: 'LEDGER.RESERVE', reservationId: 't1#1.1', taskId: 't1', model: 'opus', amountUsd: 0.08, replyTo: agent });
 * // agent receives { type: 'LEDGER.RESERVED', reservationId: 't1#1.1' }
 * ledger.send({ type: 'LEDGER.SETTLE', reservationId: 't1#1.1', actualUsd: 0.031 });
 */
export const ledgerMachine = setup({
  types: {
    context: {} as LedgerContext,
    events: {} as LedgerEvent,
    input: {} as LedgerInput,
  },
  actions: {
    /** Public run event (src forwards it): here only `budget:denied`. */
    report: (_, _event: RunEvent) => {},
    reserve: enqueueActions(({ context, event, enqueue }) => {
      const e = event as Reserve;
      // A repeat of an outstanding reservation is answered at once (it is not charged twice).
      if (context.book.isOpen(e.reservationId)) return answer(context, e, enqueue);
      const verdict = context.book.verdict(e.taskId, e.model, e.amountUsd);
      // Room held by outstanding reservations may come back when they settle below their worst
      // case: such a request waits, and so does everyone behind it (FIFO, no starvation).
      if (verdict !== 'never' && (verdict === 'later' || context.waiting.length > 0)) {
        context.waiting.push(e);
        return;
      }
      answer(context, e, enqueue);
    }),
    /** After a settle or release: answer the waiting requests that can be answered now, in order. */
    drain: enqueueActions(({ context, enqueue }) => {
      while (context.waiting.length > 0) {
        const head = context.waiting[0]!;
        if (!context.book.isOpen(head.reservationId) && context.book.verdict(head.taskId, head.model, head.amountUsd) === 'later') return;
        context.waiting.shift();
        answer(context, head, enqueue);
      }
    }),
    /** A request released while it waits (its agent went away) leaves the queue unanswered. */
    dropWaiting: enqueueActions(({ context, event }) => {
      const id = (event as Extract<LedgerEvent, { type: 'LEDGER.RELEASE' }>).reservationId;
      const i = context.waiting.findIndex((w) => w.reservationId === id);
      if (i >= 0) context.waiting.splice(i, 1);
    }),
    // enqueueActions like `reserve`, so the book changes while the transition resolves, as in the pool.
    settle: enqueueActions(({ context, event }) => {
      const e = event as Extract<LedgerEvent, { type: 'LEDGER.SETTLE' }>;
      context.book.settle(e.reservationId, e.actualUsd); // unknown or closed: ignored
    }),
    release: enqueueActions(({ context, event }) => {
      context.book.release((event as Extract<LedgerEvent, { type: 'LEDGER.RELEASE' }>).reservationId); // idem
    }),
  },
}).createMachine({
  id: 'ledger',
  context: ({ input }) => ({ book: new LedgerBook(input.budgets), runDenied: false, waiting: [] }),
  initial: 'open',
  states: {
    /** Always open: a denied reservation says nothing of a smaller one, or of the next settlement. */
    open: {
      on: {
        'LEDGER.RESERVE': { actions: 'reserve' },
        'LEDGER.SETTLE': { actions: ['settle', 'drain'] },
        'LEDGER.RELEASE': { actions: ['dropWaiting', 'release', 'drain'] },
      },
    },
  },
});
