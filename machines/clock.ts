/**
 * Time inside the machines comes from the actor system's clock: the same clock that runs their
 * delayed transitions. With `createActor(machine, { clock: new SimulatedClock() })` a test moves
 * both at once; `src/swarm.ts` gives the root actor a real clock that has `now()` too.
 */
import type { AnyActorRef } from 'xstate';

/** An XState clock that can also tell the time (SimulatedClock is one). */
export interface TimedClock {
  now(): number;
  setTimeout(fn: (...args: any[]) => void, timeout: number): any;
  clearTimeout(id: any): void;
}

/** The current time (ms) of the system `self` runs in. */
export function nowOf(self: AnyActorRef | undefined): number {
  const clock = (self?.system as { _clock?: Partial<TimedClock> } | undefined)?._clock;
  return typeof clock?.now === 'function' ? clock.now() : Date.now();
}

/** A real clock with `now()`, for production runs. */
export const realClock: TimedClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id),
};

/**
 * The longest delay a timer can hold: Node's setTimeout (and so XState's real clock) fires after
 * 1 ms for anything at or above 2^31 ms. Every named delay of the machines goes through
 * `clampDelay`, so a wait of a month is a wait of 24.8 days, not of 1 ms.
 */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/** A delay a timer can hold: at least `min`, at most MAX_DELAY_MS, and a number (NaN is `min`). */
export function clampDelay(ms: number, min = 0): number {
  if (!(ms >= min)) return min;
  return Math.min(Math.ceil(ms), MAX_DELAY_MS);
}
