/**
 * The simulator's tokenizer (cl100k_base) against the runtime's provable input bound: a budget
 * reserves UTF-8 bytes plus framing, and that must never be below what the server counts.
 */
import fc from 'fast-check';
import { createRequire } from 'node:module';
import { describe, expect, it, vi } from 'vitest';
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

  it('counts exactly what js-tiktoken encodes, word counts remembered or not (random seeds)', () => {
    const require = createRequire(import.meta.url);
    const { Tiktoken } = require('js-tiktoken/lite');
    const ranks = require('js-tiktoken/ranks/cl100k_base');
    const reference = new Tiktoken(ranks.default ?? ranks);
    // Together at most one piece (1,024 characters): the pieces are cut as before, not by this code.
    const short = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 50 }), fc.string({ unit: 'binary', maxLength: 250 }), fc.string({ maxLength: 500 }));
    fc.assert(
      fc.property(short, short, fc.integer({ min: 1, max: 60 }), (a, b, cut) => {
        // b after a: b's words are mostly remembered by then.
        expect(countTokens(a)).toBe(reference.encode(a, [], []).length);
        expect(countTokens(a + b)).toBe(reference.encode(a + b, [], []).length);
        expect(truncateToTokens(a + b, cut)).toBe(reference.decode(reference.encode(a + b, [], []).slice(0, cut)));
      }),
      { numRuns: 300 },
    );
    for (const t of ["it's  a   test\n\n  x", '<|endoftext|> x  \r\n', 'Task 1234567.', 'a\u{1F600}b\uD800c']) expect(countTokens(t)).toBe(reference.encode(t, [], []).length);
  });

  it('counts a fresh text made of words seen before without encoding it again', () => {
    const require = createRequire(import.meta.url);
    const { Tiktoken } = require('js-tiktoken/lite');
    countTokens('Received the simulated reply and then each plan step. Task 41.');
    const encode = vi.spyOn(Tiktoken.prototype, 'encode');
    try {
      expect(countTokens('Received each plan step and then the simulated reply. Task 41.')).toBe(14);
      expect(encode).not.toHaveBeenCalled();
    } finally {
      encode.mockRestore();
    }
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
