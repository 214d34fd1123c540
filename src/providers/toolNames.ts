/**
 * Tool names on the wire. Plans address MCP tools as `<server>.<tool>`, but Anthropic and OpenAI
 * accept only `^[a-zA-Z0-9_-]{1,64}$`. Each request gets a reversible mapping: a safe name stays
 * as it is, another is rewritten (`fs.read_text_file` -> `fs__read_text_file`, made unique and
 * cut to 64), and the model's tool calls are mapped back before the agent sees them.
 */
import type { ContentBlock, Message, ModelCallOutput } from '../../machines/protocol.js';
import type { ToolSpec } from './types.js';

const SAFE = /^[a-zA-Z0-9_-]{1,64}$/;

export interface ToolNaming {
  toWire(name: string): string;
  fromWire(name: string): string;
}

export function toolNaming(names: readonly string[]): ToolNaming {
  const out = new Map<string, string>();
  const back = new Map<string, string>();
  const taken = new Set(names.filter((n) => SAFE.test(n)));
  for (const name of names) {
    let wire = name;
    if (!SAFE.test(name)) {
      const base = name.replace(/\./g, '__').replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64) || 'tool';
      wire = base;
      for (let i = 2; taken.has(wire); i++) wire = `${base.slice(0, 60)}_${i}`;
      taken.add(wire);
    }
    out.set(name, wire);
    back.set(wire, name);
  }
  return { toWire: (n) => out.get(n) ?? n, fromWire: (n) => back.get(n) ?? n };
}

const renameBlock = (block: ContentBlock, rename: (n: string) => string): ContentBlock =>
  block.type === 'tool_use' ? { ...block, name: rename(block.name) } : block;

/** The request's tools and past tool calls, under their wire names. */
export function toWire(naming: ToolNaming, tools: ToolSpec[], messages: Message[]): { tools: ToolSpec[]; messages: Message[] } {
  return {
    tools: tools.map((t) => ({ ...t, name: naming.toWire(t.name) })),
    messages: messages.map((m) => (m.role === 'assistant' ? { ...m, content: m.content.map((b) => renameBlock(b, naming.toWire)) } : m)),
  };
}

/** The reply's tool calls, under the plan's names again. */
export function fromWire(naming: ToolNaming, output: ModelCallOutput): ModelCallOutput {
  if (!output.content.some((b) => b.type === 'tool_use')) return output;
  return { ...output, content: output.content.map((b) => renameBlock(b, naming.fromWire)) };
}
