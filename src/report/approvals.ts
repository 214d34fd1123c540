/**
 * Approvals in the report: each approval task with what it asked and the draft it was shown,
 * a row per decision (who, when, note, what it did), and on the live page, for an approval that
 * waits now, the question and the draft with Approve / Reject buttons and a note field (the live
 * script posts the decision; src/ui/live.ts takes it). Pure: the stream (and the result) in, HTML out.
 */
import type { RunEvent } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/tasks/results.js';
import type { TimedRunEvent } from '../swarm.js';
import { OUTPUT_CHARS } from './extras.js';
import { esc, table } from './format.js';

export interface DecisionReport {
  round: number;
  approved: boolean;
  /** `approved`, `revise` (the draft went back with the note), `rejected`. */
  outcome: string;
  /** `cli`, `ui`, `code`, `timeout`. */
  by: string;
  /** When the stream got it (ms since the epoch). */
  at: number;
  note?: string;
  edited: boolean;
}

export interface ApprovalReport {
  taskId: string;
  approves: string;
  prompt: string;
  /** The draft it was last shown (cut to the report's output size). */
  draft: string;
  truncated: boolean;
  round: number;
  maxRounds: number;
  /** It waits for a decision now (its last request has none, and the result, if any, agrees). */
  waiting: boolean;
  decisions: DecisionReport[];
}

type Requested = Extract<RunEvent, { type: 'approval:requested' }>;

/** The approvals the stream tells of, in the order they first asked. */
export function approvalsOf(events: readonly TimedRunEvent[], result?: RunResult): ApprovalReport[] {
  const out = new Map<string, ApprovalReport>();
  const ask = (e: Requested) => {
    const a = out.get(e.taskId) ?? { taskId: e.taskId, approves: e.approves, prompt: e.prompt, draft: '', truncated: false, round: 0, maxRounds: 0, waiting: false, decisions: [] };
    Object.assign(a, { approves: e.approves, prompt: e.prompt, draft: e.draft.slice(0, OUTPUT_CHARS), truncated: e.draft.length > OUTPUT_CHARS, round: e.round, maxRounds: e.maxRounds, waiting: true });
    out.set(e.taskId, a);
  };
  for (const e of events) {
    if (e.type === 'approval:requested') ask(e);
    else if (e.type === 'approval:decided') {
      const a = out.get(e.taskId);
      if (!a) continue;
      a.waiting = false;
      a.decisions.push({ round: e.round, approved: e.approved, outcome: e.outcome, by: e.by, at: e.decidedAt, edited: e.edited === true, ...(e.note !== undefined ? { note: e.note } : {}) });
    } else if ((e.type === 'task:cancelled' || e.type === 'task:skipped') && out.has(e.taskId)) out.get(e.taskId)!.waiting = false;
  }
  if (result) for (const a of out.values()) a.waiting = a.waiting && result.tasks[a.taskId]?.status === 'waiting';
  return [...out.values()];
}

/** `2026-01-05 10:20:30 UTC` for a time since the epoch; a stream on another clock keeps its number. */
function when(at: number): string {
  return at > 1e12 ? new Date(at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : String(at);
}

const OUTCOME: Record<string, string> = { approved: 'approved', revise: 'rejected: sent back', rejected: 'rejected' };

export interface ApprovalsView {
  /** The page can post decisions: buttons for the approvals that wait. */
  actions: boolean;
  /** The run waits for them (holdApprovals) rather than ending `paused`. */
  holds: boolean;
}

/** The Approvals section: empty when the run has none. */
export function approvalSection(list: readonly ApprovalReport[], view?: ApprovalsView): string {
  if (list.length === 0) return '';
  const waiting = list.filter((a) => a.waiting);
  const cards = waiting.map((a) => waitingCard(a, view)).join('');
  const rows = list.flatMap((a) => a.decisions.map((d) => [a.taskId, a.approves, `${d.round} of ${a.maxRounds}`, OUTCOME[d.outcome] ?? d.outcome, d.by, when(d.at), d.note ?? '', d.edited ? 'yes' : '']));
  const decisions = rows.length > 0
    ? `<h3>Decisions</h3>${table([{ label: 'approval', id: true }, { label: 'approves', id: true }, { label: 'round' }, { label: 'decision' }, { label: 'by' }, { label: 'when' }, { label: 'note', msg: true }, { label: 'edited output' }], rows)}`
    : '<p class="note">No decision yet.</p>';
  return `<section id="approvals"><h2>Approvals <span class="count">${waiting.length} waiting</span></h2>${cards}${decisions}${note(waiting.length > 0, view)}</section>`;
}

/** What happens to a waiting approval, said where it waits. */
function note(anyWaiting: boolean, view: ApprovalsView | undefined): string {
  if (!anyWaiting) return '';
  if (view?.actions && view.holds) return '<p class="note">The run waits for your decision on this page (it was started with <code>--ui</code> at a terminal). <code>swarmstate approve &lt;runId&gt; &lt;taskId&gt;</code> works too.</p>';
  if (view?.actions) return '<p class="note">A decision here applies at once. If nothing else can run, the run ends <code>paused</code>: then decide with <code>swarmstate approve &lt;runId&gt; &lt;taskId&gt;</code> and continue with <code>swarmstate resume &lt;runId&gt;</code>.</p>';
  return '<p class="note">Decide with <code>swarmstate approve &lt;runId&gt; &lt;taskId&gt; [--reject] [--note &lt;text&gt;]</code>, then continue the run with <code>swarmstate resume &lt;runId&gt;</code>.</p>';
}

/** A waiting approval: its question and draft, and on the live page the decision's form (posted by the live script). */
function waitingCard(a: ApprovalReport, view: ApprovalsView | undefined): string {
  const round = a.round > 1 ? ` <span class="facts">round ${a.round} of ${a.maxRounds}</span>` : '';
  const draft = `<pre class="output">${esc(a.draft)}</pre>${a.truncated ? '<p class="note">(draft cut here in the page; <code>swarmstate show</code> has it all)</p>' : ''}`;
  const form = view?.actions
    ? `<div class="approve-form" data-task="${esc(a.taskId)}"><textarea name="note" rows="2" maxlength="20000" placeholder="note (optional; with Reject, the draft goes back with it)" data-note="${esc(`${a.taskId}#${a.round}`)}"></textarea>` +
      `<button type="button" class="approve-btn" data-approved="true">Approve</button> <button type="button" class="approve-btn" data-approved="false">Reject</button></div>`
    : '';
  return `<div class="approval waiting"><h3><code>${esc(a.taskId)}</code> waits: ${esc(a.prompt)}${round}</h3><p class="note">The draft of <code>${esc(a.approves)}</code>:</p>${draft}${form}</div>`;
}
