/** DeltaStream: streamed text redacted even when a secret is split across pieces; pieces add up to the reply. */
import { describe, expect, it } from 'vitest';
import { Redactor } from '../../src/keys.js';
import { DeltaStream } from '../../src/run/deltas.js';

const SECRET = 'sk-ant-split-across-pieces-0123456789';

function streamOf() {
  const redactor = new Redactor();
  redactor.add(SECRET, 'p:abcd1234');
  const out: string[] = [];
  return { stream: new DeltaStream(redactor, (t) => out.push(t)), out };
}

describe('DeltaStream', () => {
  it('never shows a secret split across pieces, not even a part of it', () => {
    const { stream, out } = streamOf();
    const text = `the key is ${SECRET} and again ${SECRET}!`;
    for (let i = 0; i < text.length; i += 7) stream.push(text.slice(i, i + 7));
    stream.end(text);
    expect(out.join('')).toBe('the key is [redacted p:abcd1234] and again [redacted p:abcd1234]!');
    // No piece holds any 12 characters of it.
    for (const piece of out) for (let i = 0; i + 12 <= SECRET.length; i++) expect(piece).not.toContain(SECRET.slice(i, i + 12));
    // Text far from any secret is not held back longer than a secret's length.
    expect(out.length).toBeGreaterThan(3);
  });

  it('sends what the stream did not deliver of the reply at the end; drops a held tail when the call fails', () => {
    const { stream, out } = streamOf();
    stream.push('Hello');
    stream.end('Hello, world');
    expect(out.join('')).toBe('Hello, world');

    const failed = streamOf();
    failed.stream.push(`x`.repeat(60) + SECRET.slice(0, 20));
    // No end(): the call failed. The start of the secret was never shown.
    expect(failed.out.join('')).toBe('x'.repeat(60 - (SECRET.length - 1) + 20));
    expect(failed.out.join('')).not.toContain(SECRET.slice(0, 12));
  });

  it('with no secrets, passes each piece on at once', () => {
    const out: string[] = [];
    const stream = new DeltaStream(new Redactor(), (t) => out.push(t));
    stream.push('a');
    stream.push('b');
    expect(out).toEqual(['a', 'b']);
  });
});
