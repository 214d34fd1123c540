import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readSse, SseLimitError, SseParser, type SseEvent } from '../../src/providers/sse.js';
import { ReplyGuard } from '../../src/providers/replyLimits.js';
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

  it('decodes bytes as a streaming TextDecoder does: BOMs, invalid bytes and characters split anywhere', () => {
    // Bytes that are not UTF-8 (a lone continuation, an overlong lead, a cut 4-byte character)
    // between whole 2-, 3- and 4-byte characters, and a BOM at the start and one in the text.
    const bad = [0x80, 0xc0, 0xaf, 0xe2, 0x82, 0x20, 0xf0, 0x9f, 0x98, 0x0a, 0xed, 0xa0, 0x80, 0xff];
    const all = Uint8Array.from([0xef, 0xbb, 0xbf, ...bytes('data: ä€😀\uFEFF'), ...bad, ...bytes('\n\nevent: é\ndata: 😀x\n\n')]);
    // The reference: one TextDecoder over the whole body (what the parser used to keep per stream).
    const expected = parseAll([new TextDecoder().decode(all)]);
    expect(expected).toHaveLength(2);
    for (let cut = 0; cut <= all.length; cut++) {
      for (let cut2 = cut; cut2 <= all.length; cut2 += 3) {
        expect(parseAll([all.subarray(0, cut), all.subarray(cut, cut2), all.subarray(cut2)])).toEqual(expected);
      }
    }
    expect(parseAll(Array.from(all, (_, i) => all.subarray(i, i + 1)))).toEqual(expected);
    // A BOM is stripped at the start of the stream only, also when it arrives split.
    expect(parseAll([Uint8Array.of(0xef, 0xbb), Uint8Array.of(0xbf, ...bytes('data: a\n\n'))])).toEqual([{ event: 'message', data: 'a' }]);
  });

  it('makes no TextDecoder for a stream whose chunks end between characters, and one for a stream cut inside one', () => {
    const real = globalThis.TextDecoder;
    let made = 0;
    globalThis.TextDecoder = class extends real {
      constructor(...args: ConstructorParameters<typeof TextDecoder>) {
        super(...args);
        made++;
      }
    };
    try {
      const all = bytes('event: é\ndata: 😀 ascii\n\ndata: €\n\n');
      const at = all.indexOf(0x20); // after "event:", between characters
      expect(parseAll([all.subarray(0, at), all.subarray(at)])).toEqual([{ event: 'é', data: '😀 ascii' }, { event: 'message', data: '€' }]);
      // Before: a decoder per parser, whatever the chunks (thousands of streams in flight paid each).
      expect(made).toBe(0);
      const inside = all.indexOf(0xf0) + 2; // two bytes into the emoji
      expect(parseAll([all.subarray(0, inside), all.subarray(inside)])).toEqual([{ event: 'é', data: '😀 ascii' }, { event: 'message', data: '€' }]);
      expect(made).toBe(1);
    } finally {
      globalThis.TextDecoder = real;
    }
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

  it('reads a long line that arrives in many small chunks, scanning each byte once', async () => {
    // 100 000 chunks of 10 bytes: rescanning the pending line on every chunk (the old parser)
    // costs about 5e10 steps here, far past the test's timeout; one scan costs 1e6. The source
    // lets the event loop turn now and then, so that the timeout can fire.
    async function* chunks() {
      yield 'data: ';
      for (let i = 0; i < 100_000; i++) {
        if (i % 1000 === 0) await new Promise((resolve) => setImmediate(resolve));
        yield 'y'.repeat(10);
      }
      yield '\n\n';
    }
    const events: SseEvent[] = [];
    for await (const event of readSse(chunks())) events.push(event);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.length).toBe(1_000_000);
  });

  it('throws SseLimitError past maxLine, for a line in one chunk, a line in pieces, and an event of many lines', () => {
    const limit = 100;
    const long = `data: ${'z'.repeat(limit)}\n`;
    expect(() => new SseParser({ maxLine: limit }).push(long)).toThrow(SseLimitError);
    const pieces = new SseParser({ maxLine: limit });
    expect(() => {
      for (let i = 0; i < 20; i++) pieces.push('z'.repeat(10));
    }).toThrow('an SSE line is longer than 100 characters (the limit of one line)');
    const lines = new SseParser({ maxLine: limit });
    expect(() => lines.push(`data: ${'a'.repeat(60)}\ndata: ${'b'.repeat(60)}\n`)).toThrow('an SSE event is longer than 100 characters');
    // At the limit is fine, and the count starts again with each line and each event.
    const ok = new SseParser({ maxLine: limit });
    const atLimit = `data:${'c'.repeat(limit - 5)}\n\n`;
    expect(ok.push(atLimit + atLimit)).toHaveLength(2);
  });
});

