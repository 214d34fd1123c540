/**
 * A group holds up to a bounded number of agents for the supervisor (see crew.ts): it spawns
 * them on SPAWN, passes CANCEL on to each, and reports each agent's end to the supervisor as
 * `AGENT.ENDED` (a crash too: as a failed attempt, after handing back what the agent held).
 *
 * It also owns its agents' deadlines, as data: one scheduled event, at or before the earliest
 * (re-armed when an earlier one arrives, and after it fires), and `AGENT.TIMEOUT` to whoever is
 * past theirs. With an `after` deadline per
 * agent, every actor stop made XState scan every scheduled event of the system (its
 * scheduler.cancelAll), O(agents in flight) per stop; now there is one per group.
 *
 *   idle -SPAWN-> busy -last agent ended-> idle
 */
import { cancel, enqueueActions, sendParent, setup, spawnChild, stopChild, type AnyActorRef, type DoneActorEvent, type ErrorActorEvent } from 'xstate';
import { agentMachine, type AgentContext, type AgentInput } from '../agent/index.js';
import { handBack } from '../agent/index.js';
import { clampDelay, nowOf } from '../clock.js';
import { toErrorInfo } from '../errors.js';
import { childIdOf } from '../kit.js';
import type { AttemptReport } from '../protocol.js';
import { AgentSlots } from '../slots.js';
import { fnStepMachine, type FnStepInput } from '../kinds/fn.js';
import type { AgentEndedEvent } from './types.js';

export interface GroupInput {
  /** The group's index among the supervisor's groups (`group:<index>`). */
  group: number;
}

/**
 * Deadlines by agent actor id, and the one the group's timer is armed for. Mutable: held by reference.
 * `armed` is never later than any deadline in the book (only an earlier one moves it, and the
 * timer's firing re-arms at the earliest), so an agent's end never needs a scan: the timer stays,
 * unless the book is left empty.
 */
export class Deadlines {
  private readonly at = new Map<string, number>();
  /** The deadline the scheduled event fires for (Infinity: none is scheduled). */
  armed = Number.POSITIVE_INFINITY;
  /**
   * A spawn booked a deadline before `armed`: the timer must move (the chart's `earlierDeadline`
   * reads this, so the deadline is computed once, by the spawn's `book`, and the guard stays pure).
   */
  early = false;

  set(actorId: string, deadline: number): void {
    this.at.set(actorId, deadline);
    if (deadline < this.armed) this.early = true;
  }

  delete(actorId: string): void {
    this.at.delete(actorId);
  }

  get size(): number {
    return this.at.size;
  }

  /** Whether the book holds no deadline but this agent's (its end empties it). */
  onlyOf(actorId: string): boolean {
    return this.at.size === 0 || (this.at.size === 1 && this.at.has(actorId));
  }

  /** Removes and returns the agents whose deadline is at or before `now`. */
  takeDue(now: number): string[] {
    const due: string[] = [];
    for (const [id, deadline] of this.at) if (deadline <= now) due.push(id);
    for (const id of due) this.at.delete(id);
    return due;
  }

  /** A group holds a bounded number of agents, so a scan is as cheap as a heap here. */
  earliest(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const deadline of this.at.values()) if (deadline < min) min = deadline;
    return min;
  }
}

/** An agent's deadline, counted from its spawn as its own `after` timer did (at least 1 ms). */
const deadlineOf = (now: number, input: AgentInput | FnStepInput) => now + clampDelay(input.timeoutMs, 1);

export interface GroupContext {
  group: number;
  slots: AgentSlots;
  deadlines: Deadlines;
}

export type GroupEvent =
  | { type: 'SPAWN'; input: AgentInput | FnStepInput }
  | { type: 'CANCEL'; reason?: string }
  | { type: 'GROUP.DEADLINE' }
  | DoneActorEvent<AttemptReport, string>
  | ErrorActorEvent<unknown, string>;

const TIMER = 'deadline';

type GroupEnqueue = {
  cancel(id: string): void;
  raise(event: { type: 'GROUP.DEADLINE' }, options: { id: string; delay: number }): void;
};

