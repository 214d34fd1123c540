/**
 * The ledger's bookkeeping: one account per budget (the run, each task, each plan model), the
 * outstanding reservations by id, the requests waiting for room (FIFO), and the counters. Pure
 * logic, mutable on purpose: the ledger keeps one instance in its context by reference and
 * changes it only through these methods, inside `assign`, so every event costs O(1) and never
 * copies a table or the queue.
 *
 * Amounts are kept as integer nano-dollars. Sums and differences of integers are exact, so a
 * budget of $0.30 takes reservations of $0.10 and $0.20 (in floating point they add up to
 * 0.30000000000000004), and `reserved` comes back to exactly 0 once every reservation is closed.
 */
import type { BudgetKind } from './protocol.js';

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/** Caps in USD. An absent cap is no cap; spend against it is still tracked (for the report). */
export interface LedgerBudgets {
  runUsd?: number;
  /** Keyed by task id. */
  perTaskUsd?: Record<string, number>;
  /** Keyed by the plan's model name (an entry of `models`), not the provider's model id. */
  perModelUsd?: Record<string, number>;
  /** What an earlier life of the run already spent (a resumed run continues from there). */
  spent?: { runUsd: number; byTask: Record<string, number>; byModel: Record<string, number> };
}

/** What the ledger is spawned with. */
export interface LedgerInput {
  budgets: LedgerBudgets;
}

/** One budget as the outside sees it, in USD. */
export interface AccountView {
  /** Absent: no cap. */
  limitUsd?: number;
  /** Settled spend (actual costs, overruns included). */
  spentUsd: number;
  /** Held by outstanding reservations. */
  reservedUsd: number;
}

export interface LedgerCounts {
  /** Reservations granted (duplicates of an outstanding id not counted again). */
  reserved: number;
  denied: number;
  settled: number;
  released: number;
  /** Settlements whose actual cost exceeded the reservation. */
  overruns: number;
}

/** Why a reservation was refused: the first budget (run, then task, then model) it did not fit. */
export interface Denial {
  budget: BudgetKind;
  /** The task id or model name whose budget it is (absent for the run). */
  name?: string;
  taskId: string;
  model: string;
  amountUsd: number;
  limitUsd: number;
  spentUsd: number;
  reservedUsd: number;
}

/**
 * A budget a settlement left over its limit: the call cost more than it reserved (a provider's
 * count above the reservation's bound), and that budget's settled spend now passes its cap.
 */
export interface Overrun {
  budget: BudgetKind;
  taskId: string;
  model: string;
  reservedUsd: number;
  actualUsd: number;
  limitUsd: number;
  /** That budget's settled spend after the settlement. */
  spentUsd: number;
}

/** A request for a reservation, as the book queues it (the ledger's carries its reply address too). */
export interface LedgerRequest {
  reservationId: string;
  taskId: string;
  model: string;
  amountUsd: number;
}

export type ReserveOutcome =
  | { kind: 'reserved'; duplicate: boolean }
  | { kind: 'denied'; denial: Denial }
  /** The amount is not a finite, non-negative number: a bug of the caller, refused. */
  | { kind: 'invalid' };

/** A budget's numbers in nano-USD. */
interface Account {
  limit: number | undefined;
  spent: number;
  reserved: number;
}

interface Reservation {
  amount: number;
  taskId: string;
  model: string;
  /** The accounts it is held against, kept so settling is O(1). */
  accounts: [Account, Account, Account];
}

// ---------------------------------------------------------------------------------------------
// Money
// ---------------------------------------------------------------------------------------------

const NANOS_PER_USD = 1e9;
/** The same rounding for reservations and settlements: actual <= reserved in USD stays so in nanos. */
const toNanos = (usd: number) => Math.round(usd * NANOS_PER_USD);
const toUsd = (nanos: number) => nanos / NANOS_PER_USD;
const isAmount = (usd: number) => Number.isFinite(usd) && usd >= 0;

