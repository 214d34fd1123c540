/**
 * The provider types are one table (src/providers/providerTypes.ts): the plan's schema accepts
 * exactly its names, its checks follow each row, and every built-in type has an adapter.
 */
import { describe, expect, it } from 'vitest';
import { validatePlan } from '../../src/plan/index.js';
import { PROVIDER_TYPE_NAMES, PROVIDER_TYPES } from '../../src/providers/providerTypes.js';
import { ProviderRegistry } from '../../src/providers/registry.js';

const planWith = (provider: Record<string, unknown>) => ({
  providers: { p: provider },
  models: { m: { provider: 'p', model: 'x' } },
  tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
});

describe('provider types, from one table', () => {
  it('the plan accepts each type of the table (keys where its row needs them) and refuses any other', () => {
    for (const type of PROVIDER_TYPE_NAMES) {
      const withKey = validatePlan(planWith({ type, keys: [{ env: 'SOME_KEY' }] }), { env: { SOME_KEY: 'k' } });
      expect(withKey.ok, type).toBe(true);
      const keyless = validatePlan(planWith({ type }), { env: {} });
      if (PROVIDER_TYPES[type].needsKeys) expect(keyless.ok ? [] : keyless.issues.map((i) => i.path), type).toContain('providers.p.keys');
      else expect(keyless.ok, type).toBe(true);
    }
    const unknown = validatePlan(planWith({ type: 'gemini' }), { env: {} });
    expect(unknown.ok ? [] : unknown.issues.map((i) => i.path)).toContain('providers.p.type');
  });

  it('refuses an endpoint in the plan for a type served by an object given in code', () => {
    for (const type of PROVIDER_TYPE_NAMES.filter((t) => PROVIDER_TYPES[t].inCode)) {
      const r = validatePlan(planWith({ type, baseURL: 'http://127.0.0.1:1' }), { env: {} });
      expect(r.ok ? [] : r.issues.map((i) => i.path), type).toContain('providers.p.baseURL');
    }
  });

  it('has an adapter for every built-in type, and asks for the object of an in-code one', async () => {
    const registry = new ProviderRegistry({ now: () => 0, seed: 0 });
    try {
      for (const type of PROVIDER_TYPE_NAMES) {
        const spec = { type, keys: [], cache: true } as never;
        if (PROVIDER_TYPES[type].inCode) expect(() => registry.get(`p-${type}`, spec, []), type).toThrow(/given in code/);
        else expect(typeof registry.get(`p-${type}`, spec, ['k']).call, type).toBe('function');
      }
    } finally {
      await registry.close();
    }
  });
});
