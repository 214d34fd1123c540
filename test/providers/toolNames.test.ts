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

  it('maps nothing for a request whose tool names are all safe: one shared naming, its messages not copied one by one', () => {
    // Most calls (no tools, or plain names) paid two maps, a set and a copy of every message and
    // tool per call to map each name to itself.
    const naming = toolNaming(['lookup', 'get_weather']);
    expect(toolNaming([])).toBe(naming);
    const tools = [{ name: 'lookup', inputSchema: {} }];
    const messages = [
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'go' }] },
      { role: 'assistant' as const, content: [{ type: 'tool_use' as const, id: '1', name: 'lookup', input: {} }] },
    ];
    const wire = toWire(naming, tools, messages);
    expect(wire.tools).toEqual(tools);
    expect(wire.tools[0]).not.toBe(tools[0]);
    expect(wire.messages).not.toBe(messages);
    expect(wire.messages[1]).toBe(messages[1]);
    const reply = { content: [{ type: 'tool_use' as const, id: '2', name: 'lookup', input: {} }], stopReason: 'tool_use' as const, usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 } };
    expect(fromWire(naming, reply)).toBe(reply);
    // A name the model made up comes back as it came, as before.
    expect(naming.fromWire('made.up')).toBe('made.up');
  });
});
