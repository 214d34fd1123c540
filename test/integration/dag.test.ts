/**
 * A 200-task DAG through the whole runtime (supervisor, pools, keys, breakers, agents) on the
 * scripted in-process provider, with seeded retryable faults: every task completes exactly once,
 * with its own output, built from its dependencies' outputs.
 */
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm, ProviderError, type RunEvent } from '../../src/index.js';
import { nextRandom, randomStream } from '../../machines/random.js';

function layeredPlan(n: number, seed: number) {
  const rand = randomStream(seed);
  const tasks = [];
  for (let i = 0; i < n; i++) {
    const deps = new Set<string>();
    if (i >= 10) {
      const count = 1 + Math.floor(rand() * 3);
      for (let d = 0; d < count; d++) deps.add(`t${Math.floor(rand() * Math.min(i, 10 * Math.ceil(i / 10)))}`);
    }
    const depList = [...deps].filter((d) => d !== `t${i}`);
    tasks.push({
      id: `t${i}`,
      model: i % 3 === 0 ? 'smart' : 'fast',
      prompt: `task t${i}` + depList.map((d) => ` [{{${d}}}]`).join(''),
      deps: depList,
    });
  }
  return {
    providers: { main: { type: 'sim', keys: ['k-one', 'k-two', 'k-three'], limits: { concurrency: 4 } } },
    models: {
      fast: { provider: 'main', model: 'm-fast' },
      smart: { provider: 'main', model: 'm-smart' },
    },
    defaults: { maxInFlight: 8, maxRetries: 6 },
    tasks,
  };
}

describe('a 200-task DAG with injected retryable failures', () => {
  it('completes every task exactly once with the right output in the right task', async () => {
    const plan = layeredPlan(200, 7);
    let faultRng = 1234;
    const seenKeys = new Set<string>();
    const provider = createScriptedProvider({
      reply: (req) => {
        seenKeys.add(req.key.id);
        const [r, next] = nextRandom(faultRng);
        faultRng = next;
        if (r < 0.08) throw new ProviderError('server_error', 'simulated 500', { status: 500 });
        if (r < 0.12) throw new ProviderError('network', 'simulated connection reset');
        if (r < 0.15) throw new ProviderError('rate_limited', 'simulated 429', { status: 429, retryAfterMs: 5 });
        const prompt = req.messages[0]!.content[0]!;
        const text = prompt.type === 'text' ? prompt.text : '';
        // The output names the task and proves which dependency outputs reached it.
        const deps = [...text.matchAll(/\[out\((t\d+)\)/g)].map((m) => m[1]).join(',');
        return `out(${req.meta.taskId})<${deps}>`;
      },
    });
    const swarm = createSwarm({ providers: { main: provider }, backoff: { baseMs: 1, maxMs: 4 }, seed: 3 });
    const run = swarm.run(plan);
    const completions = new Map<string, number>();
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    run.events.on('task:completed', (e) => completions.set(e.taskId, (completions.get(e.taskId) ?? 0) + 1));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    expect(result.totals.completed).toBe(200);
    expect([...completions.values()].every((c) => c === 1)).toBe(true);
    expect(completions.size).toBe(200);
    for (const task of plan.tasks) {
      expect(result.tasks[task.id]!.output).toBe(`out(${task.id})<${task.deps.join(',')}>`);
    }
    const retries = events.filter((e) => e.type === 'task:retry').length;
    expect(retries).toBeGreaterThan(10);
    expect(result.totals.retries).toBe(retries);
    expect(result.totals.requests).toBe(provider.calls);
    expect(seenKeys.size).toBe(3);
  });
});
