/**
 * `kind: "approval"`: a task that waits for a person. Taken from the ready queue, it starts an
 * attempt and waits (`waiting`: no agent, no slot), with `approval:requested` carrying the draft
 * (the output of the task it approves, `reviews`). A decision (APPROVAL.DECIDE: from code, the
 * CLI through the journal, the page) settles it as a reviewer's verdict is settled: approved, it
 * completes and what waited on the draft goes on (an edited output replaces the draft first);
 * rejected with a note and a round left, the draft goes back with the note and the approval asks
 * again; otherwise it fails. Its `timeoutMs` (none by default) ends the wait as a rejection.
 *
 * A decision that arrives before the approval waits (made on a paused run, read back by a
 * resume) is kept in `context.approvals.early` and applied as soon as it does.
 */
import { enqueueReport } from '../kit.js';
import type { ApprovalDecision } from '../protocol.js';
import type { SupervisedTask } from '../tasks/types.js';
import { reportFailure, reportFlow, reportReview } from '../supervisor/settle.js';
import type { Enqueue, SupervisorContext } from '../supervisor/types.js';

/** The id of an approval's timeout (one scheduled event per waiting approval with a timeoutMs). */
export const timerOf = (taskId: string) => `approval:${taskId}`;

/** An approval taken from the ready queue: it waits, and asks (a decision already made is applied at once). */
export function requestApproval(context: SupervisorContext, enqueue: Enqueue, spec: SupervisedTask, attempt: number): void {
  const table = context.table;
  if (!table.awaitDecision(spec.id, attempt)) return;
  const target = spec.reviews ?? '';
  const round = table.roundsOf(spec.id) + 1;
  const maxRounds = spec.maxRounds ?? 2;
  enqueueReport(enqueue, {
    type: 'approval:requested',
    taskId: spec.id,
    attempt,
    approves: target,
    prompt: spec.question ?? spec.prompt,
    draft: table.outputText(target),
    round,
    maxRounds,
    ...(spec.decisionTimeoutMs !== undefined ? { timeoutMs: spec.decisionTimeoutMs } : {}),
  });
  const early = context.approvals.early.get(spec.id);
  if (early) {
    context.approvals.early.delete(spec.id);
    applyDecision(context, enqueue, spec.id, early);
    return;
  }
  if (spec.decisionTimeoutMs !== undefined) {
    enqueue.raise({ type: 'APPROVAL.TIMEOUT', taskId: spec.id, round }, { id: timerOf(spec.id), delay: spec.decisionTimeoutMs });
  }
}

/** A decision: for a waiting approval, applied; for one not yet waiting (a resume's), kept until it waits; else ignored (src checks first). */
export function applyDecision(context: SupervisorContext, enqueue: Enqueue, taskId: string, decision: ApprovalDecision): void {
  const table = context.table;
  if (table.status(taskId) !== 'waiting') return;
  const spec = table.spec(taskId);
  const attempt = table.attemptsOf(taskId);
  const settlement = table.decide(taskId, decision, context.stop === null);
  if (settlement.kind === 'stale') return;
  enqueue.cancel(timerOf(taskId));
  switch (settlement.kind) {
    case 'completed': {
      const { requests, retries, usage } = table.countersNow(taskId);
      enqueueReport(enqueue, { type: 'task:completed', taskId, attempt, output: table.outputText(taskId), usage, requests, retries, taskUsage: usage });
      reportFlow(enqueue, table, settlement);
      break;
    }
    case 'revise':
      reportReview(enqueue, taskId, attempt, settlement.review, table);
      enqueueReport(enqueue, { type: 'task:queued', taskId: settlement.review.target });
      break;
    case 'failed':
      reportFailure(context, enqueue, taskId, attempt, table.errorOf(taskId)!, settlement);
      break;
  }
  // Last: the journal keeps the decision in the approval's row after what the settlement wrote there.
  enqueueReport(enqueue, {
    type: 'approval:decided',
    taskId,
    attempt,
    approves: spec.reviews ?? '',
    round: table.roundsOf(taskId),
    approved: decision.approved,
    ...(decision.note !== undefined ? { note: decision.note } : {}),
    by: decision.by,
    decidedAt: decision.at,
    ...(decision.output !== undefined ? { edited: true, output: decision.output } : {}),
    outcome: decision.approved ? 'approved' : settlement.kind === 'revise' ? 'revise' : 'rejected',
  });
}

/** Its timeoutMs passed with no decision (for the round it was set for): a rejection by `timeout`. */
export function expireApproval(context: SupervisorContext, enqueue: Enqueue, taskId: string, round: number, now: number): void {
  if (context.table.status(taskId) !== 'waiting' || context.table.roundsOf(taskId) + 1 !== round) return;
  const ms = context.table.spec(taskId).decisionTimeoutMs ?? 0;
  applyDecision(context, enqueue, taskId, { approved: false, note: `no decision within ${ms} ms (timeoutMs)`, by: 'timeout', at: now });
}
