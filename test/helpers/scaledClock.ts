/**
 * A clock that runs `speed` times faster than the wall clock, for integration tests where the
 * runtime and the simulated server must share one notion of time (rate-limit windows of 60 s,
 * Retry-After) over real HTTP, without waiting minutes. Both sides read `now()`; the runtime's
 * delays go through `setTimeout`, scaled down.
 */
import type { TimedClock } from '../../machines/clock.js';

export function scaledClock(speed: number): TimedClock {
  const origin = performance.now();
  const epoch = Date.now();
  return {
    now: () => epoch + (performance.now() - origin) * speed,
    setTimeout: (fn, ms) => setTimeout(fn, ms / speed),
    clearTimeout: (id) => clearTimeout(id),
  };
}
