/**
 * The simulator counts tokens with a real BPE tokenizer (OpenAI's cl100k_base, from js-tiktoken:
 * pure JavaScript, its ranks ship inside the npm package), not with the runtime's ~4-characters
 * estimate (`machines/tokens.ts`). So the runtime's pacing and budgets are tested against counts
 * it does not know, as they are against a real provider. Anthropic publishes no tokenizer for
 * current models; a byte-level BPE of the same family is the closest stand-in.
 *
 * The ranks take about half a second to load, so they load on the first count, not on import.
 */
import { createRequire } from 'node:module';
import { Tiktoken } from 'js-tiktoken/lite';

const require = createRequire(import.meta.url);
let encoder: Tiktoken | undefined;

/** Counts of texts seen before (system prompts and tool definitions repeat on every request). */
const memo = new Map<string, number>();
const MEMO_MAX = 4_096;
/** Texts this long are counted again each time rather than kept as memo keys. */
const MEMO_TEXT_MAX = 64 * 1024;

function encoderOf(): Tiktoken {
  if (encoder === undefined) {
    const ranks = require('js-tiktoken/ranks/cl100k_base') as { default?: unknown };
    encoder = new Tiktoken((ranks.default ?? ranks) as ConstructorParameters<typeof Tiktoken>[0]);
  }
  return encoder;
}

/**
 * Tokens of `text` under cl100k_base. Special-token text (`<|endoftext|>`) counts as ordinary text.
 *
 * @example countTokens('hello world') // 2
 */
export function countTokens(text: string): number {
  if (text === '') return 0;
  const known = memo.get(text);
  if (known !== undefined) return known;
  const count = encoderOf().encode(text, [], []).length;
  if (text.length <= MEMO_TEXT_MAX) {
    if (memo.size >= MEMO_MAX) memo.delete(memo.keys().next().value as string);
    memo.set(text, count);
  }
  return count;
}

/**
 * The longest prefix of `text` that is at most `maxTokens` tokens (whole tokens: a cut reply
 * ends where the model would have stopped).
 */
export function truncateToTokens(text: string, maxTokens: number): string {
  if (maxTokens <= 0) return '';
  const tokens = encoderOf().encode(text, [], []);
  if (tokens.length <= maxTokens) return text;
  return encoderOf().decode(tokens.slice(0, maxTokens));
}
