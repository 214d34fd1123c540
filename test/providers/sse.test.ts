import { describe, expect, it } from 'vitest';
import { readSse, SseParser, type SseEvent } from '../../src/providers/sse.js';
import { fixture } from './server.js';

function parseAll(chunks: (string | Uint8Array)[]): SseEvent[] {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (const chunk of chunks) events.push(...parser.push(chunk));
  events.push(...parser.end());
  return events;
}

const bytes = (text: string) => new TextEncoder().encode(text);

const STREAM = [
  ': a comment first',
  'event: first',
  'data: {"a":1}',
  '',
  'data: line one',
  'data: line two',
  'data:',
  'data:  two leading spaces keep one',
  '',
  ':keep-alive',
  'event: ünïcödé',
  'id: 42',
  'retry: 1500',
  'data: 日本語 — ça va',
  '',
  'event: empty-data-is-still-an-event',
  'data',
  '',
].join('\n') + '\n';

const EXPECTED: SseEvent[] = [
  { event: 'first', data: '{"a":1}' },
  { event: 'message', data: 'line one\nline two\n\n two leading spaces keep one' },
  { event: 'ünïcödé', data: '日本語 — ça va', id: '42', retry: 1500 },
  { event: 'empty-data-is-still-an-event', data: '', id: '42', retry: 1500 },
];

describe('SseParser', () => {
  it('parses events, comments, multi-line data and id/retry fields', () => {
    expect(parseAll([STREAM])).toEqual(EXPECTED);
  });

  it('gives the same events whatever byte the stream is split at (two pieces)', () => {
    const all = bytes(STREAM);
    for (let cut = 0; cut <= all.length; cut++) {
      expect(parseAll([all.subarray(0, cut), all.subarray(cut)])).toEqual(EXPECTED);
    }
  });

  it('gives the same events when every byte arrives alone (multi-byte characters split too)', () => {
    const all = bytes(STREAM);
    const pieces = Array.from(all, (_, i) => all.subarray(i, i + 1));
    expect(parseAll(pieces)).toEqual(EXPECTED);
  });

  it('accepts CRLF and lone CR line endings, also when CR and LF arrive in different chunks', () => {
    const crlf = STREAM.replace(/\n/g, '\r\n');
    const cr = STREAM.replace(/\n/g, '\r');
    expect(parseAll([crlf])).toEqual(EXPECTED);
    expect(parseAll([cr])).toEqual(EXPECTED);
    const all = bytes(crlf);
    for (let cut = 0; cut <= all.length; cut++) {
      expect(parseAll([all.subarray(0, cut), all.subarray(cut)])).toEqual(EXPECTED);
    }
    expect(parseAll(Array.from(all, (_, i) => all.subarray(i, i + 1)))).toEqual(EXPECTED);
  });

  it('does not dispatch a blank-line-only block, and drops an event without its final blank line', () => {
    expect(parseAll(['\n\n\nevent: x\n\n', 'data: kept\n\n', 'data: lost at the end\n'])).toEqual([{ event: 'message', data: 'kept' }]);
  });

  it('strips a leading byte-order mark and treats a line without a colon as a field with no value', () => {
    expect(parseAll(['\uFEFFdata: a\nevent\n\n'])).toEqual([{ event: 'message', data: 'a' }]);
  });

  it('reads a whole Anthropic fixture the same at every chunk size', async () => {
    const text = fixture('anthropic/tool_use.sse');
    const whole = parseAll([text]);
    expect(whole.filter((e) => e.event === 'content_block_delta').length).toBeGreaterThan(20);
    const all = bytes(text);
    for (const size of [1, 2, 3, 7, 64, 1000]) {
      async function* chunks() {
        for (let i = 0; i < all.length; i += size) yield all.subarray(i, i + size);
      }
      const events: SseEvent[] = [];
      for await (const event of readSse(chunks())) events.push(event);
      expect(events).toEqual(whole);
    }
  });
});
