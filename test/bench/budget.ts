/**
 * A budget the run cannot overrun: 100 tasks whose calls would cost about $2 in all, under a
 * $0.50 run budget, on the embedded simulator. Prints one JSON line.
 *   node --import tsx test/bench/budget.ts
 */
import { createSwarm } from '../../src/index.js';

const TASKS = 100;
const plan = {
  providers: { p: { type: 'sim' as const } },
  // $100 per million output tokens: a 200-token answer costs $0.02, 100 of them about $2.
  models: { pricey: { provider: 'p', model: 'sim-pricey', maxTokens: 256, price: { input: 1, output: 100 } } },
  defaults: { maxInFlight: 5 },
  budget: { usd: 0.5 },
  tasks: Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}`, model: 'pricey', prompt: `Task ${i}. [[sim:length 200]]` })),
};

const swarm = createSwarm();
const t0 = performance.now();
const result = await swarm.run(plan).result;
const ms = performance.now() - t0;
await swarm.close();
const tasks = Object.values(result.tasks);
const completed = tasks.filter((t) => t.status === 'completed');
const perTask = (result.totals.costUsd ?? 0) / Math.max(1, completed.length);
console.log(
  JSON.stringify({
    tasks: TASKS,
    budgetUsd: 0.5,
    wouldCostUsd: perTask * TASKS,
    spentUsd: result.totals.costUsd,
    completed: completed.length,
    completedWithOutput: completed.filter((t) => String(t.output ?? '').length > 0).length,
    refused: tasks.filter((t) => t.error?.code === 'budget_exceeded').length,
    requests: result.totals.requests,
    status: result.status,
    ms,
  }),
);