const newAccount = (limitUsd: number | undefined): Account => ({ limit: limitUsd === undefined ? undefined : toNanos(limitUsd), spent: 0, reserved: 0 });

function viewOf(account: Account): AccountView {
  const view: AccountView = { spentUsd: toUsd(account.spent), reservedUsd: toUsd(account.reserved) };
  if (account.limit !== undefined) view.limitUsd = toUsd(account.limit);
  return view;
}

// ---------------------------------------------------------------------------------------------
// The book
// ---------------------------------------------------------------------------------------------

/**
 * All of one run's money. Not thread-safe and needs not be: one actor owns it and handles one
 * event at a time, so a check and the reservation it allows are never split by another agent.
 *
 * @example
 * const book = new LedgerBook({ runUsd: 1 });
 * book.reserve('r1', 't1', 'sonnet', 0.6); // { kind: 'reserved', duplicate: false }
 * book.reserve('r2', 't2', 'sonnet', 0.6); // { kind: 'denied', denial: { budget: 'run', ... } }
 * book.settle('r1', 0.25);                 // spent $0.25, reserved $0
 */
export class LedgerBook<R extends LedgerRequest = LedgerRequest> {
  readonly counts: LedgerCounts = { reserved: 0, denied: 0, settled: 0, released: 0, overruns: 0 };
  /** The budgets the last settlement left over their limits (empty unless it overran one). */
  lastOverruns: Overrun[] = [];
  private readonly runAccount: Account;
  private readonly tasks = new Map<string, Account>();
  private readonly models = new Map<string, Account>();
  private readonly taskLimits: Map<string, number>;
  private readonly modelLimits: Map<string, number>;
  private readonly open = new Map<string, Reservation>();
  /** Requests waiting for room: `queue[head]` on are waiting, in arrival order (a head index keeps taking one O(1)). */
  private queue: R[] = [];
  private head = 0;

  constructor(budgets: LedgerBudgets) {
    this.runAccount = newAccount(budgets.runUsd);
    // Maps, not the records: a task may well be called `constructor`.
    this.taskLimits = new Map(Object.entries(budgets.perTaskUsd ?? {}));
    this.modelLimits = new Map(Object.entries(budgets.perModelUsd ?? {}));
    if (budgets.spent) {
      this.runAccount.spent = toNanos(budgets.spent.runUsd);
      for (const [id, usd] of Object.entries(budgets.spent.byTask)) this.accountOf(this.tasks, this.taskLimits, id).spent = toNanos(usd);
      for (const [name, usd] of Object.entries(budgets.spent.byModel)) this.accountOf(this.models, this.modelLimits, name).spent = toNanos(usd);
    }
  }

  /**
   * Whether `amountUsd` fits now, could fit once outstanding reservations settle (they may cost
   * less than they hold), or can never fit (settled spend alone leaves no room). Changes nothing.
   */
  verdict(taskId: string, model: string, amountUsd: number): 'now' | 'later' | 'never' {
    if (!isAmount(amountUsd)) return 'never'; // reserve() refuses it at once, with its own reason
    const amount = toNanos(amountUsd);
    let verdict: 'now' | 'later' = 'now';
    for (const account of [this.runAccount, this.peek(this.tasks, this.taskLimits, taskId), this.peek(this.models, this.modelLimits, model)]) {
      if (account.limit === undefined) continue;
      if (account.spent + amount > account.limit) return 'never';
      if (account.spent + account.reserved + amount > account.limit) verdict = 'later';
    }
    return verdict;
  }

