/**
 * The dispatch contract: a beforeDispatch hook sees every model call before it is sent and
 * allows, denies or rewrites it; a hook that throws denies; every decision is an event.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { countTokens } from '../../src/sim/tokenizer.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSwarm, type DispatchInfo, type Hooks, type RunEvent } from '../../src/index.js';

const plan = (extra: Record<string, unknown> = {}) => ({
  providers: { p: { type: 'sim' } },
  models: {
    smart: { provider: 'p', model: 'sim-smart', maxTokens: 400, price: { input: 3, output: 15 } },
    cheap: { provider: 'p', model: 'sim-cheap', maxTokens: 400, price: { input: 0.25, output: 1 } },
  },
  tasks: [
    { id: 'keep', model: 'smart', prompt: 'keep [[sim:reply kept]]' },
    { id: 'deny', model: 'smart', prompt: 'deny [[sim:reply never]]' },
    { id: 'swap', model: 'smart', prompt: 'swap [[sim:reply swapped]]' },
    { id: 'short', model: 'smart', prompt: 'short [[sim:length 300]]' },
  ],
  ...extra,
});

async function run(hooks: Hooks | undefined, p = plan()) {
  const swarm = createSwarm(hooks ? { hooks } : {});
  const handle = swarm.run(p);
  const events: RunEvent[] = [];
  handle.events.on('*', (_t, e) => events.push(e as RunEvent));
  const result = await handle.result;
  await swarm.close();
  return { result, events };
}

describe('beforeDispatch hooks', () => {
  it('allow, deny, rewrite to another model and to a smaller maxTokens, each recorded', async () => {
    const seen: DispatchInfo[] = [];
    const { result, events } = await run({
      beforeDispatch: (call) => {
        seen.push(call);
        if (call.taskId === 'deny') return { action: 'deny', reason: 'not today' };
        if (call.taskId === 'swap') return { action: 'rewrite', model: 'cheap', reason: 'cheaper' };
        if (call.taskId === 'short') return { action: 'rewrite', maxTokens: 20 };
        return undefined;
      },
    });
    expect(result.tasks.keep).toMatchObject({ status: 'completed', output: 'kept' });
    expect(result.tasks.deny).toMatchObject({ status: 'failed', attempts: 1, requests: 0, error: { code: 'dispatch_denied', retryable: false } });
    expect(result.tasks.deny!.error!.message).toContain('not today');
    expect(result.tasks.swap).toMatchObject({ status: 'completed', output: 'swapped' });
    expect(countTokens(String(result.tasks.short!.output))).toBeLessThanOrEqual(20); // the simulator's own count

    const requests = events.filter((e): e is Extract<RunEvent, { type: 'model:request' }> => e.type === 'model:request');
    expect(requests.find((r) => r.taskId === 'swap')!.model).toBe('sim-cheap');
    expect(requests.some((r) => r.taskId === 'deny')).toBe(false);
    const decisions = events.filter((e): e is Extract<RunEvent, { type: 'dispatch:decision' }> => e.type === 'dispatch:decision');
    expect(decisions.map((d) => [d.taskId, d.decision]).sort()).toEqual([
      ['deny', 'deny'],
      ['keep', 'allow'],
      ['short', 'rewrite'],
      ['swap', 'rewrite'],
    ]);
    expect(decisions.find((d) => d.taskId === 'swap')).toMatchObject({ model: 'smart', to: 'cheap', reason: 'cheaper' });
    expect(seen.find((c) => c.taskId === 'keep')).toMatchObject({ model: 'smart', modelId: 'sim-smart', turn: 0, depth: 0, maxTokens: 400, call: 'turn' });
    expect(seen.find((c) => c.taskId === 'keep')!.estimatedCostUsd).toBeGreaterThan(0);
  });

  it('a hook that throws denies; a rewrite to an unknown model denies', async () => {
    const { result } = await run({
      beforeDispatch: (call) => {
        if (call.taskId === 'keep') throw new Error('hook bug');
        if (call.taskId === 'swap') return { action: 'rewrite', model: 'ghost' };
        return true;
      },
    });
    expect(result.tasks.keep!.error).toMatchObject({ code: 'dispatch_denied' });
    expect(result.tasks.keep!.error!.message).toContain('the hook threw: hook bug');
    expect(result.tasks.swap!.error!.message).toContain('"ghost"');
    expect(result.tasks.deny!.status).toBe('completed');
  });

  it('sees what is left of the run budget', async () => {
    const left: number[] = [];
    await run({ beforeDispatch: (call) => void left.push(call.budgetLeftUsd!) }, plan({ budget: { usd: 1 } }));
    expect(left.length).toBe(4);
    expect(left.every((x) => x > 0 && x <= 1)).toBe(true);
  });

  it('loads a plan hook module, and names it when it cannot be loaded', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'swarmstate-hooks-'));
    const file = join(dir, 'hooks.mjs');
    writeFileSync(file, `export function beforeDispatch(call) { return call.taskId === 'keep' ? { action: 'deny', reason: 'from the plan' } : undefined; }\n`);
    const { result } = await run(undefined, plan({ hooks: { module: file } }));
    expect(result.tasks.keep!.error!.message).toContain('from the plan');
    expect(result.tasks.swap!.status).toBe('completed');

    const swarm = createSwarm();
    await expect(swarm.run(plan({ hooks: { module: join(dir, 'missing.mjs') } })).result).rejects.toThrow(/hooks\.module/);
    await swarm.close();
  });
});

describe('beforeToolCall hooks', () => {
  it('allow, deny (an error result the model reads) and new arguments, each recorded', async () => {
    const calls: unknown[] = [];
    const swarm = createSwarm({
      tools: [{ name: 'lookup', inputSchema: { type: 'object' }, handler: async (args: unknown) => (calls.push(args), `found ${JSON.stringify(args)}`) }],
      hooks: {
        beforeToolCall: (call) => {
          const sku = (call.args as { sku: string }).sku;
          if (sku === 'secret') return { action: 'deny', reason: 'not for agents' };
          if (sku === 'old') return { action: 'rewrite', args: { sku: 'new' } };
          if (sku === 'boom') throw new Error('hook bug');
          return undefined;
        },
      },
    });
    const run = swarm.run({
      providers: { p: { type: 'sim' } },
      models: { m: { provider: 'p', model: 'sim-m' } },
      tasks: [
        {
          id: 't',
          model: 'm',
          tools: ['lookup'],
          prompt: 'go [[sim:tool lookup {"sku":"a"}]] [[sim:tool lookup {"sku":"secret"}]] [[sim:tool lookup {"sku":"old"}]] [[sim:tool lookup {"sku":"boom"}]]',
        },
      ],
    });
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(calls).toEqual([{ sku: 'a' }, { sku: 'new' }]);
    const decisions = events.filter((e): e is Extract<RunEvent, { type: 'tool:decision' }> => e.type === 'tool:decision').map((d) => [d.decision, d.reason]);
    expect(decisions).toEqual([
      ['allow', undefined],
      ['deny', 'not for agents'],
      ['rewrite', undefined],
      ['deny', 'the hook threw: hook bug'],
    ]);
    expect(events.filter((e) => e.type === 'tool:denied').length).toBe(2);
  });
});
