/**
 * `kind: "approval"`: a person decides on the output of the task named in `approves` before its
 * dependents read it. The run waits for the decision (journaled); a rejection with a note sends
 * the approved task back, `maxRounds` times at most. Its output is the decision,
 * `{ "approved": boolean, "note"?: string }`. It calls no model: the fields of a model call are refused.
 */
import { MODEL_CALL_FIELDS, refusals } from './common.js';
import type { FieldProblem, PlanKind } from './types.js';

const ASKS_A_PERSON = 'an approval asks a person, not a model';
const NOT_A_MODEL_CALL = MODEL_CALL_FIELDS.filter((f) => f !== 'prompt' && f !== 'accept');

/** Why a task of these kinds cannot be approved, after `task "<id>" is `. */
const WHY_NOT: Readonly<Record<string, string>> = {
  approval: 'an approval: a person decides on the task that made the output, approve that one',
  map: 'a map, whose output its items make: approve a task that reads it',
  reduce: 'a reduce, whose output its groups make: approve a task that reads it',
  plan: 'a planner: its sub-tasks cannot be taken back, approve a task that reads its output',
  review: 'a review: approve the task it reviews (the approval then waits for the review)',
};

export const approval: PlanKind = {
  doc: 'a person approves the output of the task named in `approves` (or rejects it with a note, sending it back) before its dependents read it',
  fields: { approves: 'approves another task', maxRounds: 'has rounds' },
  callsModel: false,
  runs: 'person',
  // Where a run stops for a person is the plan author's choice, not a model's.
  asSubTask: 'only the plan itself asks a person to decide',
  requires: { approves: 'required: the id of the task a person approves' },
  required: (t) => (t.prompt === undefined ? [{ field: 'prompt', message: 'required: the question the person answers (e.g. "Send this reply?")' }] : []),
  refused(t) {
    const out: FieldProblem[] = refusals(t, NOT_A_MODEL_CALL, ASKS_A_PERSON, { budgetUsd: 'a decision costs nothing' });
    if (t.maxRetries !== undefined) out.push({ field: 'maxRetries', message: 'an approval is not retried: a rejection with a note sends the approved task back, "maxRounds" times at most' });
    if (t.output !== undefined) out.push({ field: 'output', message: 'an approval\'s output is the person\'s decision, {"approved": true|false, "note"?: "..."}: it has no "output"' });
    out.push(...refusals(t, ['accept'], ASKS_A_PERSON, { accept: 'the person is the gate' }));
    return out;
  },
  watches: {
    field: 'approves',
    stage: 2,
    self: 'an approval cannot approve itself',
    taken: 'already has an approval',
    refuses: (kind, id) => (Object.hasOwn(WHY_NOT, kind) ? `task "${id}" is ${WHY_NOT[kind]}` : undefined),
    waitNote: ' (a task that depends on an approved task also waits for its approval)',
  },
  output: () => 'json',
  noArray: () => 'an approval gives a decision',
};
