/**
 * Usage to dollars, as pure arithmetic the machines can do themselves (the ledger settles each
 * call at its actual cost). Prices are USD per million tokens. Cache writes default to 1.25x the
 * input price (Anthropic's 5-minute entries) and cache reads to 0.1x when a price names neither.
 */
import type { Usage } from './protocol.js';

export interface Price {
  input: number;
  output: number;
  cacheWrite?: number;
  cacheRead?: number;
}

const PER_MILLION = 1_000_000;
const round = (usd: number) => Math.round(usd * 1e8) / 1e8;

export function costOfUsage(usage: Usage, price: Price): number {
  const cacheWrite = price.cacheWrite ?? price.input * 1.25;
  const cacheRead = price.cacheRead ?? price.input * 0.1;
  return round(
    (tokens(usage.inputTokens) * price.input +
      tokens(usage.outputTokens) * price.output +
      tokens(usage.cacheWriteTokens) * cacheWrite +
      tokens(usage.cacheReadTokens) * cacheRead) /
      PER_MILLION,
  );
}

/**
 * A count as a server reported it, fit to price: a negative or non-numeric count (a broken or
 * hostile server) is none, so a cost is never negative and never NaN (a budget would grow).
 */
function tokens(n: number): number {
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/** The most a call can cost: every input token uncached (written at worst) plus maxTokens of output. */
export function worstCaseUsd(price: Price, inputTokens: number, maxOutputTokens: number): number {
  const input = Math.max(price.input, price.cacheWrite ?? price.input * 1.25);
  return round((inputTokens * input + maxOutputTokens * price.output) / PER_MILLION);
}
