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

/** Per-message framing allowed for in the upper bound: twice what the APIs are known to add. */
const MESSAGE_OVERHEAD_BOUND = 8;
/** Framing of the request as a whole (start and end markers), allowed for in the upper bound. */
const REQUEST_OVERHEAD_BOUND = 16;

/** UTF-8 length of `text`, without encoding it. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff) {
      bytes += 2; // a surrogate pair: 2 code units, 4 bytes
      i++;
    } else bytes += 2;
  }
  return bytes;
}

function blockText(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'tool_use':
      return block.name + JSON.stringify(block.input ?? null);
    case 'tool_result':
      return block.content;
  }
}

/**
 * A provable upper bound on the input tokens of a request: a byte-level BPE tokenizer (every
 * current model's) never makes more tokens than the text has UTF-8 bytes, plus the framing.
 * Budgets reserve this, not the estimate: the estimate can be low (code, non-Latin text), and a
 * budget must never be overshot because of it.
 */
export function maxRequestTokens(system: string | undefined, messages: readonly Message[]): number {
  let bytes = system === undefined ? 0 : utf8Length(system);
  for (const message of messages) {
    bytes += MESSAGE_OVERHEAD_BOUND;
    for (const block of message.content) bytes += utf8Length(blockText(block));
  }
  return bytes + REQUEST_OVERHEAD_BOUND;
}

/** The text of a reply: its text blocks joined. */
export function textOf(content: readonly ContentBlock[]): string {
  let out = '';
  for (const block of content) if (block.type === 'text') out += block.text;
  return out;
}
