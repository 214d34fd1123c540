/**
 * Rough token estimates for budgeting before a call (leases, reservations, context checks).
 * About 4 characters a token for English text and JSON: a deliberate over-estimate for code-free
 * prose, so a limit is met before the server counts it. The server's count settles it afterwards.
 */
import type { ContentBlock, Message } from './protocol.js';

const CHARS_PER_TOKEN = 4;
/** Per-message framing the APIs add (role markers and the like). */
const MESSAGE_OVERHEAD = 4;

export function estimateTextTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

function blockChars(block: ContentBlock): number {
  switch (block.type) {
    case 'text':
      return block.text.length;
    case 'tool_use':
      return block.name.length + JSON.stringify(block.input ?? null).length;
    case 'tool_result':
      return block.content.length;
  }
}

/** Estimated input tokens of a request with this system prompt and these messages. */
export function estimateRequestTokens(system: string | undefined, messages: readonly Message[]): number {
  let chars = system?.length ?? 0;
  let overhead = 0;
  for (const message of messages) {
    overhead += MESSAGE_OVERHEAD;
    for (const block of message.content) chars += blockChars(block);
  }
  return Math.ceil(chars / CHARS_PER_TOKEN) + overhead;
}

/** The text of a reply: its text blocks joined. */
export function textOf(content: readonly ContentBlock[]): string {
  let out = '';
  for (const block of content) if (block.type === 'text') out += block.text;
  return out;
}
