/**
 * Built-in facts about well-known models, used when the plan does not say: the context window.
 * A plan's `contextTokens` always wins. Unknown models get a conservative 128k.
 */
const CONTEXT_WINDOWS: [RegExp, number][] = [
  [/^claude-/, 200_000],
  [/^gpt-4\.1/, 1_047_576],
  [/^gpt-5/, 400_000],
  [/^(gpt-4o|o1|o3|o4)/, 128_000],
  [/^gpt-4-turbo/, 128_000],
  [/^gpt-3\.5/, 16_385],
  [/^sim-/, 200_000],
];

export const DEFAULT_CONTEXT_TOKENS = 128_000;

export function contextWindowOf(model: string, declared?: number): number {
  if (declared !== undefined) return declared;
  for (const [pattern, tokens] of CONTEXT_WINDOWS) if (pattern.test(model)) return tokens;
  return DEFAULT_CONTEXT_TOKENS;
}

/**
 * The shortest prompt prefix Anthropic caches, per model (shorter ones are neither written nor
 * read, so holding tasks back for them would only delay them). From Anthropic's documentation as
 * of 2026: 4,096 for Opus 4.5/4.6 and Haiku 4.5, 2,048 for Sonnet 4.6 and the Haiku 3 family,
 * 1,024 otherwise.
 */
const MIN_CACHE_TOKENS: [RegExp, number][] = [
  [/opus-4-[56]|haiku-4-5/, 4096],
  [/sonnet-4-6|3-5-haiku|3-haiku|haiku-3/, 2048],
];

export function minCacheTokensOf(model: string): number {
  for (const [pattern, tokens] of MIN_CACHE_TOKENS) if (pattern.test(model)) return tokens;
  return 1024;
}
