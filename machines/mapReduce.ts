/**
 * Map and reduce tasks: the pure parts the supervisor runs (src/ builds and journals the specs).
 *
 * - A map task calls no model. Ready, it expands into one sub-task per item; once they have all
 *   completed it completes too, its output the JSON array of their outputs in item order (with
 *   `dedupe`, later duplicates dropped).
 * - A reduce task merges inputs (task outputs, or the elements of a JSON array output). When its
 *   inputs are all done, at most `fanIn` and they fit the model's input budget, it is one model
 *   call. Otherwise it expands into a tree of groups (`<id>/L<level>/<n>`), each itself a reduce
 *   over at most `fanIn` inputs, and completes with the root's output. A group that turns out
 *   too big when its inputs are done splits the same way: nothing is ever cut to fit.
 */
import { estimateRequestTokens } from './tokens.js';

export interface MapSpec {
  /** The task whose output (a JSON array) holds the items; unset: the items came with the plan. */
  from?: string;
  /** `"text"` (normalized text) or a field of a JSON output: later duplicates are dropped. */
  dedupe?: string;
}

export interface ReduceSpec {
  /** Inputs at most per group. */
  fanIn: number;
  /**
   * A task id: a map's items, or the elements of that task's JSON array output. A list: one
   * input per task, or per element (`<id>#<n>`) for a group.
   */
  over: string | string[];
  /** A group of a reduce's tree: `over` lists its inputs exactly. */
  group?: boolean;
}

/** An input of a group: a task's output (`id`), or one element of its JSON array output (`id#n`). */
export const refTask = (ref: string) => {
  const hash = ref.indexOf('#');
  return hash < 0 ? ref : ref.slice(0, hash);
};

/** The text of one input: a task's output, or one element of its JSON array output. */
export function inputText(ref: string, outputOf: (id: string) => string | undefined): string {
  const hash = ref.indexOf('#');
  if (hash < 0) return outputOf(ref) ?? '';
  const list = parsedList(outputOf(ref.slice(0, hash)) ?? '');
  const value = Array.isArray(list) ? list[Number(ref.slice(hash + 1))] : undefined;
  return typeof value === 'string' ? value : JSON.stringify(value ?? null);
}

/** The groups of a reduce read the same array one element at a time: it is parsed once. */
let lastList: { text: string; value: unknown } | undefined;
function parsedList(text: string): unknown {
  if (lastList?.text !== text) lastList = { text, value: answerJson(text) };
  return lastList.value;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The body of a ```json (or bare ```) fence around the whole answer; the answer itself otherwise. */
export function unfenced(answer: string): string {
  const match = /^\s*```(?:json|JSON)?[ \t]*\r?\n([\s\S]*?)\r?\n?```\s*$/.exec(answer);
  return (match ? match[1]! : answer).trim();
}

/**
 * An answer read as JSON, as every reader of one does (a structured output's check, a map's
 * `from` items, a reduce over a task's array): the JSON value alone, or in a ```json fence.
 * Undefined when it is not JSON.
 */
export function answerJson(answer: string): unknown {
  return parseJson(unfenced(answer));
}

/** An output as an element of a map's array: its JSON value when it is JSON, else the text. */
export function outputValue(text: string): unknown {
  const t = text.trim();
  if (t === '' || !'[{"-0123456789tfn'.includes(t[0]!)) return text;
  const value = parseJson(t);
  return value === undefined ? text : value;
}

/** The inputs as the `{{inputs}}` of a group's prompt, numbered. */
export function renderInputs(texts: readonly string[]): string {
  return texts.map((t, i) => `<input n="${i + 1}">\n${t}\n</input>`).join('\n');
}

/** Estimated input tokens of a one-message request (as the agent estimates it before each call). */
export const promptTokens = (system: string | undefined, prompt: string, toolTokens = 0) =>
  estimateRequestTokens(system, [{ role: 'user', content: [{ type: 'text', text: prompt }] }]) + toolTokens;

/**
 * What a map keeps of its items' outputs: with `dedupe`, the first of each key in item order
 * (`"text"`: trimmed, whitespace collapsed, lower case; a field: its JSON value; an output
 * without the field is always kept).
 */
export function dedupeOutputs(ids: readonly string[], outputOf: (id: string) => string, dedupe: string | undefined): { kept: string[]; dropped: number } {
  if (dedupe === undefined) return { kept: [...ids], dropped: 0 };
  const seen = new Set<string>();
  const kept: string[] = [];
  for (const id of ids) {
    const key = dedupeKey(outputOf(id), dedupe);
    if (key !== undefined && seen.has(key)) continue;
    if (key !== undefined) seen.add(key);
    kept.push(id);
  }
  return { kept, dropped: ids.length - kept.length };
}

function dedupeKey(output: string, dedupe: string): string | undefined {
  if (dedupe === 'text') return output.trim().replace(/\s+/g, ' ').toLowerCase();
  let value = parseJson(output.trim());
  for (const part of dedupe.split('.')) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return JSON.stringify(value);
}

export interface Group {
  id: string;
  /** Its inputs: refs to what it merges (the reduce's inputs, or groups one level down). */
  inputs: string[];
}

/**
 * A reduce's tree over `refs`: level 1 cuts them in order into groups of at most `fanIn`, and,
 * where their sizes are known, of at most `room` tokens; each level above groups the one below
 * by `fanIn` until one group, the root, is left (the last in the list).
 *
 * @returns the groups, or why the inputs cannot be merged without cutting them.
 */
export function planGroups(
  base: string,
  refs: readonly string[],
  fanIn: number,
  size?: { of: (ref: string) => number; room: number; outputsOfGroups: boolean },
): { ok: true; groups: Group[] } | { ok: false; message: string } {
  const groups: Group[] = [];
  let level: string[][] = [];
  let chunk: string[] = [];
  let used = 0;
  for (const ref of refs) {
    const tokens = size ? size.of(ref) : 0;
    if (size && tokens > size.room) {
      return { ok: false, message: `input "${ref}" alone is about ${tokens} tokens, more than the ${size.room} the model's input budget leaves for inputs` };
    }
    if (chunk.length >= fanIn || (size && chunk.length > 0 && used + tokens > size.room)) {
      level.push(chunk);
      chunk = [];
      used = 0;
    }
    chunk.push(ref);
    used += tokens;
  }
  if (chunk.length > 0) level.push(chunk);
  // Merging each output of a merge alone again would shrink nothing: the tree would never end.
  if (size?.outputsOfGroups && level.length > 1 && level.every((c) => c.length === 1)) {
    return { ok: false, message: `no two merged outputs fit together in the ${size.room} tokens the model's input budget leaves for inputs: lower maxTokens, or use a model with a larger context` };
  }
  // Nothing to merge (a map that gave no items) needs no tree; without this the loop never ends.
  if (level.length === 0) return { ok: true, groups };
  let n = 1;
  for (;;) {
    const ids = level.map((inputs, i) => {
      const id = `${base}/L${n}/${i}`;
      groups.push({ id, inputs });
      return id;
    });
    if (ids.length === 1) return { ok: true, groups };
    level = [];
    for (let i = 0; i < ids.length; i += fanIn) level.push(ids.slice(i, i + fanIn));
    n += 1;
  }
}
