/**
 * Compaction of an agent's conversation when its next request would not fit: keep the first user
 * brief and the last turns, replace the middle with a summary (written by a model the plan names)
 * or with a marked truncation. Pure functions over messages.
 *
 * The kept tail always starts with an assistant message, so a tool_use and its tool_result are
 * never separated and user/assistant turns still alternate; the summary rides in the first user
 * message, after the brief.
 */
import type { ContentBlock, Message } from './protocol.js';
import { textOf } from './tokens.js';

/** Where the kept tail starts: the earliest assistant message among the last `keepLast`, after the brief. */
export function tailStart(messages: readonly Message[], keepLast: number): number {
  const from = Math.max(1, messages.length - keepLast);
  for (let i = from; i < messages.length; i++) if (messages[i]!.role === 'assistant') return i;
  return messages.length;
}

/** True when there is a middle to take out: something between the brief and the kept tail. */
export function canCompact(messages: readonly Message[], keepLast: number): boolean {
  return tailStart(messages, keepLast) > 1;
}

function blockText(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'tool_use':
      return `[called ${block.name} ${JSON.stringify(block.input ?? null)}]`;
    case 'tool_result':
      return `[${block.isError ? 'tool error' : 'tool result'}: ${block.content}]`;
  }
}

/** The middle of the conversation as plain text, for the summarizing model. */
export function middleTranscript(messages: readonly Message[], keepLast: number): string {
  const end = tailStart(messages, keepLast);
  return messages
    .slice(1, end)
    .map((m) => `${m.role}: ${m.content.map(blockText).join('\n')}`)
    .join('\n\n');
}

/** A note left by compaction in the brief. */
const NOTE = /^\[(Summary of \d+ earlier messages\]|\d+ earlier messages were removed)/;

export const SUMMARY_SYSTEM =
  'You compress the middle of a conversation between a user and an AI agent that must go on with ' +
  'its task. Keep every fact, decision, tool result and open question the agent still needs; drop ' +
  'repetition. Answer with the summary only.';

/** The request that asks the compaction model for a summary of the middle. */
export function summaryMessages(messages: readonly Message[], keepLast: number): Message[] {
  return [
    {
      role: 'user',
      content: [{ type: 'text', text: `The task brief was:\n${textOf(messages[0]?.content ?? [])}\n\nSummarize this part of the conversation:\n\n${middleTranscript(messages, keepLast)}` }],
    },
  ];
}

/**
 * The conversation with its middle replaced: by `summary` when given, else by a marker saying how
 * many messages were removed.
 */
export function compact(messages: readonly Message[], keepLast: number, summary: string | null): { messages: Message[]; removed: number } {
  const end = tailStart(messages, keepLast);
  const removed = Math.max(0, end - 1);
  if (removed === 0) return { messages: [...messages], removed: 0 };
  const note = summary === null
    ? `[${removed} earlier messages were removed to fit the context window]`
    : `[Summary of ${removed} earlier messages]\n${summary}`;
  // An earlier compaction's note is replaced, not stacked: the summary model saw it in the brief.
  const kept = messages[0]!.content.filter((b) => !(b.type === 'text' && NOTE.test(b.text)));
  const brief: Message = { role: 'user', content: [...kept, { type: 'text', text: note }] };
  return { messages: [brief, ...messages.slice(end)], removed };
}
