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
 * The bookkeeping (accounts, reservations, the waiting queue) lives in a mutable
 * {@link LedgerBook} held by reference in context (see ledgerBook.ts), so every event is O(1); it
 * changes only through its own methods, called inside `assign`. The rest of the context
 * (`runDenied`, the answers of the last event) is replaced, never changed in place; the answers
 * are sent by the `answer` action after the assigns that decided them. The first run-budget
 * refusal is also news for `notify` (LEDGER.RUN_DENIED, once): the supervisor reports such a run
 * as over budget without reading the ledger's snapshot. The run budget's balance
 * leaves through the `balance` action each time (the runtime hands it to the dispatch hooks), so
 * nothing outside needs to read the ledger's snapshot for it.
 */
import { assign, enqueueActions, setup, type AnyActorRef } from 'xstate';
import { LedgerBook, denialMessage } from './ledgerBook.js';
import type { LedgerInput, Overrun, ReserveOutcome } from './ledgerBook.js';
import type { ErrorInfo, LedgerEvent, LedgerReply, RunEvent } from './protocol.js';
import { enqueueReport } from './kit.js';

export { LedgerBook, denialMessage, formatUsd } from './ledgerBook.js';
export type { AccountView, Denial, LedgerBudgets, LedgerCounts, LedgerInput, LedgerRequest, Overrun, ReserveOutcome } from './ledgerBook.js';

export interface LedgerContext {
  /**
   * All the accounts, reservations and the requests waiting for room (FIFO), changed in place
   * by its own methods inside `assign` only (never copied per event).
   */
  book: LedgerBook<Reserve>;
  /**
   * A reservation was refused by the RUN budget: the run cannot afford all its work, and the
   * supervisor reports the run as over budget. Task and model denials do not set it.
   */
  runDenied: boolean;
  /**
   * A settlement took the RUN budget's settled spend over its limit (a call cost more than it
   * reserved): the run cannot end `completed`. Told to `notify` once.
   */
  runOverspent: boolean;
  /** The answers the last event decided, in order: the `answer` action sends them. */
  outbox: readonly Answer[];
  /** Who is told, once, that the run budget refused a reservation (the supervisor that spawned it). */
  notify: AnyActorRef | undefined;
}

/** What the spawner gives a ledger: the budgets, and who to tell when the run budget first refuses. */
export interface LedgerMachineInput extends LedgerInput {
  notify?: AnyActorRef;
}

/**
 * What the ledger tells `notify`, each once: the run budget first refused a reservation
 * (RUN_DENIED), or a settlement first took its settled spend over its limit (RUN_OVERSPENT).
 */
export type LedgerNews = { type: 'LEDGER.RUN_DENIED' } | { type: 'LEDGER.RUN_OVERSPENT' };

/** The run budget's balance, as the `balance` action announces it. */
export interface LedgerBalance {
  /** The run budget less settled spend and outstanding reservations (below 0 after an overrun). */
  budgetLeftUsd: number;
}

type Reserve = Extract<LedgerEvent, { type: 'LEDGER.RESERVE' }>;

/**
 * What one event makes the ledger say, in order: a reply to an agent (or the news to `notify`),
 * with the run event reported before it (`budget:denied` before its denial); or a report alone
 * (`budget:overrun`).
 */
interface Answer {
  to?: AnyActorRef;
  reply?: LedgerReply | LedgerNews;
  report?: Extract<RunEvent, { type: 'budget:denied' | 'budget:overrun' }>;
}

function invalidAmount(event: Reserve): ErrorInfo {
  const message = `reservation ${event.reservationId} of task "${event.taskId}" asked for ${String(event.amountUsd)} USD: an amount must be a finite, non-negative number`;
  return { code: 'internal', retryable: false, message, model: event.model };
}

/** What the agent is told of the book's decision on its request. */
function answerOf(e: Reserve, outcome: ReserveOutcome): Answer {
  if (outcome.kind === 'reserved') return { to: e.replyTo, reply: { type: 'LEDGER.RESERVED', reservationId: e.reservationId } };
  if (outcome.kind === 'invalid') return { to: e.replyTo, reply: { type: 'LEDGER.DENIED', reservationId: e.reservationId, error: invalidAmount(e) } };
  const { denial } = outcome;
  const error: ErrorInfo = { code: 'budget_exceeded', retryable: false, message: denialMessage(denial), model: e.model };
  const { taskId, model, amountUsd, budget, limitUsd, spentUsd, reservedUsd } = denial;
  return {
    to: e.replyTo,
    reply: { type: 'LEDGER.DENIED', reservationId: e.reservationId, error },
    report: { type: 'budget:denied', taskId, model, amountUsd, budget, limitUsd, spentUsd, reservedUsd },
  };
}

