/**
 * A cancel that comes from inside the run: a listener of an event an agent reports, or a journal
 * write that fails while an agent reports. The supervisor must not take the CANCEL nested inside
 * that agent's action (XState's development build says so: "Custom actions should not call
 * `sendTo()` directly"): it takes it once the agent's step is over, and no task starts after it.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createScriptedProvider, createSwarm } from '../../src/index.js';

let warnings: string[];
beforeEach(() => {
  warnings = [];
  vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void warnings.push(args.map(String).join(' ')));
});
afterEach(() => vi.restoreAllMocks());

const plan = (n: number) => ({
  providers: { p: { type: 'sim' as const } },
  models: { m: { provider: 'p', model: 'x' } },
  defaults: { maxInFlight: 1 },
  tasks: Array.from({ length: n }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `task ${i}` })),
});

describe('a cancel from inside the run', () => {
  it('a listener of an agent event cancels: no nested transition, nothing starts after it, and a second cancel is one', async () => {
    const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => 'ok' }) }, store: false, seed: 1 });
    const run = swarm.run(plan(6));
    const requested: string[] = [];
    const started: string[] = [];
    run.events.on('task:started', (e) => started.push(e.taskId));
    // model:request is reported by the agent actor, from inside its own action.
    run.events.on('model:request', (e) => {
      requested.push(e.taskId);
      if (e.taskId === 't2') {
        run.cancel('enough');
        run.cancel('twice');
      }
    });
    const result = await run.result;
    await swarm.close();
    expect(warnings.filter((w) => /should not call|stopped actor/.test(w))).toEqual([]);
    expect(result.status).toBe('cancelled');
    expect(requested).toEqual(['t0', 't1', 't2']);
    expect(started).toEqual(['t0', 't1', 't2']);
    expect(result.tasks.t0!.status).toBe('completed');
    expect(result.tasks.t1!.status).toBe('completed');
    for (const id of ['t3', 't4', 't5']) expect(result.tasks[id]!.status).not.toBe('completed');
  });

  it('a cancel after the run ended is ignored without a warning', async () => {
    const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => 'ok' }) }, store: false, seed: 1 });
    const run = swarm.run(plan(2));
    const result = await run.result;
    run.cancel('too late');
    await Promise.resolve();
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(warnings.filter((w) => /stopped actor/.test(w))).toEqual([]);
  });
});

describe('task:cancelled, task by task', () => {
  it('a cancel mid-run: each task it stops (in flight, queued, waiting on a dep) says task:cancelled once, with its fields; a completed one is untouched', async () => {
    // `slow` never answers on its own (its latency ends only by its call's abort signal).
    const provider = createScriptedProvider({ reply: (r) => `answer of ${r.meta.taskId}`, latencyMs: (r) => (r.meta.taskId === 'slow' ? 3_600_000 : 0) });
    const swarm = createSwarm({ providers: { p: provider }, store: false, seed: 1 });
    const run = swarm.run({
      providers: { p: { type: 'sim' as const } },
      models: { m: { provider: 'p', model: 'x' } },
      defaults: { maxInFlight: 1 },
      tasks: [
        { id: 'done', model: 'm', prompt: 'first' },
        // After `done`: `slow` ranks first (`waits2` depends on it), so `waits1` stays queued behind it.
        { id: 'slow', model: 'm', deps: ['done'], prompt: 'slow one' },
        { id: 'waits1', model: 'm', deps: ['done'], prompt: 'queued' },
        { id: 'waits2', model: 'm', deps: ['slow'], prompt: 'pending' },
      ],
    });
    const events: { type: string; taskId?: string }[] = [];
    run.events.on('*', (_type, e) => events.push(e as { type: string; taskId?: string }));
    run.events.on('model:request', (e) => {
      if (e.taskId === 'slow') run.cancel('stop here');
    });
    const result = await run.result;
    await swarm.close();

    expect(warnings.filter((w) => /should not call|stopped actor/.test(w))).toEqual([]);
    expect(result.status).toBe('cancelled');
    const cancelled = events.filter((e) => e.type === 'task:cancelled');
    // Once each, and only the tasks the cancel stopped.
    expect(cancelled.map((e) => e.taskId).sort()).toEqual(['slow', 'waits1', 'waits2']);
    // Its fields: the task, and when (every event of a run carries `at`); the one in flight also
    // carries the task's counters so far (its request counts: the journal keeps them for a resume).
    const byTask = new Map(cancelled.map((e) => [e.taskId, e]));
    expect(byTask.get('slow')).toEqual({
      type: 'task:cancelled',
      taskId: 'slow',
      at: expect.any(Number),
      requests: 1,
      retries: 0,
      taskUsage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    });
    for (const id of ['waits1', 'waits2']) expect(byTask.get(id)).toEqual({ type: 'task:cancelled', taskId: id, at: expect.any(Number) });
    // The one in flight ended cancelled, not failed: no task:failed, no retry.
    expect(events.filter((e) => e.type === 'task:failed' || e.type === 'task:retry')).toEqual([]);
    expect(events.filter((e) => e.type === 'run:cancelled')).toEqual([expect.objectContaining({ reason: 'stop here' })]);
    expect(result.tasks.done).toMatchObject({ status: 'completed', output: 'answer of done' });
    expect(events.filter((e) => e.taskId === 'done').map((e) => e.type)).not.toContain('task:cancelled');
    for (const id of ['slow', 'waits1', 'waits2']) expect(result.tasks[id]!.status).toBe('cancelled');
    expect(result.tasks.slow!.requests).toBe(1);
    expect(result.tasks.waits1!.requests).toBe(0);
    expect(result.totals).toMatchObject({ completed: 1, cancelled: 3, failed: 0 });
  });
});
