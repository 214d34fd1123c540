import { describe, expect, it } from 'vitest';
import { toToolResult } from '../../src/tools/index.js';

describe('toToolResult', () => {
  it('joins text parts, one per line', () => {
    expect(toToolResult({ content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] })).toEqual({ content: 'a\nb', isError: false });
  });

  it('summarizes images, audio, resource links and binary resources; keeps text resources', () => {
    const result = toToolResult({
      content: [
        { type: 'image', mimeType: 'image/png', data: Buffer.alloc(1234).toString('base64') },
        { type: 'audio', mimeType: 'audio/wav', data: Buffer.alloc(10).toString('base64') },
        { type: 'resource_link', uri: 'file:///a.txt', name: 'a.txt' },
        { type: 'resource', resource: { uri: 'file:///b.bin', mimeType: 'application/octet-stream', blob: Buffer.alloc(5).toString('base64') } },
        { type: 'resource', resource: { uri: 'file:///c.txt', text: 'hello' } },
      ],
    });
    expect(result.content).toBe(
      [
        '[image image/png, 1234 bytes]',
        '[audio audio/wav, 10 bytes]',
        '[resource link file:///a.txt (a.txt)]',
        '[resource file:///b.bin application/octet-stream, 5 bytes]',
        '[resource file:///c.txt]\nhello',
      ].join('\n'),
    );
  });

  it('writes structuredContent as JSON when no part carries text', () => {
    expect(toToolResult({ content: [], structuredContent: { t: 21 } })).toEqual({ content: '{"t":21}', isError: false });
    expect(toToolResult({ content: [{ type: 'text', text: 'warm' }], structuredContent: { t: 21 } }).content).toBe('warm');
  });

  it("passes the server's isError on", () => {
    expect(toToolResult({ content: [{ type: 'text', text: 'no' }], isError: true })).toEqual({ content: 'no', isError: true });
  });
});
