/**
 * XState's assign builds each new context with Object.assign({}, context, patch). V8 keeps such an
 * object in fast mode up to 19 own properties; from 20 on it is a dictionary-mode object, and
 * every assign and every read of it is several times slower (measured: ~12x per assign). So no
 * machine's context may grow past 19 top-level fields: group fields into sub-objects instead.
 */
import { describe, expect, it } from 'vitest';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { ProviderError } from '../../src/providers/errors.js';

const LIMIT = 19;

describe('machine contexts stay small', () => {
  it(`every actor of a run (budgeted, with retries) keeps at most ${LIMIT} context fields`, async () => {
    const widest = new Map<string, number>();
    const inspect = (e: InspectionEvent) => {
      if (e.type !== '@xstate.snapshot') return;
      const context = (e.snapshot as { context?: unknown }).context;
      if (!context || typeof context !== 'object') return;
      // The kind of actor: `agent:3` -> agent, `breaker:p/m` -> breaker; the root is the supervisor.
      const ref = e.actorRef as AnyActorRef;
      const kind = ref.sessionId === e.rootId ? 'supervisor' : ref.id.replace(/:.*/, '');
      widest.set(kind, Math.max(widest.get(kind) ?? 0, Object.keys(context).length));
    };
    let calls = 0;
    const provider = createScriptedProvider({
      // Every third call fails once with a retryable error, so the agents take the retry path too.
      reply: () => {
        calls += 1;
        if (calls % 3 === 0) throw new ProviderError('server_error', 'simulated 500', { status: 500 });
        return 'ok';
      },
    });
    const swarm = createSwarm({ providers: { p: provider }, store: false, seed: 1, inspect });
    const plan = {
      providers: { p: { type: 'custom' } },
      models: { m: { provider: 'p', model: 'x', maxTokens: 8, price: { input: 1, output: 1 } } },
      budget: { usd: 10 },
      defaults: { maxRetries: 3 },
      tasks: Array.from({ length: 12 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: 'hi', ...(i > 0 ? { deps: [`t${i - 1}`] } : {}) })),
    };
    const result = await swarm.run(plan as Parameters<typeof swarm.run>[0]).result;
    await swarm.close();
    expect(result.totals.completed).toBe(12);
    // The kinds this run must have shown, so the check cannot pass by seeing nothing.
    for (const kind of ['supervisor', 'group', 'agent', 'pool', 'key', 'breaker', 'ledger', 'toolBus']) expect(widest.has(kind), kind).toBe(true);
    for (const [kind, fields] of widest) expect(fields, `${kind} context fields`).toBeLessThanOrEqual(LIMIT);
  });
});
