/** Plans for the benchmarks: deterministic for a seed. */
import { randomStream } from '../../machines/random.js';

/**
 * A layered DAG: `width` tasks per layer, each task after the first layer depends on 1-3 tasks of
 * the layer before.
 */
export function layeredPlan(n: number, opts: { width?: number; seed?: number; maxInFlight?: number } = {}) {
  const width = opts.width ?? 100;
  const rand = randomStream(opts.seed ?? 1);
  const tasks = [];
  for (let i = 0; i < n; i++) {
    const layer = Math.floor(i / width);
    const deps = new Set<string>();
    if (layer > 0) {
      const count = 1 + Math.floor(rand() * 3);
      const prevStart = (layer - 1) * width;
      while (deps.size < count) deps.add(`t${prevStart + Math.floor(rand() * width)}`);
    }
    tasks.push({ id: `t${i}`, model: 'fast', prompt: `task ${i}`, deps: [...deps] });
  }
  return {
    providers: { p: { type: 'sim' as const } },
    models: { fast: { provider: 'p', model: 'instant' } },
    defaults: { maxInFlight: opts.maxInFlight ?? 50 },
    tasks,
  };
}
