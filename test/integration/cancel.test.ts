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
