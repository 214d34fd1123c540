/**
 * Resolving a big plan (src/resolve.ts): what a model gives all of its tasks (its context window,
 * whether it fans out) is worked out once per model, not once per task; the tasks come out as before.
 */
import { describe, expect, it, vi } from 'vitest';

vi.mock('../../src/models.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/models.js')>();
  return { ...real, contextWindowOf: vi.fn(real.contextWindowOf) };
});

const { contextWindowOf } = await import('../../src/models.js');
const { resolveRun } = await import('../../src/resolve.js');
const { parsePlan } = await import('../../src/plan/index.js');
const { Keyring } = await import('../../src/keys.js');

describe('resolveRun', () => {
  it('works out a model\'s context window once for all of its tasks', () => {
    const plan = parsePlan(
      {
        providers: { p: { type: 'sim' } },
        models: { big: { provider: 'p', model: 'instant', contextTokens: 50_000 }, small: { provider: 'p', model: 'instant', contextTokens: 20_000 } },
        tasks: Array.from({ length: 200 }, (_, i) => ({ id: `t${i}`, model: i % 2 === 0 ? 'big' : 'small', prompt: 'x', deps: i > 0 ? [`t${i - 1}`] : [] })),
      },
      { env: {}, tools: [] },
    );
    vi.mocked(contextWindowOf).mockClear();
    const input = resolveRun(plan, { runId: 'r', keyring: new Keyring(), env: {}, busTools: [], seed: 0, backoff: { baseMs: 1, maxMs: 2 } });
    expect(vi.mocked(contextWindowOf).mock.calls.length).toBeLessThanOrEqual(2);
    expect(input.tasks).toHaveLength(200);
    const maxTokens = input.tasks[0]!.maxTokens;
    expect(input.tasks[0]).toMatchObject({ id: 't0', rank: 200, inputBudget: 50_000 - maxTokens });
    expect(input.tasks[199]).toMatchObject({ id: 't199', rank: 1, inputBudget: 20_000 - input.tasks[199]!.maxTokens, deps: ['t198'] });
  });
});