/** What a settlement that overran budgets says: a `budget:overrun` per budget. */
function overrunAnswers(overruns: readonly Overrun[]): Answer[] {
  return overruns.map(({ taskId, model, reservedUsd, actualUsd, budget, limitUsd, spentUsd }) => ({
    report: { type: 'budget:overrun', taskId, model, reservedUsd, actualUsd, budget, limitUsd, spentUsd },
  }));
}

/**
 * The context's own fields after these answers: a run-budget denial sets `runDenied` for good,
 * and the first one is news for `notify` (after the answers: the agent hears first).
 */
function answered(context: LedgerContext, outbox: Answer[]) {
  const news: Answer[] = [];
  const runDenied = context.runDenied || outbox.some((a) => a.report?.type === 'budget:denied' && a.report.budget === 'run');
  const runOverspent = context.runOverspent || outbox.some((a) => a.report?.type === 'budget:overrun' && a.report.budget === 'run');
  if (runDenied && !context.runDenied) news.push({ to: context.notify, reply: { type: 'LEDGER.RUN_DENIED' } });
  if (runOverspent && !context.runOverspent) news.push({ to: context.notify, reply: { type: 'LEDGER.RUN_OVERSPENT' } });
  return { outbox: context.notify && news.length > 0 ? [...outbox, ...news] : outbox, runDenied, runOverspent };
}

/**
 * The ledger of one run. Spawn it with systemId `ledger`; agents send it LedgerEvents and get
 * LedgerReplies. Its effects are the `report` action (`budget:denied`) and the `balance` action
 * (the run budget's balance, when the run has one).
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
    input: {} as LedgerMachineInput,
  },
  actions: {
    /** Public run event (src forwards it): here only `budget:denied`. */
    report: (_, _event: RunEvent) => {},
    /** The run budget's balance after every event (src hands it to the dispatch hooks). */
    balance: (_, _balance: LedgerBalance) => {},
    /** Answered now, or queued behind the requests waiting for room (FIFO). */
    reserve: assign(({ context, event }) => {
      const e = event as Reserve;
      const outcome = context.book.ask(e);
      return answered(context, outcome === undefined ? [] : [answerOf(e, outcome)]);
    }),
    /** After a settle or release: answer the waiting requests that can be answered now, in order (after what the settlement said). */
    drain: assign(({ context }) => answered(context, [...context.outbox, ...context.book.drain().map(({ request, outcome }) => answerOf(request, outcome))])),
    /** A request released while it waits (its agent went away) leaves the queue unanswered. */
    dropWaiting: assign(({ context, event }) => {
      context.book.withdraw((event as Extract<LedgerEvent, { type: 'LEDGER.RELEASE' }>).reservationId);
      return {};
    }),
    /** A settlement far above its reservation may leave budgets over their limits: said before the queue's answers. */
    settle: assign(({ context, event }) => {
      const e = event as Extract<LedgerEvent, { type: 'LEDGER.SETTLE' }>;
      context.book.settle(e.reservationId, e.actualUsd); // unknown or closed: ignored
      return { outbox: overrunAnswers(context.book.lastOverruns) };
    }),
    release: assign(({ context, event }) => {
      context.book.release((event as Extract<LedgerEvent, { type: 'LEDGER.RELEASE' }>).reservationId); // idem
      return { outbox: [] };
    }),
    /** Sends what the assigns before it decided (each denial's report first), then the balance. */
    answer: enqueueActions(({ context, enqueue }) => {
      for (const { to, reply, report } of context.outbox) {
        if (report) enqueueReport(enqueue, report);
        if (to && reply) enqueue.sendTo(to, reply);
      }
      const budgetLeftUsd = context.book.runLeft();
      // The same cast as enqueueReport's: an action of setup() cannot name another with its types.
      if (budgetLeftUsd !== undefined) (enqueue as unknown as (action: { type: 'balance'; params: LedgerBalance }) => void)({ type: 'balance', params: { budgetLeftUsd } });
    }),
  },
}).createMachine({
  id: 'ledger',
  context: ({ input }) => ({ book: new LedgerBook<Reserve>(input.budgets), runDenied: false, runOverspent: false, outbox: [], notify: input.notify }),
  initial: 'open',
  states: {
    /** Always open: a denied reservation says nothing of a smaller one, or of the next settlement. */
    open: {
      // The balance the run starts from (a resumed run's earlier spend), before any hook asks.
      entry: 'answer',
      on: {
        'LEDGER.RESERVE': { actions: ['reserve', 'answer'] },
        'LEDGER.SETTLE': { actions: ['settle', 'drain', 'answer'] },
        'LEDGER.RELEASE': { actions: ['dropWaiting', 'release', 'drain', 'answer'] },
      },
    },
  },
});
