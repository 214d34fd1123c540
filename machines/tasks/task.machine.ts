/**
 * The task lifecycle of lifecycle.ts as a statechart, to paste into the Stately editor or walk
 * with @xstate/graph. The run table does not run it (one actor per task would cost a 10,000-task
 * run more than the table lookup it mirrors); test/machines/lifecycle.test.ts checks that it has
 * the table's states and transitions, no more and no fewer.
 *
 * `completed` is not a final state here: a reviewer can send the task back (REVISE). It is final
 * for the run's count (LIFECYCLE.completed.final).
 */
import { setup } from 'xstate';
import type { TaskEvent } from './lifecycle.js';

export const taskLifecycleMachine = setup({
  types: {} as { events: { type: TaskEvent } },
}).createMachine({
  id: 'task',
  initial: 'pending',
  states: {
    pending: {
      description: 'Waits for its dependencies.',
      on: {
        READY: { target: 'queued', description: 'Every dependency completed (or it has none; a join: every one ended, one completed), its condition held.' },
        SKIP: { target: 'skipped', description: 'A task it depends on failed or was skipped (a join: none completed), or its condition is false.' },
        CANCEL: { target: 'cancelled', description: 'The run stopped before it started.' },
        RESTORE_COMPLETED: { target: 'completed', description: 'A resume: completed before.' },
        RESTORE_FAILED: { target: 'failed', description: 'A resume: failed before, or in flight at more crashes than its retries allow.' },
        RESTORE_SKIPPED: { target: 'skipped', description: 'A resume: skipped before.' },
      },
    },
    queued: {
      description: 'Ready: in the ready queue, set aside at its model cap, or held by cache-aware fan-out.',
      on: {
        START: { target: 'running', description: 'Taken from the ready queue: a new attempt.' },
        CANCEL: { target: 'cancelled', description: 'The run stopped before it started.' },
      },
    },
    running: {
      description: 'An attempt in flight (an agent, a planner answer being checked, a map or reduce expanding).',
      on: {
        COMPLETE: { target: 'completed', description: 'Completed: an answer, a plan expanded, a map or reduce collected, a last verdict.' },
        FAIL: { target: 'failed', description: 'Failed with no retry left.' },
        CANCEL: { target: 'cancelled', description: 'Its agent was cancelled.' },
        RETRY: { target: 'queued', description: 'Failed with a retryable error, a retry left.' },
        REQUEUE: { target: 'queued', description: 'Start undone: no agent slot, or held by cache-aware fan-out.' },
        WAIT: { target: 'pending', description: 'Waits on new dependencies: its sub-tasks (map, reduce) or a revised draft (review).' },
        AWAIT: { target: 'waiting', description: 'An approval asks a person: no agent, no slot.' },
      },
    },
    waiting: {
      description: 'An approval waits for a decision (the run pauses if nothing else can run).',
      on: {
        APPROVE: { target: 'completed', description: 'Approved (an edited output replaces the draft).' },
        REJECT: { target: 'failed', description: 'Rejected with no note or no round left, or its timeout passed.' },
        WAIT: { target: 'pending', description: 'Rejected with a note: the draft goes back, the approval waits for the new one.' },
        CANCEL: { target: 'cancelled', description: 'The run was cancelled while it waited.' },
      },
    },
    completed: {
      description: 'Done; its dependents may start.',
      on: {
        REVISE: { target: 'pending', description: 'A reviewer sent it back with findings.' },
      },
    },
    failed: { type: 'final' },
    skipped: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
