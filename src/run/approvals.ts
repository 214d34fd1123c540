/**
 * Decisions on approval tasks, from wherever they come: code (`run.approve`, `swarm.approve`),
 * the CLI (`swarmstate approve`, through the journal) and the live page. A decision for a run
 * this process runs goes straight to its supervisor; one for a run it does not (paused, or run
 * by another process) is written to the approval's journal row (`pending`), where a resume, or
 * the process that runs it (it watches the journal while an approval waits), picks it up.
 */
import type { Actor } from 'xstate';
import type { ApprovalDecision, DecisionSource, OutputCheckSpec as OutputCheck } from '../../machines/protocol.js';
import type { supervisorMachine } from '../../machines/supervisor/machine.js';
import type { AcceptSpec, OutputSpec } from '../plan/planTypes.js';
import { checkOutput, outputCheckOf } from '../plan/structured.js';
import type { ReviewExtra, Store, TaskRow } from '../store/index.js';

/** A decision as callers give it. */
export interface Decision {
  approved: boolean;
  /** Why. With a rejection and rounds left, the approved task runs again with this note. */
  note?: string;
  /** An edited output that replaces the approved task's (text, or a JSON value for a task with an output schema). */
  output?: unknown;
}

export type ApprovalErrorCode = 'RUN_NOT_FOUND' | 'TASK_NOT_FOUND' | 'NOT_WAITING' | 'INVALID_DECISION' | 'NO_STORE';

/** An approval that cannot be made: the run or task does not exist, the task is not waiting, the decision is malformed. */
export class ApprovalError extends Error {
  constructor(
    readonly code: ApprovalErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ApprovalError';
  }
}

/** Longest note kept: a note goes into a prompt. */
const MAX_NOTE = 20_000;

/** The decision checked and stamped (who, when); an edited output as the text the task keeps. */
export function decisionOf(input: unknown, by: DecisionSource, at: number, where: string): ApprovalDecision {
  const d = input as Partial<Decision> | null;
  if (d === null || typeof d !== 'object' || typeof d.approved !== 'boolean') throw new ApprovalError('INVALID_DECISION', `${where}: a decision is { approved: true | false, note?, output? }`);
  if (d.note !== undefined && (typeof d.note !== 'string' || d.note.length > MAX_NOTE)) throw new ApprovalError('INVALID_DECISION', `${where}: note must be text of at most ${MAX_NOTE} characters`);
  const out: ApprovalDecision = { approved: d.approved, by, at };
  if (d.note !== undefined && d.note !== '') out.note = d.note;
  if (d.output !== undefined) {
    if (!d.approved) throw new ApprovalError('INVALID_DECISION', `${where}: an edited output comes with an approval, not a rejection`);
    out.output = typeof d.output === 'string' ? d.output : JSON.stringify(d.output);
    if (out.output === undefined) throw new ApprovalError('INVALID_DECISION', `${where}: output must be text or a JSON value`);
  }
  return out;
}

const notWaiting = (runId: string, taskId: string, status: string) =>
  new ApprovalError('NOT_WAITING', `task "${taskId}" of run ${runId} is not waiting for approval (it is ${status})`);

/** A decision for a run this process runs: checked against its table, then sent. */
export function approveLive(actor: Actor<typeof supervisorMachine>, runId: string, taskId: string, decision: ApprovalDecision): void {
  const snapshot = actor.getSnapshot();
  const table = snapshot.context.table;
  if (snapshot.status !== 'active' || !snapshot.matches('running')) throw notWaiting(runId, taskId, `in a run that is ${snapshot.status === 'active' ? 'stopping' : 'over'}`);
  let status: string;
  try {
    status = table.status(taskId);
  } catch {
    throw new ApprovalError('TASK_NOT_FOUND', `run ${runId} has no task "${taskId}"`);
  }
  if (table.spec(taskId).kind !== 'approval') throw new ApprovalError('NOT_WAITING', `task "${taskId}" of run ${runId} is not an approval task`);
  if (status !== 'waiting') throw notWaiting(runId, taskId, status);
  const target = table.spec(taskId).reviews;
  actor.send({ type: 'APPROVAL.DECIDE', taskId, decision: checkedEdit(decision, target, target === undefined ? undefined : table.spec(target).output) });
}

