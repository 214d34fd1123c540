import { describe, expect, it } from 'vitest';
import { fromWire, toolNaming, toWire } from '../../src/providers/toolNames.js';

describe('tool names on the wire', () => {
  it('keeps safe names, rewrites qualified ones reversibly and uniquely', () => {
    const naming = toolNaming(['lookup', 'fs.read_text_file', 'fs__read_text_file', 'a.b.c', 'x'.repeat(80) + '.y']);
    expect(naming.toWire('lookup')).toBe('lookup');
    expect(naming.toWire('fs__read_text_file')).toBe('fs__read_text_file');
    const wire = naming.toWire('fs.read_text_file');
    expect(wire).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(wire).not.toBe('fs__read_text_file');
    for (const n of ['fs.read_text_file', 'a.b.c', 'x'.repeat(80) + '.y']) {
      expect(naming.toWire(n)).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
      expect(naming.fromWire(naming.toWire(n))).toBe(n);
    }
  });

  it('renames past tool calls in the request and the reply tool calls back', () => {
    const naming = toolNaming(['fs.read']);
    const { tools, messages } = toWire(naming, [{ name: 'fs.read', inputSchema: {} }], [
      { role: 'user', content: [{ type: 'text', text: 'go' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: '1', name: 'fs.read', input: {} }] },
    ]);
    expect(tools[0]!.name).toBe('fs__read');
    expect(messages[1]!.content[0]).toMatchObject({ name: 'fs__read' });
    const back = fromWire(naming, { content: [{ type: 'tool_use', id: '2', name: 'fs__read', input: {} }], stopReason: 'tool_use', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 } });
    expect(back.content[0]).toMatchObject({ name: 'fs.read' });
  });
});
