/**
 * The simulator counts tokens with a real BPE tokenizer (OpenAI's cl100k_base, from js-tiktoken:
 * pure JavaScript, its ranks ship inside the npm package), not with the runtime's ~4-characters
 * estimate (`machines/tokens.ts`). So the runtime's pacing and budgets are tested against counts
 * it does not know, as they are against a real provider. Anthropic publishes no tokenizer for
 * current models; a byte-level BPE of the same family is the closest stand-in.
 *
 * The ranks take about half a second to load, so they (and the tokenizer's code) load on the
 * first count, not on import: `import 'swarmstate'` does not pay for them.
 */
import { createRequire } from 'node:module';
import type { Tiktoken } from 'js-tiktoken/lite';

const require = createRequire(import.meta.url);
let encoder: Tiktoken | undefined;

/** Counts of texts seen before (system prompts and tool definitions repeat on every request). */
const memo = new Map<string, number>();
const MEMO_MAX = 4_096;
/** Texts this long are counted again each time rather than kept as memo keys. */
const MEMO_TEXT_MAX = 64 * 1024;

function encoderOf(): Tiktoken {
  if (encoder === undefined) {
    const { Tiktoken: Encoder } = require('js-tiktoken/lite') as { Tiktoken: typeof Tiktoken };
    const ranks = require('js-tiktoken/ranks/cl100k_base') as { default?: unknown };
    encoder = new Encoder((ranks.default ?? ranks) as ConstructorParameters<typeof Tiktoken>[0]);
  }
  return encoder;
}

/**
 * cl100k_base encodes each pre-token (a match of its split pattern) on its own, so a text's count
 * is the sum of its pre-tokens' counts. Generated replies and prompts repeat the same few words
 * (" the", " task", "."), so their counts are kept: counting a fresh text is then a regex split
 * and map look-ups, where `encode` would build each word's bytes and their string key again.
 * With special tokens not allowed (as here), `encode` splits the whole text with this pattern;
 * a pre-token encoded alone splits into itself, so the sums are equal.
 */
let splitter: RegExp | undefined;
const preTokens = new Map<string, number>();
const PRE_TOKENS_MAX = 65_536;
/** Longer pre-tokens (blobs) are rare and not worth a memo slot. */
const PRE_TOKEN_MEMO_LENGTH = 32;

function splitterOf(): RegExp {
  splitter ??= new RegExp((encoderOf() as unknown as { patStr: string }).patStr, 'gu');
  return splitter;
}

function countWord(word: string): number {
  let n = preTokens.get(word);
  if (n === undefined) {
    n = encoderOf().encode(word, [], []).length;
    if (word.length <= PRE_TOKEN_MEMO_LENGTH) {
      if (preTokens.size >= PRE_TOKENS_MAX) preTokens.clear();
      preTokens.set(word, n);
    }
  }
  return n;
}

function countPiece(piece: string): number {
  const split = splitterOf();
  split.lastIndex = 0;
  let count = 0;
  for (let m = split.exec(piece); m !== null; m = split.exec(piece)) count += countWord(m[0]);
  return count;
}

/**
 * The first `maxTokens` tokens of `piece` as text, as decoding its encoding cut there would give:
 * whole words as their UTF-8 round trip (lone surrogates become U+FFFD, as in `decode`), then the
 * word the cut falls in, encoded alone (its tokens are the same as inside the piece) and cut.
 */
function cutPiece(piece: string, maxTokens: number): string {
  const split = splitterOf();
  split.lastIndex = 0;
  let left = maxTokens;
  for (let m = split.exec(piece); m !== null; m = split.exec(piece)) {
    const n = countWord(m[0]);
    if (n > left) return wellFormed(piece.slice(0, m.index)) + cutWord(m[0], left);
    left -= n;
  }
  return wellFormed(piece);
}

/** Cuts of words seen before: replies are cut at a budget, often the same one in the same filler word. */
const cuts = new Map<string, string>();

/** The first `maxTokens` (fewer than its count) tokens of one word, decoded. */
function cutWord(word: string, maxTokens: number): string {
  const key = `${maxTokens}\u0000${word}`;
  let cut = cuts.get(key);
  if (cut === undefined) {
    cut = encoderOf().decode(encoderOf().encode(word, [], []).slice(0, maxTokens));
    if (word.length <= PRE_TOKEN_MEMO_LENGTH) {
      if (cuts.size >= PRE_TOKENS_MAX) cuts.clear();
      cuts.set(key, cut);
    }
  }
  return cut;
}

/** `String.prototype.toWellFormed` (Node 20 has it; lib ES2023 does not type it). */
const wellFormed = (text: string): string => (text as unknown as { toWellFormed(): string }).toWellFormed();

/**
 * Tokens of `text` under cl100k_base. Special-token text (`<|endoftext|>`) counts as ordinary text.
 *
 * @example countTokens('hello world') // 2
 */
export function countTokens(text: string): number {
  if (text === '') return 0;
  const known = memo.get(text);
  if (known !== undefined) return known;
  let count = 0;
  for (const piece of pieces(text)) count += countPiece(piece);
  if (text.length <= MEMO_TEXT_MAX) {
    if (memo.size >= MEMO_MAX) memo.delete(memo.keys().next().value as string);
    memo.set(text, count);
  }
  return count;
}

/**
 * BPE merges within one pre-token cost quadratic time in its length: 32,000 characters without a
 * space take a minute. So text is counted in pieces of at most PIECE characters, cut at white
 * space where there is some near the cut, else (an unbroken run) every RUN_PIECE characters, and
 * never inside a surrogate pair. A cut inside a run can add a token (at most one per 64
 * characters); each piece still counts no more tokens than its UTF-8 bytes.
 */
const PIECE = 1_024;
const RUN_PIECE = 64;

function* pieces(text: string): Generator<string> {
  let start = 0;
  while (text.length - start > PIECE) {
    let end = start + PIECE;
    const space = text.lastIndexOf(' ', end);
    if (space > start + PIECE / 2) end = space;
    else {
      // An unbroken run (a hostile or generated blob): short cuts keep each merge cheap.
      end = start + RUN_PIECE;
      const c = text.charCodeAt(end);
      if (c >= 0xdc00 && c <= 0xdfff) end--; // the low half of a pair: keep the pair together
    }
    yield text.slice(start, end);
    start = end;
  }
  yield text.slice(start);
}

/**
 * The longest prefix of `text` that is at most `maxTokens` tokens (whole tokens: a cut reply
 * ends where the model would have stopped).
 */
export function truncateToTokens(text: string, maxTokens: number): string {
  if (maxTokens <= 0) return '';
  let out = '';
  let left = maxTokens;
  for (const piece of pieces(text)) {
    // Whole pieces by their count; only the word the cut falls in is encoded.
    const count = countPiece(piece);
    if (count <= left) {
      out += piece;
      left -= count;
      if (left === 0) break;
      continue;
    }
    return out + cutPiece(piece, left);
  }
  return out;
}
