/**
 * Budgets the model cannot overrun: every call reserves its worst case with the ledger before it
 * is sent; a call that does not fit is never sent. A 100-task plan whose calls would cost about
 * $2 stops at or under its $0.50 budget, keeping every task that completed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSwarm, ProviderError, SqliteStore, type RunEvent } from '../../src/index.js';

const plan = (budget: Record<string, unknown>, taskBudget?: number) => ({
  providers: { p: { type: 'sim' } },
  models: {
    // $100 per million output tokens: 200 output tokens cost $0.02 a call, 100 calls $2.
    pricey: { provider: 'p', model: 'sim-pricey', maxTokens: 256, price: { input: 1, output: 100 } },
  },
  defaults: { maxInFlight: 5 },
  budget,
  tasks: Array.from({ length: 100 }, (_, i) => ({
    id: `t${i}`,
    model: 'pricey',
    prompt: `Task ${i}. [[sim:length 200]]`,
    ...(taskBudget !== undefined && i === 0 ? { budgetUsd: taskBudget } : {}),
  })),
});

describe('budgets', () => {
  it('a $0.50 run budget on $2 of work stops at or under $0.50 and keeps what completed', async () => {
    const swarm = createSwarm();
    const run = swarm.run(plan({ usd: 0.5 }));
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('budget_exceeded');
    expect(result.totals.costUsd).toBeLessThanOrEqual(0.5);
    expect(result.totals.costUsd).toBeGreaterThan(0.3); // it did spend most of it
    const done = Object.values(result.tasks).filter((t) => t.status === 'completed');
    const denied = Object.values(result.tasks).filter((t) => t.status === 'failed');
    expect(done.length).toBeGreaterThan(10);
    expect(done.every((t) => String(t.output ?? '').length > 0)).toBe(true);
    expect(denied.length + done.length).toBe(100);
    expect(denied.every((t) => t.error!.code === 'budget_exceeded' && t.requests === 0)).toBe(true);
    // A denied call was never sent: one request per completed task, none for the others.
    expect(result.totals.requests).toBe(done.length);
    expect(events.filter((e) => e.type === 'budget:denied').length).toBe(denied.length);
  });

  it('reserves the input a call sends, not only its output: a long prompt is refused before it is sent', async () => {
    // ~7,500 input tokens (by the simulator's tokenizer) at $10 per million: about $0.08 a call in
    // input, next to nothing in output.
    const filler = 'lorem ipsum dolor sit amet '.repeat(1500);
    const swarm = createSwarm();
    const result = await swarm.run({
      providers: { p: { type: 'sim' } },
      models: { wordy: { provider: 'p', model: 'sim-wordy', maxTokens: 16, price: { input: 10, output: 1 } } },
      defaults: { maxInFlight: 5 },
      // A call reserves a provable bound of its input (UTF-8 bytes: ~40,000 here, $0.41), refunded
      // to what the server counted when it ends: one at a time fits under $0.60.
      budget: { usd: 0.6 },
      tasks: [
        { id: 'capped', model: 'wordy', prompt: `Capped. ${filler}`, budgetUsd: 0.05 },
        ...Array.from({ length: 10 }, (_, i) => ({ id: `t${i}`, model: 'wordy', prompt: `Task ${i}. ${filler}` })),
      ],
    }).result;
    await swarm.close();
    // Its input alone is over its own budget: refused, never sent.
    expect(result.tasks.capped).toMatchObject({ status: 'failed', requests: 0, error: { code: 'budget_exceeded' } });
    expect(result.status).toBe('budget_exceeded');
    expect(result.totals.costUsd).toBeLessThanOrEqual(0.6);
    const done = Object.values(result.tasks).filter((t) => t.status === 'completed');
    expect(done.length).toBeGreaterThan(0);
    expect(done.length).toBeLessThan(10);
    expect(done.every((t) => t.usage.inputTokens + t.usage.cacheWriteTokens > 6_000)).toBe(true); // ~7,500 by the server's tokenizer
  });

  it('a task budget stops that task alone; a per-model budget names its model', async () => {
    const swarm = createSwarm();
    const small = await swarm.run(plan({ usd: 100 }, 0.001)).result;
    expect(small.tasks.t0).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' } });
    expect(small.tasks.t0!.error!.message).toMatch(/task "t0" budget exceeded/);
    expect(small.status).toBe('partial');
    expect(small.totals.completed).toBe(99);

    const perModel = await swarm.run(plan({ perModel: { pricey: 0.1 } })).result;
    await swarm.close();
    expect(perModel.totals.costUsd).toBeLessThanOrEqual(0.1);
    const failed = Object.values(perModel.tasks).find((t) => t.status === 'failed')!;
    expect(failed.error!.message).toMatch(/model "pricey"/);
  });
});

describe('a call that costs far more than it reserved', () => {
  it('is charged what it cost, and the run says so: budget:overrun, status budget_exceeded, never completed over budget', async () => {
    // 5 million input tokens (under the bound of a plausible count) at $1 per million: $5 for a
    // call that reserved a few cents, on a $1 budget.
    const provider = {
      async call() {
        return { content: [{ type: 'text' as const, text: 'done' }], stopReason: 'end_turn' as const, usage: { inputTokens: 5_000_000, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 } };
      },
    };
    const swarm = createSwarm({ providers: { p: provider }, store: false });
    const run = swarm.run({
      providers: { p: { type: 'custom' } },
      models: { m: { provider: 'p', model: 'x', maxTokens: 64, price: { input: 1, output: 1 } } },
      budget: { usd: 1 },
      tasks: [{ id: 'big', model: 'm', prompt: 'hi' }],
    });
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();

    expect(result.tasks.big).toMatchObject({ status: 'completed', output: 'done' });
    expect(result.totals.costUsd).toBe(5.00001);
    expect(result.status).toBe('budget_exceeded');
    const overruns = events.filter((e) => e.type === 'budget:overrun');
    expect(overruns).toHaveLength(1);
    expect(overruns[0]).toMatchObject({ taskId: 'big', model: 'm', actualUsd: 5.00001, budget: 'run', limitUsd: 1, spentUsd: 5.00001 });
    expect((overruns[0] as { reservedUsd: number }).reservedUsd).toBeLessThan(0.001);
  });
});

describe('a call that may have been billed, in the journal', () => {
  it('its worst case is journaled as spent: a retry of the run continues from it, and is refused what no longer fits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'swarmstate-billed-'));
    const file = join(dir, 'runs.db');
    // docs/architecture.md's example: (50 x 1.25 + 256 x 100) / 10^6 reserved for this call.
    const WORST = 0.0256625;
    let calls = 0;
    const provider = {
      async call() {
        calls++;
        if (calls === 1) throw new ProviderError('timeout', 'p/x: no response headers within 300 ms: the call is retried with backoff.');
        return { content: [{ type: 'text' as const, text: 'ok' }], stopReason: 'end_turn' as const, usage: { inputTokens: 10, outputTokens: 200, cacheReadTokens: 0, cacheWriteTokens: 0 } };
      },
    };
    const plan = {
      providers: { p: { type: 'custom' } },
      models: { pricey: { provider: 'p', model: 'x', maxTokens: 256, price: { input: 1, output: 100 } } },
      defaults: { maxRetries: 0 },
      // Room for one worst case and a half: after the timed-out call, no second one fits.
      budget: { usd: 1.5 * WORST },
      tasks: [{ id: 't', model: 'pricey', prompt: 'Task 3. [[sim:length 200]]' }],
    };
    try {
      const swarm = createSwarm({ providers: { p: provider }, store: file });
      const first = await swarm.run(plan).result;
      expect(first.tasks.t).toMatchObject({ status: 'failed', error: { code: 'timeout' }, costUsd: WORST });
      const store = new SqliteStore(file);
      expect(store.spent(first.runId).total).toBe(WORST);
      store.close();
      // The retry starts from what was spent: the call's worst case no longer fits.
      const again = await swarm.retry(first.runId).result;
      await swarm.close();
      expect(calls).toBe(1);
      expect(again.status).toBe('budget_exceeded');
      expect(again.tasks.t!.error).toMatchObject({ code: 'budget_exceeded' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
