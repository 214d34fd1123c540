/**
 * The simulator's tokenizer (cl100k_base) against the runtime's provable input bound: a budget
 * reserves UTF-8 bytes plus framing, and that must never be below what the server counts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maxRequestTokens, utf8Length } from '../../machines/tokens.js';
import { countTokens, truncateToTokens } from '../../src/sim/tokenizer.js';

const text = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 400 }),
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc.string({ minLength: 200, maxLength: 3_000 }),
  fc.constantFrom('x'.repeat(5_000), '😀'.repeat(2_000), 'ab1'.repeat(3_000), '<|endoftext|> '.repeat(50)),
);

describe('sim tokenizer', () => {
  it('counts real BPE tokens, not 4 characters a token', () => {
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens('')).toBe(0);
    expect(countTokens('The quick brown fox jumps over the lazy dog.')).not.toBe(Math.ceil(44 / 4));
  });

  it('never counts more tokens than UTF-8 bytes, so the runtime bound holds (random seeds)', () => {
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 6 }), (texts) => {
        for (const t of texts) {
          expect(countTokens(t)).toBeLessThanOrEqual(utf8Length(t));
          expect(utf8Length(t)).toBe(Buffer.byteLength(t));
        }
        // A request as the simulator counts it: each block plus 4 per message.
        const messages = texts.map((t, i) => ({ role: i % 2 === 0 ? ('user' as const) : ('assistant' as const), content: [{ type: 'text' as const, text: t }] }));
        const server = texts.reduce((n, t) => n + countTokens(t) + 4, 0);
        expect(maxRequestTokens(undefined, messages)).toBeGreaterThanOrEqual(server);
      }),
      { numRuns: 150 },
    );
  });

  it('counts a 200,000-character unbroken run (a hostile blob) in pieces', () => {
    expect(countTokens('x'.repeat(200_000))).toBe(25_000);
  });

  it('truncates to whole tokens', () => {
    const cut = truncateToTokens('hello world '.repeat(300), 5);
    expect(countTokens(cut)).toBe(5);
    expect('hello world '.repeat(300).startsWith(cut)).toBe(true);
  });
});
