import { describe, expect, it } from 'vitest';
import { costOf } from '../../src/cost/price.js';
import { PRICES_AS_OF, builtInPrice, priceOf, withOneHourCacheWrites, worstCaseCostUsd } from '../../src/cost/prices.js';

describe('builtInPrice: lookup', () => {
  it('prices Anthropic models with 1.25x cache writes and 0.1x cache reads', () => {
    expect(builtInPrice('claude-sonnet-4-5')).toEqual({ input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 });
    expect(builtInPrice('claude-opus-4-5')).toEqual({ input: 5, output: 25, cacheWrite: 6.25, cacheRead: 0.5 });
    expect(builtInPrice('claude-opus-4-1')).toEqual({ input: 15, output: 75, cacheWrite: 18.75, cacheRead: 1.5 });
    expect(builtInPrice('claude-haiku-4-5')).toEqual({ input: 1, output: 5, cacheWrite: 1.25, cacheRead: 0.1 });
    expect(builtInPrice('claude-3-5-haiku')).toEqual({ input: 0.8, output: 4, cacheWrite: 1, cacheRead: 0.08 });
  });

  it('prices OpenAI models with their cached-input price as cacheRead and no write surcharge', () => {
    expect(builtInPrice('gpt-5')).toEqual({ input: 1.25, output: 10, cacheWrite: 1.25, cacheRead: 0.125 });
    expect(builtInPrice('gpt-5-mini')).toEqual({ input: 0.25, output: 2, cacheWrite: 0.25, cacheRead: 0.025 });
    expect(builtInPrice('gpt-5-nano')).toEqual({ input: 0.05, output: 0.4, cacheWrite: 0.05, cacheRead: 0.005 });
    expect(builtInPrice('gpt-4.1')).toEqual({ input: 2, output: 8, cacheWrite: 2, cacheRead: 0.5 });
    expect(builtInPrice('gpt-4.1-mini')).toEqual({ input: 0.4, output: 1.6, cacheWrite: 0.4, cacheRead: 0.1 });
    expect(builtInPrice('gpt-4o-mini')).toEqual({ input: 0.15, output: 0.6, cacheWrite: 0.15, cacheRead: 0.075 });
    expect(builtInPrice('o3')).toEqual({ input: 2, output: 8, cacheWrite: 2, cacheRead: 0.5 });
    expect(builtInPrice('o4-mini')).toEqual({ input: 1.1, output: 4.4, cacheWrite: 1.1, cacheRead: 0.275 });
  });

  it('knows every model family the plan examples name', () => {
    const ids = [
      'claude-opus-4-5', 'claude-opus-4-1', 'claude-opus-4', 'claude-sonnet-4-5', 'claude-sonnet-4', 'claude-3-7-sonnet',
      'claude-haiku-4-5', 'claude-3-5-haiku', 'gpt-5', 'gpt-5-mini', 'gpt-5-nano', 'gpt-4.1', 'gpt-4.1-mini', 'gpt-4.1-nano',
      'gpt-4o', 'gpt-4o-mini', 'o3', 'o4-mini',
    ];
    for (const id of ids) {
      const price = builtInPrice(id);
      expect(price, id).toBeDefined();
      expect(price!.output, id).toBeGreaterThan(price!.input);
      expect(price!.cacheRead!, id).toBeLessThan(price!.input);
    }
  });

  it('has no price for an unknown model', () => {
    expect(builtInPrice('my-finetune')).toBeUndefined();
    expect(builtInPrice('')).toBeUndefined();
    expect(builtInPrice('constructor')).toBeUndefined();
  });

  it('hands out a copy: changing it does not change the table', () => {
    builtInPrice('gpt-5')!.input = 999;
    expect(builtInPrice('gpt-5')!.input).toBe(1.25);
  });

  it('dates the table', () => {
    expect(PRICES_AS_OF).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
});

describe('builtInPrice: snapshot ids', () => {
  it('matches dated snapshots and -latest aliases to their model', () => {
    expect(builtInPrice('claude-sonnet-4-5-20250929')).toEqual(builtInPrice('claude-sonnet-4-5'));
    expect(builtInPrice('claude-opus-4-20250514')).toEqual(builtInPrice('claude-opus-4'));
    expect(builtInPrice('claude-3-7-sonnet-latest')).toEqual(builtInPrice('claude-3-7-sonnet'));
    expect(builtInPrice('claude-haiku-4-5@20251001')).toEqual(builtInPrice('claude-haiku-4-5'));
    expect(builtInPrice('gpt-4.1-2025-04-14')).toEqual(builtInPrice('gpt-4.1'));
    expect(builtInPrice('gpt-5-mini-2025-08-07')).toEqual(builtInPrice('gpt-5-mini'));
    expect(builtInPrice('o3-2025-04-16')).toEqual(builtInPrice('o3'));
  });

  it('prefers an exact entry over the stripped one (the first gpt-4o snapshot kept its launch price)', () => {
    expect(builtInPrice('gpt-4o-2024-05-13')).toEqual({ input: 5, output: 15, cacheWrite: 5, cacheRead: 5 });
    expect(builtInPrice('gpt-4o-2024-08-06')).toEqual(builtInPrice('gpt-4o'));
  });

  it('does not take a sibling model for a snapshot of another', () => {
    expect(builtInPrice('gpt-4o-mini-2024-07-18')).toEqual(builtInPrice('gpt-4o-mini'));
    expect(builtInPrice('gpt-4o-audio-preview')).toBeUndefined();
    expect(builtInPrice('gpt-4.1-mini-extra')).toBeUndefined();
    expect(builtInPrice('claude-sonnet-4-5-2025')).toBeUndefined();
  });
});

describe('priceOf', () => {
  it("returns the plan's price over the built-in one", () => {
    const plan = { input: 0.5, output: 2.5 };
    expect(priceOf('claude-haiku-4-5', plan)).toBe(plan);
    expect(priceOf('unknown-model', plan)).toBe(plan);
  });

  it('falls back to the built-in price, else undefined', () => {
    expect(priceOf('claude-haiku-4-5-20251001')).toEqual(builtInPrice('claude-haiku-4-5'));
    expect(priceOf('unknown-model')).toBeUndefined();
    expect(priceOf('unknown-model', undefined)).toBeUndefined();
  });
});

describe('withOneHourCacheWrites', () => {
  it("charges cache writes at 2x input and keeps the rest", () => {
    expect(withOneHourCacheWrites(builtInPrice('claude-sonnet-4-5')!)).toEqual({ input: 3, output: 15, cacheWrite: 6, cacheRead: 0.3 });
    expect(withOneHourCacheWrites(builtInPrice('claude-3-5-haiku')!).cacheWrite).toBe(1.6);
  });
});

describe('worstCaseCostUsd', () => {
  it('charges every input token at the dearer of input and cache write, plus maxTokens of output', () => {
    // OpenAI: no write surcharge, so input at the uncached price.
    expect(worstCaseCostUsd(builtInPrice('gpt-4.1')!, 10_000, 1_000)).toBe(0.028);
    // Anthropic: a call that writes its prompt to the cache pays 1.25x on it.
    expect(worstCaseCostUsd(builtInPrice('claude-haiku-4-5')!, 10_000, 1_000)).toBe(0.0175);
    expect(worstCaseCostUsd({ input: 3, output: 15, cacheWrite: 3 }, 1_000_000, 0)).toBe(3);
    expect(worstCaseCostUsd(builtInPrice('gpt-5')!, 0, 0)).toBe(0);
  });

  it('is never below the actual cost of a call within those tokens, however it uses the cache', () => {
    const price = builtInPrice('claude-sonnet-4-5')!;
    const worst = worstCaseCostUsd(price, 20_000, 4_000);
    for (const [plain, write, read] of [[20_000, 0, 0], [0, 20_000, 0], [0, 0, 20_000], [5_000, 10_000, 5_000]]) {
      for (const out of [0, 1, 4_000]) {
        const usage = { inputTokens: plain!, cacheWriteTokens: write!, cacheReadTokens: read!, outputTokens: out };
        expect(costOf(usage, price)!).toBeLessThanOrEqual(worst);
      }
    }
  });
});

describe('costOf: counts from a broken or hostile server', () => {
  it('prices a negative or non-numeric token count as none: a cost is never negative or NaN', () => {
    const price = { input: 3, output: 15 };
    expect(costOf({ inputTokens: -1_000_000, outputTokens: 1_000_000, cacheReadTokens: -5, cacheWriteTokens: 0 }, price)).toBe(15);
    expect(costOf({ inputTokens: -1e12, outputTokens: -1, cacheReadTokens: 0, cacheWriteTokens: -1 }, price)).toBe(0);
    expect(costOf({ inputTokens: Number.NaN, outputTokens: 1_000_000, cacheReadTokens: 0, cacheWriteTokens: Number.POSITIVE_INFINITY }, price)).toBe(15);
  });
});
