/**
 * `kind: "review"`: reviews the output of the task named in `reviews` and sends it back with
 * findings, `maxRounds` times at most (machines/review.ts reads the verdict).
 */
import { modelAndPrompt, NONE, textUnlessSchema } from './common.js';
import type { PlanKind } from './types.js';

export const review: PlanKind = {
  doc: 'reviews the task named in `reviews` and sends it back with feedback, `maxRounds` times at most',
  fields: { reviews: 'reviews another task', maxRounds: 'has rounds' },
  callsModel: true,
  runs: 'model',
  asSubTask: true,
  requires: { reviews: 'required: the id of the task this review task reviews' },
  required: (t) => modelAndPrompt(t),
  refused: () => NONE,
  watches: {
    field: 'reviews',
    stage: 1,
    self: 'a task cannot review itself',
    taken: 'already has a reviewer',
    refuses(kind, id) {
      if (kind === 'plan') return `task "${id}" is a planner: its sub-tasks cannot be taken back, review them instead`;
      if (kind === 'approval') return `task "${id}" is an approval: review the task it approves`;
      return undefined;
    },
    waitNote: ' (a task that depends on a reviewed task also waits for its review)',
  },
  output: textUnlessSchema,
  noArray: () => 'a review gives a verdict',
};
