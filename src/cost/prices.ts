/**
 * Built-in list prices of current Anthropic and OpenAI models, in USD per million tokens, so a
 * plan can name a well-known model without typing its price. A model's `price` in the plan always
 * overrides this table (negotiated rates, other providers, prices that changed since
 * {@link PRICES_AS_OF}); a model in neither has an unknown cost, never a made-up one.
 *
 * Cache prices: Anthropic bills cache writes above the input price (1.25x for 5-minute entries,
 * the default; 2x for 1-hour entries: see {@link withOneHourCacheWrites}) and cache reads at 0.1x.
 * OpenAI caches automatically with no write surcharge (cacheWrite = input) and bills cached input
 * at a per-model price. Long-context surcharges (e.g. Sonnet 4 and 4.5 above 200K input tokens)
 * and batch discounts are not modelled: put such a price in the plan.
 */
import { worstCaseUsd } from '../../machines/cost.js';
import type { ModelPrice } from '../plan/index.js';

/** The date of the published list prices this table holds: later changes need the plan's `price`. */
export const PRICES_AS_OF = '2026-02-20';

/** Anthropic's cache multipliers of the input price. */
export const ANTHROPIC_CACHE_WRITE_5M = 1.25;
export const ANTHROPIC_CACHE_WRITE_1H = 2;
export const ANTHROPIC_CACHE_READ = 0.1;

/** Prices are quoted to the cent's hundredth: keep 0.8 x 0.1 at 0.08, not 0.08000000000000002. */
const tidy = (usd: number) => Math.round(usd * 1e6) / 1e6;

function anthropic(input: number, output: number): ModelPrice {
  return { input, output, cacheWrite: tidy(input * ANTHROPIC_CACHE_WRITE_5M), cacheRead: tidy(input * ANTHROPIC_CACHE_READ) };
}

/** `cachedInput` undefined: the model has no prompt caching, so cached input costs full price. */
function openai(input: number, cachedInput: number | undefined, output: number): ModelPrice {
  return { input, output, cacheWrite: input, cacheRead: cachedInput ?? input };
}

/** Keyed by the provider's model id without a date suffix (see {@link builtInPrice}). */
const TABLE: ReadonlyMap<string, Readonly<ModelPrice>> = new Map<string, ModelPrice>([
  // Anthropic
  ['claude-opus-4-6', anthropic(5, 25)],
  ['claude-opus-4-5', anthropic(5, 25)],
  ['claude-opus-4-1', anthropic(15, 75)],
  ['claude-opus-4-0', anthropic(15, 75)],
  ['claude-opus-4', anthropic(15, 75)],
  ['claude-sonnet-4-6', anthropic(3, 15)],
  ['claude-sonnet-4-5', anthropic(3, 15)],
  ['claude-sonnet-4-0', anthropic(3, 15)],
  ['claude-sonnet-4', anthropic(3, 15)],
  ['claude-3-7-sonnet', anthropic(3, 15)],
  ['claude-3-5-sonnet', anthropic(3, 15)],
  ['claude-haiku-4-5', anthropic(1, 5)],
  ['claude-3-5-haiku', anthropic(0.8, 4)],
  // Claude 3 Haiku's cache prices are not the usual multiples of its input price.
  ['claude-3-haiku', { input: 0.25, output: 1.25, cacheWrite: 0.3, cacheRead: 0.03 }],
  ['claude-3-opus', anthropic(15, 75)],
  // OpenAI
  ['gpt-5.1', openai(1.25, 0.125, 10)],
  ['gpt-5', openai(1.25, 0.125, 10)],
  ['gpt-5-chat', openai(1.25, 0.125, 10)],
  ['gpt-5-codex', openai(1.25, 0.125, 10)],
  ['gpt-5-mini', openai(0.25, 0.025, 2)],
  ['gpt-5-nano', openai(0.05, 0.005, 0.4)],
  ['gpt-5-pro', openai(15, undefined, 120)],
  ['gpt-4.1', openai(2, 0.5, 8)],
  ['gpt-4.1-mini', openai(0.4, 0.1, 1.6)],
  ['gpt-4.1-nano', openai(0.1, 0.025, 0.4)],
  ['gpt-4o', openai(2.5, 1.25, 10)],
  // The first gpt-4o snapshot kept its launch price and has no prompt caching.
  ['gpt-4o-2024-05-13', openai(5, undefined, 15)],
  ['gpt-4o-mini', openai(0.15, 0.075, 0.6)],
  ['o1', openai(15, 7.5, 60)],
  ['o1-mini', openai(1.1, 0.55, 4.4)],
  ['o3', openai(2, 0.5, 8)],
  ['o3-pro', openai(20, undefined, 80)],
  ['o3-mini', openai(1.1, 0.55, 4.4)],
  ['o4-mini', openai(1.1, 0.275, 4.4)],
]);