/**
 * Keeps the one scheduled event at or before the earliest deadline (none when no agent has one).
 * Only an earlier deadline moves it: when the earliest goes away (its agent ended, the common
 * case, once per task) the timer stays, fires early, finds nothing due and re-arms; cancelling
 * and scheduling again on every agent's end cost more than that rare early wake.
 */
function rearm(enqueue: GroupEnqueue, book: Deadlines, now: number): void {
  book.early = false;
  const next = book.earliest();
  if (next === book.armed || (next > book.armed && next !== Number.POSITIVE_INFINITY)) return;
  if (book.armed !== Number.POSITIVE_INFINITY) enqueue.cancel(TIMER);
  book.armed = next;
  if (next !== Number.POSITIVE_INFINITY) enqueue.raise({ type: 'GROUP.DEADLINE' }, { id: TIMER, delay: Math.max(0, next - now) });
}

/** The report of an agent actor that crashed: a failed attempt that keeps what it had done (calls sent are paid for). */
export function crashReport(holder: { taskId: string; attempt: number } | undefined, error: unknown, last: AgentContext | undefined): AttemptReport {
  const info = toErrorInfo(error);
  return {
    taskId: holder?.taskId ?? '',
    attempt: holder?.attempt ?? 0,
    status: 'failed',
    error: { ...info, message: `agent crashed: ${info.message}` },
    usage: last?.spend.usage ?? { inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0 },
    requests: last?.counts.requests ?? 0,
    retries: last?.counts.retries ?? 0,
    turns: last?.counts.turn ?? 0,
    messages: last?.messages ?? [],
    ...(last ? { costUsd: last.spend.costUsd, ...(last.spend.unpricedCalls > 0 ? { unpricedCalls: last.spend.unpricedCalls } : {}) } : {}),
  };
}

/**
 * The last context of a child agent (one that crashed keeps its last snapshot). An actor provided
 * in the agent's place (a test's stand-in) may keep a context of another shape: nothing is read of it.
 */
function lastContextOf(self: AnyActorRef, actorId: string): AgentContext | undefined {
  const context = (self.getSnapshot().children[actorId]?.getSnapshot() as { context?: Partial<AgentContext> } | undefined)?.context;
  return context?.held && context.counts && context.spend ? (context as AgentContext) : undefined;
}

