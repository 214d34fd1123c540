/**
 * Routing around an outage: a model's fallbacks take over when its route's breaker is open, after
 * overload errors in a row, or when every key of its provider is set aside (nothing but 429s);
 * the switch is an event and shows in the result.
 */
import { describe, expect, it } from 'vitest';
import { createSwarm, type RunEvent } from '../../src/index.js';

const plan = (tasks: number) => ({
  providers: {
    down: { type: 'sim', sim: { faults: { http529: 1 } } }, // every call: 529 overloaded
    up: { type: 'sim' },
  },
  models: {
    main: { provider: 'down', model: 'sim-main', fallback: ['backup'] },
    backup: { provider: 'up', model: 'sim-backup' },
  },
  defaults: { maxInFlight: 2, maxRetries: 6 },
  tasks: Array.from({ length: tasks }, (_, i) => ({ id: `t${i}`, model: 'main', prompt: `task ${i} [[sim:reply done-${i}]]` })),
});

describe('fallback routes', () => {
  it('moves to the fallback after overload errors in a row, and once the breaker opens, at admission', async () => {
    const swarm = createSwarm({ backoff: { baseMs: 1, maxMs: 5 }, breaker: { failureThreshold: 3, cooldownMs: 60_000 } });
    const run = swarm.run(plan(8));
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    for (let i = 0; i < 8; i++) expect(result.tasks[`t${i}`]).toMatchObject({ status: 'completed', output: `done-${i}`, model: 'main', servedBy: 'backup' });
    const fallbacks = events.filter((e): e is Extract<RunEvent, { type: 'task:fallback' }> => e.type === 'task:fallback');
    expect(fallbacks.every((f) => f.from === 'main' && f.to === 'backup')).toBe(true);
    const reasons = new Set(fallbacks.map((f) => f.reason));
    expect(reasons).toContain('2 overload errors in a row');
    expect(reasons).toContain('breaker open');
    expect(events.some((e) => e.type === 'breaker:open' && e.route === 'down/sim-main')).toBe(true);
    // Once the breaker is open no task calls the dead route: later tasks go straight to the fallback.
    const lastOpen = events.findIndex((e) => e.type === 'breaker:open');
    const deadCallsAfter = events.slice(lastOpen + 1).filter((e) => e.type === 'model:request' && e.provider === 'down');
    expect(deadCallsAfter).toEqual([]);
  });
});

describe('fallback routes with a budget', () => {
  it('moves a reserved call to the fallback without leaking its reservation', async () => {
    const base = plan(8);
    const p = {
      ...base,
      models: { main: { ...base.models.main, price: { input: 1, output: 1 } }, backup: { ...base.models.backup, price: { input: 2, output: 2 } } },
      budget: { usd: 1 },
    };
    const swarm = createSwarm({ backoff: { baseMs: 1, maxMs: 5 }, breaker: { failureThreshold: 3, cooldownMs: 60_000 } });
    const run = swarm.run(p);
    let ledgerBook: { outstanding: number } | undefined;
    run.events.on('run:completed', () => {
      ledgerBook = run.actor?.system.get('ledger')?.getSnapshot().context.book;
    });
    const result = await run.result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(Object.values(result.tasks).every((t) => t.servedBy === 'backup')).toBe(true);
    expect(ledgerBook?.outstanding).toBe(0);
  });
});

describe('fallback routes when every key of the route meets nothing but 429s', () => {
  it('sets the keys aside after maxRateLimitedMs and the fallback serves every task', async () => {
    const p = {
      providers: {
        // A key throttled to zero: every request a 429 (Retry-After 1 s).
        zero: { type: 'sim', keys: ['sk-zero-aaaaaaaa'], maxRateLimitedMs: 300, sim: { limits: { rpm: 0 } } },
        up: { type: 'sim' },
      },
      models: {
        main: { provider: 'zero', model: 'sim-main', fallback: ['backup'] },
        backup: { provider: 'up', model: 'sim-backup' },
      },
      // Far above maxRateLimitedMs: a task that waited for its deadline would fail task_timeout.
      defaults: { maxInFlight: 3, maxRetries: 2, taskTimeoutMs: 20_000 },
      tasks: Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, model: 'main', prompt: `task ${i} [[sim:reply done-${i}]]` })),
    };
    const swarm = createSwarm({ seed: 1 });
    const run = swarm.run(p);
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    for (let i = 0; i < 6; i++) expect(result.tasks[`t${i}`]).toMatchObject({ status: 'completed', output: `done-${i}`, model: 'main', servedBy: 'backup', attempts: 1 });
    expect(events.filter((e) => e.type === 'key:set-aside')).toMatchObject([{ provider: 'zero' }]);
    const fallbacks = events.filter((e): e is Extract<RunEvent, { type: 'task:fallback' }> => e.type === 'task:fallback');
    expect(fallbacks.length).toBeGreaterThanOrEqual(6);
    for (const f of fallbacks) expect(f).toMatchObject({ from: 'main', to: 'backup', reason: 'every key rate limited (429)' });
    // Once the key is set aside no task calls the throttled route again.
    const aside = events.findIndex((e) => e.type === 'key:set-aside');
    expect(events.slice(aside + 1).filter((e) => e.type === 'model:request' && e.provider === 'zero')).toEqual([]);
  });
});
