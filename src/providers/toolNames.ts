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

/**
 * The naming of a request whose tools all have safe names (no tools at all, most calls): every
 * name maps to itself, so one shared naming serves them and nothing is renamed or copied.
 */
const AS_IS: ToolNaming = Object.freeze({ toWire: (n: string) => n, fromWire: (n: string) => n });

export function toolNaming(names: readonly string[]): ToolNaming {
  if (names.every((n) => SAFE.test(n))) return AS_IS;
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
  // Fresh arrays and tool objects still: an adapter (a custom one too) may change what it is given.
  if (naming === AS_IS) return { tools: tools.length === 0 ? [] : tools.map((t) => ({ ...t })), messages: messages.slice() };
  return {
    tools: tools.map((t) => ({ ...t, name: naming.toWire(t.name) })),
    messages: messages.map((m) => (m.role === 'assistant' ? { ...m, content: m.content.map((b) => renameBlock(b, naming.toWire)) } : m)),
  };
}

/** The reply's tool calls, under the plan's names again. */
export function fromWire(naming: ToolNaming, output: ModelCallOutput): ModelCallOutput {
  if (naming === AS_IS || !output.content.some((b) => b.type === 'tool_use')) return output;
  return { ...output, content: output.content.map((b) => renameBlock(b, naming.fromWire)) };
}
