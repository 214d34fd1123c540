/**
 * What the journal keeps in a task row's `extra` column, by kind of task: opaque to the store,
 * read back by a resume, a retry, `show` and the report.
 */
import type { ApprovalDecision, DecisionSource } from '../../machines/protocol.js';

/** What the journal keeps of a review in a task row's `extra` (the reviewer's rounds; a reopened draft's feedback). */
export interface ReviewExtra {
  rounds?: number;
  approved?: boolean;
  feedback?: { round: number; maxRounds: number; findings: string };
  /** An approval: its last decision, as `approval:decided` told it. */
  decision?: { approved: boolean; note?: string; by: DecisionSource; at: number; edited?: boolean; outcome: string };
  /** An approval whose decision replaced the approved task's output: that output (a resume reads it)... */
  edited?: string;
  /** ...and the task it replaced it in. */
  approves?: string;
  /** An approval: a decision made while no process applied it (`swarmstate approve`): the run applies it when it waits. */
  pending?: ApprovalDecision;
}

/**
 * What the journal keeps of a task skipped by its condition in its row's `extra` (the `reason`
 * column has the words): a resume keeps its cause, and a retry does not run it again unless a dep
 * of it runs again. No `skipped`: a dependency skipped it.
 */
export interface SkipExtra {
  skipped: 'condition';
}

/** Why a skipped task's row says it was skipped. */
export const skipCauseOf = (extra: unknown): 'condition' | 'dependency' =>
  (extra as Partial<SkipExtra> | null)?.skipped === 'condition' ? 'condition' : 'dependency';

/** What the journal keeps of a planner in its row's `extra`: the sub-tasks of its completed answer. */
export interface PlannerExtra {
  subtasks: string[];
}