  /**
   * Holds `amountUsd` against the run's, the task's and the model's budgets if it fits in all
   * three, counting settled spend and every outstanding reservation. A reservation id already
   * outstanding is granted again without being charged twice.
   */
  reserve(reservationId: string, taskId: string, model: string, amountUsd: number): ReserveOutcome {
    if (this.open.has(reservationId)) return { kind: 'reserved', duplicate: true };
    if (!isAmount(amountUsd)) return { kind: 'invalid' };
    const amount = toNanos(amountUsd);
    const accounts: Reservation['accounts'] = [this.runAccount, this.accountOf(this.tasks, this.taskLimits, taskId), this.accountOf(this.models, this.modelLimits, model)];
    const kinds: BudgetKind[] = ['run', 'task', 'model'];
    // Name the budget that can never fit (settled spend alone leaves no room) before one that
    // only lacks room now: that is the budget to raise.
    const never = accounts.findIndex((a) => a.limit !== undefined && a.spent + amount > a.limit);
    const order = never >= 0 ? [never] : [0, 1, 2];
    for (const i of order) {
      const account = accounts[i]!;
      if (account.limit === undefined || account.spent + account.reserved + amount <= account.limit) continue;
      this.counts.denied++;
      const budget = kinds[i]!;
      const denial: Denial = { budget, taskId, model, amountUsd, limitUsd: toUsd(account.limit), spentUsd: toUsd(account.spent), reservedUsd: toUsd(account.reserved) };
      if (budget !== 'run') denial.name = budget === 'task' ? taskId : model;
      return { kind: 'denied', denial };
    }
    for (const account of accounts) account.reserved += amount;
    this.open.set(reservationId, { amount, taskId, model, accounts });
    this.counts.reserved++;
    return { kind: 'reserved', duplicate: false };
  }

  /**
   * A request as the ledger answers it: a repeat of an outstanding reservation at once (not
   * charged twice); one that could fit once outstanding reservations settle waits, and so does
   * every request behind one that waits (FIFO, no starvation): undefined, queued. Otherwise it is
   * reserved or refused now.
   */
  ask(request: R): ReserveOutcome | undefined {
    if (!this.open.has(request.reservationId)) {
      const verdict = this.verdict(request.taskId, request.model, request.amountUsd);
      if (verdict !== 'never' && (verdict === 'later' || this.waitingCount > 0)) {
        this.queue.push(request);
        return undefined;
      }
    }
    return this.reserve(request.reservationId, request.taskId, request.model, request.amountUsd);
  }

  /**
   * After a settle or release: the waiting requests that can be answered now, head first, each
   * reserved or refused; stops at the first that still only lacks room held by reservations.
   */
  drain(): { request: R; outcome: ReserveOutcome }[] {
    const answered: { request: R; outcome: ReserveOutcome }[] = [];
    while (this.head < this.queue.length) {
      const request = this.queue[this.head]!;
      if (!this.open.has(request.reservationId) && this.verdict(request.taskId, request.model, request.amountUsd) === 'later') break;
      this.head++;
      answered.push({ request, outcome: this.reserve(request.reservationId, request.taskId, request.model, request.amountUsd) });
    }
    this.compact();
    return answered;
  }

  /** A waiting request released (its agent went away) leaves the queue unanswered; false if none waits with that id. */
  withdraw(reservationId: string): boolean {
    const i = this.queue.findIndex((r, at) => at >= this.head && r.reservationId === reservationId);
    if (i < 0) return false;
    this.queue.splice(i, 1);
    return true;
  }

  /** The requests waiting for room, head first (a copy: O(waiting), for reports and tests). */
  get waiting(): R[] {
    return this.queue.slice(this.head);
  }

  get waitingCount(): number {
    return this.queue.length - this.head;
  }

