/**
 * The agent's model call as two actions of its own (`callModel` on entering `running`, `abortCall`
 * on leaving it) rather than a promise actor invoked per call. An invoked actor cost three events
 * (its init, its resolve, the done event to the agent) and an actor per call; this costs the one
 * event that carries the outcome back. What the actor gave for free is kept here: the call's
 * AbortSignal fires when the agent leaves `running` before the reply (cancel, deadline) and when
 * the agent is stopped or crashes mid-call, and a reply that comes after that is dropped.
 *
 * `src/` provides the actions with `machine.provide({ actions: modelCallActions(run) })`; the
 * machine only names them, so it stays pure.
 */
import type { AnyActorRef } from 'xstate';

type AnyActorSystem = AnyActorRef['system'];
import type { ModelCallInput, ModelCallOutput } from '../protocol.js';

/** The outcome of a call, as the agent receives it (the same fields as XState's done and error events). */
export type ModelCallEvent = { type: 'MODEL.REPLY'; output: ModelCallOutput } | { type: 'MODEL.FAILED'; error: unknown };

export interface ModelCallIo {
  /** Fires when the agent no longer waits for this reply. */
  signal: AbortSignal;
  self: AnyActorRef;
  system: AnyActorSystem;
}

/** Makes one call; rejects with an ErrorInfo-shaped error. */
export type RunModelCall = (call: ModelCallInput, io: ModelCallIo) => Promise<ModelCallOutput>;

/** What an agent has under way: the call's controller (null between calls). */
interface InFlight {
  controller: AbortController | null;
}

/** The two actions, over one book of the calls under way (by agent). */
export function modelCallActions(run: RunModelCall) {
  const inFlight = new WeakMap<AnyActorRef, InFlight>();

  const slotOf = (self: AnyActorRef): InFlight => {
    let slot = inFlight.get(self);
    if (!slot) {
      const entry: InFlight = { controller: null };
      slot = entry;
      inFlight.set(self, entry);
      // An agent stopped (its run stopped, its group gone) or crashed never leaves `running` by a
      // transition, so no exit action runs: its stop is what aborts the call then. Once per agent.
      const abort = () => {
        entry.controller?.abort();
        entry.controller = null;
      };
      self.subscribe({ complete: abort, error: abort });
    }
    return slot;
  };

  return {
    callModel: ({ self, system }: { self: AnyActorRef; system: AnyActorSystem }, call: ModelCallInput): void => {
      const slot = slotOf(self);
      const controller = new AbortController();
      slot.controller = controller;
      // Only the call the agent still waits for answers: an aborted one's late outcome is dropped.
      const answer = (event: ModelCallEvent) => {
        if (slot.controller !== controller) return;
        slot.controller = null;
        self.send(event);
      };
      let pending: Promise<ModelCallOutput>;
      try {
        pending = run(call, { signal: controller.signal, self, system });
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then(
        (output) => answer({ type: 'MODEL.REPLY', output }),
        (error: unknown) => answer({ type: 'MODEL.FAILED', error }),
      );
    },
    abortCall: ({ self }: { self: AnyActorRef }): void => {
      const slot = inFlight.get(self);
      if (!slot?.controller) return;
      const controller = slot.controller;
      slot.controller = null;
      controller.abort();
    },
  };
}