export const groupMachine = setup({
  types: {} as { context: GroupContext; events: GroupEvent; input: GroupInput },
  actors: { agent: agentMachine, fnStep: fnStepMachine },
  actions: {
    /**
     * A spawn, as a fixed list of actions (no action list built per task): the slot and the
     * deadline are booked, then the agent is spawned under the slot's id. It is active from its
     * spawn (no START to send).
     */
    book: ({ context, event, self }) => {
      const { input } = event as Extract<GroupEvent, { type: 'SPAWN' }>;
      context.deadlines.set(context.slots.take(input.taskId, input.attempt), deadlineOf(nowOf(self), input));
    },
    spawnBooked: spawnChild('agent', {
      id: ({ context }) => context.slots.lastTaken,
      input: ({ event }: { event: GroupEvent }) => (event as Extract<GroupEvent, { type: 'SPAWN' }>).input,
    }) as never,
    /** A function step (machines/kinds/fn.ts) in an agent's place: the same slot, deadline and cancel. */
    spawnFn: spawnChild('fnStep', {
      id: ({ context }) => context.slots.lastTaken,
      input: ({ event }: { event: GroupEvent }) => (event as Extract<GroupEvent, { type: 'SPAWN' }>).input,
    }) as never,
    /** A spawn's deadline is earlier than the timer: it moves (the rare case, see `earlierDeadline`). */
    rearm: enqueueActions(({ context, enqueue, self }) => rearm(enqueue, context.deadlines, nowOf(self))),

    /** The timer fired: every agent past its deadline is told so, and the timer moves to the next. */
    expire: enqueueActions(({ context, enqueue, self }) => {
      const book = context.deadlines;
      // A timer fires no sooner than it was set for: what it was armed for is due even if the clock reads a hair earlier.
      const now = Math.max(nowOf(self), book.armed);
      book.armed = Number.POSITIVE_INFINITY;
      for (const id of book.takeDue(now)) enqueue.sendTo(id, { type: 'AGENT.TIMEOUT' });
      rearm(enqueue, book, nowOf(self));
    }),

    /**
     * An agent ended with its report (the common case, once per task), as a fixed list of
     * actions: its place and deadline are freed, it is stopped, the supervisor is told. The
     * timer stays armed (it fires early at worst, finds nothing due and re-arms), unless the
     * book is now empty: then `disarm` follows.
     */
    free: ({ context, event }) => {
      const actorId = childIdOf(event);
      context.slots.release(actorId);
      const book = context.deadlines;
      book.delete(actorId);
      if (book.size === 0) book.armed = Number.POSITIVE_INFINITY;
    },
    stopEnded: stopChild(({ event }: { event: GroupEvent }) => childIdOf(event)) as never,
    disarm: cancel(TIMER),
    reportEnded: sendParent(({ context, event }) => ({
      type: 'AGENT.ENDED',
      group: context.group,
      report: (event as DoneActorEvent<AttemptReport>).output,
    }) satisfies AgentEndedEvent) as never,

    /** An agent crashed: it gave nothing back, so what it held is handed back for it, and its end is a failed attempt. */
    agentCrashed: enqueueActions(({ context, event, enqueue, self, system }) => {
      const actorId = childIdOf(event);
      // A crashed agent never reached a final state: hand back for it what its last context
      // says it held (lease, reservation, admission, pending requests).
      const last = lastContextOf(self, actorId);
      for (const { to, event: message } of last ? handBack(last) : []) {
        const target = system.get(to);
        if (target) enqueue.sendTo(target, message);
      }
      const report = crashReport(context.slots.holder(actorId), (event as ErrorActorEvent).error, last);
      enqueue(stopChild(actorId));
      context.slots.release(actorId);
      context.deadlines.delete(actorId);
      rearm(enqueue, context.deadlines, nowOf(self));
      enqueue.sendParent({ type: 'AGENT.ENDED', group: context.group, report } satisfies AgentEndedEvent);
    }),

    cancelAgents: enqueueActions(({ context, event, enqueue }) => {
      const { reason } = event as Extract<GroupEvent, { type: 'CANCEL' }>;
      for (const id of context.slots.held()) enqueue.sendTo(id, reason === undefined ? { type: 'CANCEL' } : { type: 'CANCEL', reason });
    }),
  },
  guards: {
    isFn: ({ event }) => 'fn' in (event as Extract<GroupEvent, { type: 'SPAWN' }>).input,
    empty: ({ context }) => context.slots.size === 0,
    /** The spawn just booked a deadline before the timer's (the first in an idle group, or a shorter timeout). */
    earlierDeadline: ({ context }) => context.deadlines.early,
    /** The ended agent's deadline is the last in the book while the timer is armed. */
    lastDeadline: ({ context, event }) => context.deadlines.armed !== Number.POSITIVE_INFINITY && context.deadlines.onlyOf(childIdOf(event)),
  },
}).createMachine({
  id: 'group',
  context: ({ input }) => ({ group: input.group, slots: new AgentSlots(), deadlines: new Deadlines() }),
  initial: 'idle',
  on: {
    CANCEL: { actions: 'cancelAgents' },
    'GROUP.DEADLINE': { actions: 'expire' },
    'xstate.done.actor.*': [
      { guard: 'lastDeadline', actions: ['free', 'stopEnded', 'disarm', 'reportEnded'] },
      { actions: ['free', 'stopEnded', 'reportEnded'] },
    ],
    'xstate.error.actor.*': { actions: 'agentCrashed' },
  },
  states: {
    idle: {
      on: {
        SPAWN: [
          { guard: 'isFn', target: 'busy', actions: ['book', 'spawnFn'] },
          { target: 'busy', actions: ['book', 'spawnBooked'] },
        ],
      },
    },
    busy: {
      // After a spawn (a spawn always ends in busy), the timer moves if its deadline came first.
      always: [
        { guard: 'empty', target: 'idle' },
        { guard: 'earlierDeadline', actions: 'rearm' },
      ],
      // Busy already: a spawn changes no state (no exit and re-entry of busy per task).
      on: {
        SPAWN: [{ guard: 'isFn', actions: ['book', 'spawnFn'] }, { actions: ['book', 'spawnBooked'] }],
      },
    },
  },
});
