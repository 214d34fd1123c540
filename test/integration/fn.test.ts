/**
 * Function steps (`kind: "fn"`) end to end against the simulated provider: a function's value is
 * a task's output (journaled, placed in a dependent's prompt, parsed in the result), it is given
 * its deps parsed, a map's item, a reduce's inputs, an AbortSignal; a thrown error retries by the
 * task's policy, a NonRetryableError or a value that is not JSON fails at once, a timeout aborts.
 */
import { describe, expect, it } from 'vitest';
import { createSwarm, NonRetryableError, type FnContext, type RunEvent, type SwarmFunctions } from '../../src/index.js';

type Ev<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

const base = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 5 } } },
};

async function runPlan(plan: unknown, functions: SwarmFunctions, defaults: Record<string, unknown> = {}) {
  const swarm = createSwarm({ seed: 1, backoff: { baseMs: 1, maxMs: 2 }, functions, store: false });
  const run = swarm.run({ ...base, ...plan as object, defaults: { maxRetries: 2, ...defaults } });
  const events: RunEvent[] = [];
  run.events.on('*', (_type: string, e: RunEvent) => events.push(e));
  try {
    return { result: await run.result, events };
  } finally {
    await swarm.close();
  }
}

describe('fn tasks', () => {
  it('runs a function between model calls: its value is the output, parsed for the next function, placed in the next prompt', async () => {
    const seen: FnContext[] = [];
    const { result, events } = await runPlan(
      {
        tasks: [
          { id: 'fetch', kind: 'fn', fn: 'fetchOrders' },
          { id: 'summary', model: 'fast', deps: ['fetch'], prompt: 'summarise {{fetch}} [[sim:reply SUMMARY]]' },
          { id: 'write', kind: 'fn', fn: 'write', deps: ['fetch', 'summary'] },
        ],
      },
      {
        fetchOrders: (ctx) => {
          seen.push(ctx);
          return { orders: [{ id: 1, total: 9.5 }, { id: 2, total: null }] };
        },
        write: async (ctx) => {
          seen.push(ctx);
          return `wrote ${(ctx.deps.fetch as { orders: unknown[] }).orders.length} orders: ${String(ctx.deps.summary)}`;
        },
      },
    );
    expect(result.status).toBe('completed');
    expect(result.tasks.fetch!.output).toEqual({ orders: [{ id: 1, total: 9.5 }, { id: 2, total: null }] });
    expect(result.tasks.write!.output).toBe('wrote 2 orders: SUMMARY');
    expect(seen[0]).toMatchObject({ taskId: 'fetch', attempt: 1, deps: {} });
    expect(seen[0]!.signal).toBeInstanceOf(AbortSignal);
    expect(seen[1]!.deps).toEqual({ fetch: { orders: [{ id: 1, total: 9.5 }, { id: 2, total: null }] }, summary: 'SUMMARY' });
    expect(seen[1]!.runId).toBe(result.runId);
    // The model's prompt held the function's JSON.
    const started = events.filter((e): e is Ev<'task:started'> => e.type === 'task:started');
    expect(started.find((e) => e.taskId === 'fetch')).toMatchObject({ model: 'fn:fetchOrders', route: 'fn/fetchOrders' });
    // No key, no request, no cost.
    expect(result.tasks.fetch!.requests).toBe(0);
    expect(result.tasks.fetch!.costUsd).toBe(0);
    expect(result.totals.requests).toBe(1);
  });

  it('retries a thrown error by the task policy, fails at once on NonRetryableError, and on a value that is not JSON', async () => {
    let flaky = 0;
    const { result, events } = await runPlan(
      {
        tasks: [
          { id: 'flaky', kind: 'fn', fn: 'flaky' },
          { id: 'hard', kind: 'fn', fn: 'hard' },
          { id: 'date', kind: 'fn', fn: 'date' },
          { id: 'after', model: 'fast', deps: ['hard'], prompt: 'never' },
        ],
      },
      {
        flaky: (ctx) => {
          flaky += 1;
          if (ctx.attempt < 3) throw new Error(`try ${ctx.attempt} failed`);
          return ctx.attempt;
        },
        hard: () => {
          throw new NonRetryableError('the order service said 404');
        },
        date: () => ({ at: new Date(0) }),
      },
    );
    expect(result.tasks.flaky).toMatchObject({ status: 'completed', output: 3, attempts: 3 });
    expect(flaky).toBe(3);
    expect(result.tasks.hard).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'fn_error', retryable: false } });
    expect(result.tasks.hard!.error!.message).toContain('the order service said 404');
    expect(result.tasks.date).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'fn_error' } });
    expect(result.tasks.date!.error!.message).toMatch(/not JSON.*\$\.at.*Date/);
    expect(result.tasks.after!.status).toBe('skipped');
    expect(events.filter((e) => e.type === 'task:failed' && e.taskId === 'flaky')).toHaveLength(2);
  });

  it('aborts a function at its timeoutMs (the signal fires) and retries it', async () => {
    let aborted = 0;
    const { result } = await runPlan(
      { tasks: [{ id: 'slow', kind: 'fn', fn: 'slow', timeoutMs: 50, maxRetries: 1 }] },
      {
        slow: (ctx) =>
          new Promise((resolve) => {
            if (ctx.attempt === 2) return resolve('second');
            ctx.signal.addEventListener('abort', () => {
              aborted += 1;
            });
          }),
      },
    );
    expect(result.tasks.slow).toMatchObject({ status: 'completed', output: 'second', attempts: 2 });
    expect(aborted).toBe(1);
  });

  it('checks a function value against its output.schema', async () => {
    const { result } = await runPlan(
      {
        tasks: [
          { id: 'good', kind: 'fn', fn: 'good', output: { schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } } },
          { id: 'bad', kind: 'fn', fn: 'bad', output: { schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } } },
        ],
      },
      { good: () => ({ n: 2 }), bad: () => ({ n: 'two' }) },
    );
    expect(result.tasks.good).toMatchObject({ status: 'completed', output: { n: 2 } });
    expect(result.tasks.bad).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'invalid_output' } });
  });

  it("runs a map's items and a reduce's merge through functions", async () => {
    const { result } = await runPlan(
      {
        tasks: [
          { id: 'list', kind: 'fn', fn: 'list' },
          { id: 'each', kind: 'map', items: { from: 'list' }, fn: 'double' },
          { id: 'sum', kind: 'reduce', over: 'each', fn: 'sum' },
          { id: 'words', kind: 'map', items: { values: ['a', 'b'] }, model: 'fast', prompt: 'say {{item}} [[sim:reply W]]' },
          { id: 'join', kind: 'reduce', over: 'words', fn: 'join' },
        ],
      },
      {
        list: () => [1, 2, 3],
        double: (ctx) => (ctx.item as number) * 2,
        sum: (ctx) => (ctx.inputs as number[]).reduce((a, b) => a + b, 0),
        join: (ctx) => (ctx.inputs as string[]).join('+'),
      },
    );
    expect(result.status).toBe('completed');
    expect(result.tasks.each!.output).toEqual([2, 4, 6]);
    expect(result.tasks.sum!.output).toBe(12);
    expect(result.tasks.join!.output).toBe('W+W');
  });
});
