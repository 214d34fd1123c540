/**
 * What each task kind does when the supervisor takes it from the ready queue: the one place
 * dispatch asks. `handled`: the kind did what it does here (a map or reduce expanded or collected,
 * an approval now waits); `agent`: it runs as an agent (task, plan, review, a reduce that fits one
 * call); a `FnStepInput`: it runs as a function step (fn, or a map's item or a reduce's merge that
 * names a function). The kinds' modules: fn.ts, approval.ts, and for map and reduce
 * ../mapReduceSteps.ts; a planner's and a reviewer's answers are read when they settle (RunTable).
 */
import { aggregateStep, inputsOf } from '../mapReduceSteps.js';
import { failAggregate } from '../supervisor/settle.js';
import type { Enqueue, SupervisorContext } from '../supervisor/types.js';
import type { Feedback, SupervisedTask } from '../tasks/types.js';
import { requestApproval } from './approval.js';
import { fnInputOf, type FnStepInput } from './fn.js';

export type { FnStepInput } from './fn.js';

export function startByKind(context: SupervisorContext, enqueue: Enqueue, spec: SupervisedTask, attempt: number, feedback?: Feedback): 'handled' | 'agent' | FnStepInput {
  switch (spec.kind) {
    case 'approval':
      requestApproval(context, enqueue, spec, attempt);
      return 'handled';
    case 'fn':
      return fnInputOf(context.table, spec, attempt, undefined, feedback);
    case 'map':
    case 'reduce': {
      const step = aggregateStep(context, enqueue, spec, attempt, (id, n, error) => failAggregate(context, enqueue, id, n, error));
      if (step === 'done') return 'handled';
      if (spec.kind === 'reduce' && spec.fn !== undefined) {
        const refs = inputsOf(context.table, spec);
        return fnInputOf(context.table, spec, attempt, refs.ok ? refs.list : [], feedback);
      }
      return 'agent';
    }
    default:
      return 'agent';
  }
}