describe('ReplyGuard.events', () => {
  const facts = { provider: 'p', model: 'm', keyId: 'p:k' };

  it('gives the events one chunk completes together, in order, and what the end completes last', async () => {
    async function* body(): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode('event: a\ndata: 1\n\nevent: b\ndata: 2\n\nevent: c\ndata: 3\n\ndata: par');
      yield new TextEncoder().encode('tial\n\n');
    }
    const batches: string[][] = [];
    for await (const events of new ReplyGuard(16, facts, undefined).events(body())) batches.push(events.map((e) => `${e.event}:${e.data}`));
    // One resume of the reader's loop for the three events of the first chunk.
    expect(batches).toEqual([['a:1', 'b:2', 'c:3'], ['message:partial']]);
  });

  it('still holds the byte bound and the abort signal chunk by chunk', async () => {
    async function* endless(): AsyncGenerator<Uint8Array> {
      for (;;) yield new Uint8Array(64 * 1024).fill(0x20);
    }
    await expect(async () => {
      for await (const _ of new ReplyGuard(1, facts, undefined).events(endless()));
    }).rejects.toThrow(/larger than 1 MiB/);
    const controller = new AbortController();
    controller.abort(new Error('deadline'));
    await expect(async () => {
      for await (const _ of new ReplyGuard(1, facts, undefined).events(endless(), controller.signal));
    }).rejects.toThrow('deadline');
  });
});

describe('ReplyGuard.read of a Node stream (by its events)', () => {
  const facts = { provider: 'p', model: 'm', keyId: 'p:k' };
  const read = (body: PassThrough, onEvent: (e: SseEvent) => void = () => {}, signal?: AbortSignal) => new ReplyGuard(16, facts, undefined).read(body, signal, onEvent);

  it('gives the events as the chunks complete them, and those the end completes', async () => {
    const body = new PassThrough();
    const seen: string[] = [];
    const done = read(body, (e) => seen.push(`${e.event}:${e.data}`));
    body.write('event: a\ndata: 1\n\ndata: par');
    body.end('tial\n\n');
    await done;
    expect(seen).toEqual(['a:1', 'message:partial']);
    expect(body.listenerCount('data') + body.listenerCount('error')).toBe(0);
  });

  it('fails as a for-await fails: a body closed before its end, a body error; and a throw destroys the body', async () => {
    const cut = new PassThrough();
    const cutRead = read(cut);
    cut.write('data: 1\n');
    cut.destroy();
    await expect(cutRead).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE', message: 'Premature close' });
    const broken = new PassThrough();
    const brokenRead = read(broken);
    broken.destroy(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }));
    await expect(brokenRead).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    const thrown = new PassThrough();
    const thrownRead = read(thrown, () => {
      throw new Error('adapter says no');
    });
    thrown.write('data: 1\n\n');
    await expect(thrownRead).rejects.toThrow('adapter says no');
    expect(thrown.destroyed).toBe(true);
  });

  it("leaves no stream error unheard when the body it destroys emits one (undici's body turns a bare destroy into an AbortError)", async () => {
    class UndiciLike extends PassThrough {
      override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
        callback(error ?? Object.assign(new Error('Request aborted'), { code: 'UND_ERR_ABORTED' }));
      }
    }
    const body = new UndiciLike();
    const reading = read(body, () => {
      throw new Error('adapter says no');
    });
    body.write('data: 1\n\n');
    await expect(reading).rejects.toThrow('adapter says no');
    await new Promise((resolve) => (body.closed ? resolve(undefined) : body.once('close', resolve)));
    // The destroy emitted 'error' (an AbortError) after the read had failed: someone must still
    // listen, or it is an uncaught exception (vitest reports one on the old code).
    expect(body.errored).toMatchObject({ code: 'UND_ERR_ABORTED' });
    expect(body.listenerCount('error')).toBeGreaterThan(0);
  });

  it('holds the byte bound and the abort signal per chunk, and destroys the body then', async () => {
    const big = new PassThrough();
    const bigRead = new ReplyGuard(1, facts, undefined).read(big, undefined, () => {});
    for (let i = 0; i < 20; i++) big.write(new Uint8Array(64 * 1024).fill(0x20));
    await expect(bigRead).rejects.toThrow(/larger than 1 MiB/);
    expect(big.destroyed).toBe(true);
    const controller = new AbortController();
    const late = new PassThrough();
    const lateRead = read(late, () => {}, controller.signal);
    late.write('data: 1\n\n');
    controller.abort(new Error('deadline'));
    late.write('data: 2\n\n');
    await expect(lateRead).rejects.toThrow('deadline');
    expect(late.destroyed).toBe(true);
  });
});
