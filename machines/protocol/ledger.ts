/** Ledger protocol: agent <-> ledger (systemId `ledger`). */
import type { AnyActorRef } from 'xstate';
import type { ErrorInfo } from './data.js';

/** Which budget a reservation did not fit: the run's, the task's, or the (plan) model's. */
export type BudgetKind = 'run' | 'task' | 'model';

/**
 * Reserve the worst-case cost of a call before sending it, then settle it at its actual cost, or
 * release it when the call was never sent. Every reservation is answered at most once: exactly
 * once, unless it is released while it still waits for room.
 */
export type LedgerEvent =
  | {
      type: 'LEDGER.RESERVE';
      reservationId: string;
      taskId: string;
      /** The plan's model name (the key of `perModelUsd`), not the provider's model id. */
      model: string;
      amountUsd: number;
      replyTo: AnyActorRef;
    }
  | { type: 'LEDGER.SETTLE'; reservationId: string; actualUsd: number }
  | { type: 'LEDGER.RELEASE'; reservationId: string };

export type LedgerReply =
  | { type: 'LEDGER.RESERVED'; reservationId: string }
  /** `error.code` is `budget_exceeded` (not retryable) and the message names the budget and its numbers. */
  | { type: 'LEDGER.DENIED'; reservationId: string; error: ErrorInfo };
