/** The stream framing shortcut: a delta frame built around its piece is the frame built whole. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anthropic } from '../../src/sim/anthropic.js';
import { openai } from '../../src/sim/openai.js';
import { pieceFramer, sseFrame } from '../../src/sim/wire.js';
import type { SimReply, SimUsage } from '../../src/sim/types.js';

const build = (piece: string) => sseFrame({ type: 'content_block_delta', index: 3, delta: { type: 'text_delta', text: piece } }, 'content_block_delta');

describe('pieceFramer', () => {
  it('writes exactly what the whole frame would be, for any piece (random seeds)', () => {
    const frame = pieceFramer(build);
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('\u0000sim:piece\u0000', '"}}\n\n', '\\u0000')), (piece) => {
        expect(frame(piece)).toBe(build(piece));
      }),
      { numRuns: 500 },
    );
  });

  it('builds each frame whole when the marker also occurs elsewhere in it', () => {
    const odd = (piece: string) => sseFrame({ model: '\u0000sim:piece\u0000', text: piece });
    const frame = pieceFramer(odd);
    expect(frame('x "y"')).toBe(odd('x "y"'));
  });

  it('leaves both protocols\' stream frames as sseFrame writes them', () => {
    const reply: SimReply = {
      blocks: [
        { type: 'text', text: 'Héllo "world" \u{1F600} '.repeat(30) },
        { type: 'tool_use', id: 'toolu_01x', name: 'look', input: { q: 'a "quoted" \n value', n: [1, 2] } },
      ],
      stopReason: 'tool_use',
      outputTokens: 120,
    };
    const usage: SimUsage = { inputTokens: 10, outputTokens: 120, cacheWriteTokens: 0, cacheReadTokens: 0, cacheWrite5mTokens: 0, cacheWrite1hTokens: 0 };
    const meta = { id: 'msg_01', model: 'sim-fast', created: 1 };
    const a = anthropic.stream(reply, usage, meta, true).body.map((f) => f.text);
    const deltas = a.filter((t) => t.startsWith('event: content_block_delta'));
    expect(deltas.length).toBeGreaterThan(2);
    for (const text of deltas) {
      const data = JSON.parse(text.slice(text.indexOf('data: ') + 6));
      expect(text).toBe(sseFrame(data, 'content_block_delta'));
    }
    const o = openai.stream(reply, usage, meta, true).body.map((f) => f.text);
    for (const text of o) expect(text).toBe(sseFrame(JSON.parse(text.slice(6))));
  });
});
