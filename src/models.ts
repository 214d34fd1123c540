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
