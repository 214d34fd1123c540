/**
 * Function steps on the timeline: a `fn` task's attempt (its `task:started` names its `fn`) calls no model and holds no key, so it has no key lane; each function gets a lane of its
 * own, its attempts stacked as a key's calls are. Pure, from the stream.
 */
import type { TimedRunEvent } from '../swarm.js';
import type { Outcome } from './types.js';

/** One attempt of a function step, in ms since the run started. */
export interface StepSpan {
  taskId: string;
  attempt: number;
  start: number;
  end: number;
  /** Still running when the stream ends. */
  open: boolean;
  outcome: Outcome;
  /** `code: message` of a failed attempt. */
  error?: string;
  /** Its row in the lane: steps running at once never overlap. */
  track: number;
}

export interface FunctionLane {
  /** The route, `fn/<name>`. */
  route: string;
  steps: StepSpan[];
  tracks: number;
}

/** The stream's function steps by function, in the order each first ran. */
export function functionLanes(events: readonly TimedRunEvent[], origin: number, endAt: number, live: boolean): FunctionLane[] {
  const lanes = new Map<string, FunctionLane>();
  const open = new Map<string, StepSpan>();
  const close = (taskId: string, at: number, outcome: Outcome, error?: string) => {
    const step = open.get(taskId);
    if (!step) return;
    open.delete(taskId);
    step.end = Math.max(step.start, at - origin);
    step.open = false;
    step.outcome = outcome;
    if (error !== undefined) step.error = error;
  };
  for (const e of events) {
    if (e.type === 'task:started' && e.fn !== undefined) {
      // By its `fn`, not its route's prefix: a provider may be named `fn` too.
      const route = `fn/${e.fn}`;
      const lane = lanes.get(route) ?? lanes.set(route, { route, steps: [], tracks: 1 }).get(route)!;
      const step: StepSpan = { taskId: e.taskId, attempt: e.attempt, start: e.at - origin, end: endAt, open: true, outcome: 'other', track: 0 };
      lane.steps.push(step);
      open.set(e.taskId, step);
    } else if (e.type === 'task:completed') close(e.taskId, e.at, 'ok');
    else if (e.type === 'task:failed') close(e.taskId, e.at, e.error.code === 'timeout' || e.error.code === 'task_timeout' ? 'timeout' : 'other', `${e.error.code}: ${e.error.message}`);
    else if (e.type === 'task:cancelled') close(e.taskId, e.at, 'other', 'cancelled');
  }
  for (const step of open.values()) step.outcome = live ? 'inflight' : 'other';
  for (const lane of lanes.values()) {
    const ends: number[] = [];
    for (const step of [...lane.steps].sort((a, b) => a.start - b.start)) {
      let track = ends.findIndex((end) => end <= step.start);
      if (track < 0) track = ends.push(0) - 1;
      ends[track] = step.end;
      step.track = track;
    }
    lane.tracks = Math.max(1, ends.length);
  }
  return [...lanes.values()];
}
