/** Helpers for driving XState's SimulatedClock in tests. */
import type { SimulatedClock } from 'xstate';

type Timers = Map<number, { start: number; timeout: number }>;
const timersOf = (clock: SimulatedClock) => (clock as unknown as { timeouts: Timers }).timeouts;

/** Moves a SimulatedClock to `target`, stopping at every timer deadline on the way so each fires on time. */
export function advanceClock(clock: SimulatedClock, target: number): void {
  const timers = timersOf(clock);
  for (;;) {
    let next = Infinity;
    for (const t of timers.values()) next = Math.min(next, t.start + t.timeout);
    if (next > target) break;
    clock.set(Math.max(clock.now(), next));
  }
  if (target > clock.now()) clock.set(target);
}

/** Timers scheduled and not fired yet. */
export const pendingTimers = (clock: SimulatedClock) => timersOf(clock).size;