  /** Drops the answered part of the queue once it is most of it (amortised O(1) per request). */
  private compact(): void {
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Replaces a reservation by what the call actually cost, even above the reservation: that is
   * what was spent. An actual that is not a finite, non-negative number counts as the whole
   * reservation (the worst case we held). Unknown or already closed ids: false, nothing changes.
   * A settlement above its reservation that leaves budgets over their limits says which in
   * `lastOverruns` (run, task, model order); any other settlement leaves it empty.
   */
  settle(reservationId: string, actualUsd: number): boolean {
    this.lastOverruns = [];
    const reservation = this.close(reservationId);
    if (reservation === undefined) return false;
    const actual = isAmount(actualUsd) ? toNanos(actualUsd) : reservation.amount;
    for (const account of reservation.accounts) account.spent += actual;
    this.counts.settled++;
    if (actual > reservation.amount) {
      this.counts.overruns++;
      this.lastOverruns = this.overrunsOf(reservation, actual);
    }
    return true;
  }

  private overrunsOf(reservation: Reservation, actual: number): Overrun[] {
    const kinds: BudgetKind[] = ['run', 'task', 'model'];
    return reservation.accounts.flatMap((account, i): Overrun[] => {
      if (account.limit === undefined || account.spent <= account.limit) return [];
      return [{ budget: kinds[i]!, taskId: reservation.taskId, model: reservation.model, reservedUsd: toUsd(reservation.amount), actualUsd: toUsd(actual), limitUsd: toUsd(account.limit), spentUsd: toUsd(account.spent) }];
    });
  }

  /** Drops a reservation without spend (the call was never sent). Unknown or closed ids: false. */
  release(reservationId: string): boolean {
    if (this.close(reservationId) === undefined) return false;
    this.counts.released++;
    return true;
  }

  /** Whether a reservation with this id is outstanding (a repeat of it is answered at once). */
  isOpen(reservationId: string): boolean {
    return this.open.has(reservationId);
  }

  /** Reservations neither settled nor released yet. */
  get outstanding(): number {
    return this.open.size;
  }

  /** An account as it stands, without opening one for a name not seen yet. */
  private peek(accounts: Map<string, Account>, limits: Map<string, number>, name: string): Account {
    return accounts.get(name) ?? newAccount(limits.get(name));
  }

  run(): AccountView {
    return viewOf(this.runAccount);
  }

  /** What is left of the run budget (settled spend and outstanding reservations taken off); undefined without one. */
  runLeft(): number | undefined {
    const run = this.run();
    return run.limitUsd === undefined ? undefined : run.limitUsd - run.spentUsd - run.reservedUsd;
  }

  /** A task's account, once the task reserved anything (whether or not it has a cap). */
  task(taskId: string): AccountView | undefined {
    const account = this.tasks.get(taskId);
    return account && viewOf(account);
  }

  /** A plan model's account, once a call of that model reserved anything. */
  model(model: string): AccountView | undefined {
    const account = this.models.get(model);
    return account && viewOf(account);
  }

  /** Every account, for the run report. O(tasks + models): not for per-event use. */
  summary(): { run: AccountView; tasks: Record<string, AccountView>; models: Record<string, AccountView>; counts: LedgerCounts } {
    const views = (accounts: Map<string, Account>) => Object.fromEntries([...accounts].map(([name, account]) => [name, viewOf(account)]));
    return { run: this.run(), tasks: views(this.tasks), models: views(this.models), counts: { ...this.counts } };
  }

  private accountOf(accounts: Map<string, Account>, limits: Map<string, number>, name: string): Account {
    let account = accounts.get(name);
    if (account === undefined) accounts.set(name, (account = newAccount(limits.get(name))));
    return account;
  }

  private close(reservationId: string): Reservation | undefined {
    const reservation = this.open.get(reservationId);
    if (reservation === undefined) return undefined;
    this.open.delete(reservationId);
    for (const account of reservation.accounts) account.reserved -= reservation.amount;
    return reservation;
  }
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/** Dollars as a person reads them: to the millionth, trailing zeros dropped. */
export const formatUsd = (usd: number) => `$${String(Math.round(usd * 1e6) / 1e6)}`;

/** What a denial tells the user: which budget, its numbers, the amount asked, and what to do. */
export function denialMessage(d: Denial): string {
  const which = d.budget === 'run' ? 'run' : `${d.budget} "${d.name}"`;
  return (
    `${which} budget exceeded: limit ${formatUsd(d.limitUsd)}, spent ${formatUsd(d.spentUsd)}, reserved ${formatUsd(d.reservedUsd)}, ` +
    `asked ${formatUsd(d.amountUsd)} (the worst case of a call of task "${d.taskId}" on model "${d.model}"). ` +
    `Raise that budget, or lower the call's maxTokens.`
  );
}