/** A decision for a journaled run no process here runs: kept in the approval's row until the run applies it. */
export function approveJournaled(store: Store, runId: string, taskId: string, decision: ApprovalDecision): void {
  const record = store.getRun(runId);
  if (!record) throw new ApprovalError('RUN_NOT_FOUND', `no run ${runId} in ${store.path}`);
  const rows = store.loadTasks(runId);
  const row = rows.find((r) => r.taskId === taskId);
  const specs = journaledSpecs(record.plan, rows);
  // A task of the plan that has no row yet has not started: it waits for its deps, not for a person.
  if (!row) throw specs.has(taskId) ? notWaiting(runId, taskId, 'pending') : new ApprovalError('TASK_NOT_FOUND', `run ${runId} has no task "${taskId}"`);
  if (row.status !== 'waiting') throw notWaiting(runId, taskId, row.status);
  const extra = (row.extra ?? {}) as ReviewExtra;
  // Two decisions for one wait: the second would silently replace the first, which may already be applied.
  if (extra.pending) {
    const p = extra.pending;
    throw new ApprovalError('NOT_WAITING', `task "${taskId}" of run ${runId} already has a decision not yet applied (${p.approved ? 'approved' : 'rejected'} by ${p.by} at ${new Date(p.at).toISOString()}): the run applies it when it continues`);
  }
  const target = specs.get(taskId)?.approves;
  const targetSpec = target === undefined ? undefined : specs.get(target);
  const checked = checkedEdit(decision, target, targetSpec ? outputCheckOf(targetSpec.output, targetSpec.accept) : undefined);
  store.setTaskExtra(runId, taskId, { ...extra, pending: checked } satisfies ReviewExtra);
  store.flush();
}

/** An edited output checked as the approved task's own answers are (schema, minChars, pattern): the text it keeps. */
function checkedEdit(decision: ApprovalDecision, target: string | undefined, check: OutputCheck | undefined): ApprovalDecision {
  if (decision.output === undefined || !check) return decision;
  const verdict = checkOutput(decision.output, check);
  if (!verdict.ok) throw new ApprovalError('INVALID_DECISION', `the edited output of "${target ?? '?'}" fails its checks: ${verdict.problems.join('; ')}`);
  return { ...decision, output: verdict.text };
}

type JournaledSpec = { approves?: string; output?: OutputSpec; accept?: AcceptSpec };

/** The tasks of a journaled run by id: the plan's, and those made at run time (their rows' specs). */
function journaledSpecs(plan: unknown, rows: readonly TaskRow[]): Map<string, JournaledSpec> {
  const out = new Map<string, JournaledSpec>();
  const add = (t: unknown) => {
    const id = (t as { id?: unknown } | null)?.id;
    if (typeof id === 'string') out.set(id, t as JournaledSpec);
  };
  for (const t of (plan as { tasks?: unknown[] } | null)?.tasks ?? []) add(t);
  for (const r of rows) if (r.spec !== null && !out.has(r.taskId)) add({ ...(r.spec as object), id: r.taskId });
  return out;
}

/** The decisions the journal holds for approvals that wait: a resume applies them as the approvals wait again. */
export function pendingDecisions(rows: readonly TaskRow[]): Record<string, ApprovalDecision> {
  const out: Record<string, ApprovalDecision> = Object.create(null) as Record<string, ApprovalDecision>;
  for (const row of rows) {
    const pending = (row.extra as ReviewExtra | null)?.pending;
    if (row.status === 'waiting' && pending && typeof pending.approved === 'boolean') out[row.taskId] = pending;
  }
  return out;
}

/** How often a run with approvals waiting reads its journal for decisions made elsewhere. */
export const DECISION_POLL_MS = 250;

/**
 * While approvals of a live run wait, its journal is read for decisions another process wrote
 * (`swarmstate approve`): each goes to the supervisor once. Returns the function that stops it.
 */
export function watchDecisions(store: Store, runId: string, actor: () => Actor<typeof supervisorMachine> | undefined): { wake(): void; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  const sent = new Set<string>();
  const tick = () => {
    const a = actor();
    if (!a || a.getSnapshot().status !== 'active' || a.getSnapshot().context.table.counts.waiting === 0) {
      timer = undefined;
      return;
    }
    try {
      for (const [taskId, decision] of Object.entries(pendingDecisions(store.loadTasks(runId)))) {
        const key = `${taskId}\u0000${decision.at}`;
        if (sent.has(key) || a.getSnapshot().context.table.status(taskId) !== 'waiting') continue;
        sent.add(key);
        a.send({ type: 'APPROVAL.DECIDE', taskId, decision });
      }
    } catch {
      // A journal that cannot be read now is read again at the next tick.
    }
    timer = setTimeout(tick, DECISION_POLL_MS);
    timer.unref();
  };
  return {
    wake: () => {
      if (timer !== undefined) return;
      timer = setTimeout(tick, DECISION_POLL_MS);
      timer.unref();
    },
    stop: () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
