/**
 * From token usage to dollars. Prices are USD per million tokens, per model, from the plan.
 * Cache writes default to 1.25x the input price (Anthropic's 5-minute entries) and cache reads to
 * 0.1x, when the plan does not name them. A model without a price has an unknown cost (null),
 * never a made-up zero. (The built-in price table and budgets come with the cost guard.)
 */
import type { Usage } from '../../machines/protocol.js';
import type { ModelPrice } from '../plan/index.js';

const PER_MILLION = 1_000_000;

export function costOf(usage: Usage, price: ModelPrice | undefined): number | null {
  if (!price) return null;
  const cacheWrite = price.cacheWrite ?? price.input * 1.25;
  const cacheRead = price.cacheRead ?? price.input * 0.1;
  const usd =
    (usage.inputTokens * price.input +
      usage.outputTokens * price.output +
      usage.cacheWriteTokens * cacheWrite +
      usage.cacheReadTokens * cacheRead) /
    PER_MILLION;
  return Math.round(usd * 1e8) / 1e8;
}