/**
 * The suffixes that name a snapshot of the same model: Anthropic's `-20250929`, Vertex's
 * `@20250929`, OpenAI's `-2025-04-14`, and the `-latest` aliases. Stripping only these (rather
 * than matching any prefix) keeps `gpt-4o-mini` or `gpt-4o-audio-preview` from costing as `gpt-4o`.
 */
const SNAPSHOT_SUFFIX = /(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$/;

/**
 * The built-in list price of a model id, matched exactly or after dropping a snapshot suffix.
 * A fresh object each call: callers may change it.
 *
 * @example
 * builtInPrice('claude-sonnet-4-5-20250929'); // { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 }
 * builtInPrice('gpt-4.1-2025-04-14');         // { input: 2, output: 8, cacheWrite: 2, cacheRead: 0.5 }
 * builtInPrice('my-finetune');                // undefined
 */
export function builtInPrice(model: string): ModelPrice | undefined {
  const price = TABLE.get(model) ?? TABLE.get(model.replace(SNAPSHOT_SUFFIX, ''));
  return price && { ...price };
}

/**
 * The price to charge a model at: the plan's when it gives one (it always wins), else the
 * built-in list price, else undefined (unknown cost).
 *
 * @example
 * priceOf('claude-haiku-4-5', { input: 0.5, output: 2.5 }); // the plan's
 * priceOf('claude-haiku-4-5');                              // the built-in { input: 1, output: 5, ... }
 */
export function priceOf(model: string, planPrice?: ModelPrice): ModelPrice | undefined {
  return planPrice ?? builtInPrice(model);
}

/**
 * The same price with cache writes at Anthropic's 1-hour rate (2x input) instead of the
 * 5-minute one, for plans that cache with `ttl: '1h'`.
 *
 * @example
 * withOneHourCacheWrites(builtInPrice('claude-sonnet-4-5')!).cacheWrite; // 6
 */
export function withOneHourCacheWrites(price: ModelPrice): ModelPrice {
  return { ...price, cacheWrite: tidy(price.input * ANTHROPIC_CACHE_WRITE_1H) };
}

/**
 * What to reserve with the ledger before a call: the most the call can cost, with every input
 * token billed at the dearer of the uncached input and the cache-write price (a call that writes
 * its prompt to the cache costs more than one that does not) and `maxOutputTokens` of output.
 * One formula with the machines' (machines/cost.ts), so an agent's reservation and this agree.
 *
 * @example
 * worstCaseCostUsd(builtInPrice('gpt-4.1')!, 10_000, 1_000);   // 0.028: OpenAI has no write surcharge
 * worstCaseCostUsd(builtInPrice('claude-haiku-4-5')!, 10_000, 1_000); // 0.0175: 10,000 x $1.25 + 1,000 x $5 per M
 */
export function worstCaseCostUsd(price: ModelPrice, inputTokens: number, maxOutputTokens: number): number {
  return worstCaseUsd(price, inputTokens, maxOutputTokens);
}
