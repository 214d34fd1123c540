/**
 * Map and reduce tasks in the plan: their items (a file, a task's output, inline), the sub-tasks
 * they expand into, and the checks `validate` makes of them (which their kind modules,
 * kinds/map.ts and kinds/reduce.ts, run). The runtime side is in machines/mapReduce.ts (what the
 * supervisor does) and src/planner.ts (the expansion actor).
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { extname, isAbsolute, resolve } from 'node:path';
import { answerJson, type Group } from '../../machines/mapReduce.js';
import { fillPlaceholders, renderPrompt, type OwnPlaceholders } from '../../machines/prompt.js';
import { isRecord, issue } from './problems.js';
import type { KindContext, Path, RawTask } from './kinds/types.js';
import { TASK_ID_MAX_LENGTH, TASK_ID_PATTERN } from './names.js';
import type { TaskSpec } from './schema.js';
import type { PlanIssue } from './validate.js';
import { parseJsonText, type JsonTextError } from '../util/jsonText.js';

export const DEFAULT_MAX_ITEMS = 1000;
export const DEFAULT_FAN_IN = 8;

type Items = { ok: true; items: unknown[] } | { ok: false; message: string };

/** The most bytes an items file may hold: it is read whole, at validation and when the run starts. */
export const MAX_ITEMS_FILE_BYTES = 64 * 1024 * 1024;

/** What an items file may be, said after each refusal of one. */
const ITEMS_FORMS = ' (a map needs a JSON array, or JSONL: one item a line)';

/**
 * A map's items file: a JSON array, or JSONL (one JSON value a line; blank lines skipped). It must
 * be a regular file of at most MAX_ITEMS_FILE_BYTES: it is opened without waiting (a FIFO would
 * wait for a writer), checked on its descriptor, and read only up to that size.
 */
export function loadItemsFile(file: string, baseDir: string = process.cwd()): Items {
  const path = isAbsolute(file) ? file : resolve(baseDir, file);
  const read = readBounded(path);
  if (!read.ok) return read;
  let text = read.text;
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const source = `items file ${path}`;
  const lines = ['.jsonl', '.ndjson'].includes(extname(path).toLowerCase());
  let asDocument: JsonTextError | undefined;
  if (!lines) {
    try {
      const value = parseJsonText(text, source);
      return Array.isArray(value) ? { ok: true, items: value } : { ok: false, message: `${source} holds JSON that is not an array${ITEMS_FORMS}` };
    } catch (error) {
      // Not one JSON document: read it as JSONL.
      asDocument = error as JsonTextError;
    }
  }
  const items: unknown[] = [];
  const all = text.split('\n');
  for (let i = 0; i < all.length; i++) {
    const line = all[i]!.trim();
    if (line === '') continue;
    try {
      items.push(parseJsonText(line, source));
    } catch (error) {
      // A file that opens an array was meant as one document: its own error says where it breaks.
      if (asDocument && text.trimStart().startsWith('[')) return { ok: false, message: `${asDocument.message}${ITEMS_FORMS}` };
      const { column, reason } = error as JsonTextError;
      return { ok: false, message: `${source} is not valid JSONL: line ${i + 1}, column ${column}: ${reason}${ITEMS_FORMS}` };
    }
  }
  return { ok: true, items };
}

function readBounded(path: string): { ok: true; text: string } | { ok: false; message: string } {
  let fd: number;
  try {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (none on Windows).
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    return { ok: false, message: cannotRead(path, error) };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { ok: false, message: `items file ${path} is not a regular file (a device, a FIFO or a folder): give a JSON or JSONL file` };
    if (stat.size > MAX_ITEMS_FILE_BYTES) return { ok: false, message: tooBig(path, `${stat.size} bytes`) };
    // Read to the end, but never past the cap (the file may grow after fstat).
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(1024 * 1024, MAX_ITEMS_FILE_BYTES + 1 - total));
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
      if (total > MAX_ITEMS_FILE_BYTES) return { ok: false, message: tooBig(path, `${total} bytes or more`) };
    }
    return { ok: true, text: Buffer.concat(chunks, total).toString('utf8') };
  } catch (error) {
    return { ok: false, message: cannotRead(path, error) };
  } finally {
    closeSync(fd);
  }
}

function cannotRead(path: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return `cannot read items file ${path}: ${code === 'ENOENT' ? 'no such file' : ((error as Error).message ?? code)}`;
}

const tooBig = (path: string, size: string) => `items file ${path} is ${size}, more than the 64 MiB (${MAX_ITEMS_FILE_BYTES} bytes) an items file may hold: split the items`;

/** The items a `from` task's output holds: its text must be a JSON array (alone, or in a ```json fence). */
export function itemsOfOutput(from: string, text: string): Items {
  const value = answerJson(text);
  if (value === undefined) return { ok: false, message: `the output of "${from}" is not JSON, so it holds no list of items (give that task an output schema of type "array")` };
  return Array.isArray(value) ? { ok: true, items: value } : { ok: false, message: `the output of "${from}" is JSON but not an array, so it holds no list of items` };
}

/** Checks a list of items against `maxItems` and `key`: the problems, each with its item's index. */
export function itemProblems(items: readonly unknown[], spec: Pick<TaskSpec, 'id' | 'maxItems' | 'key'>): string[] {
  const max = spec.maxItems ?? DEFAULT_MAX_ITEMS;
  if (items.length > max) return [`${items.length} items, more than maxItems (${max}): raise maxItems or split the items`];
  if (spec.key === undefined) return [];
  const problems: string[] = [];
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const value = isRecord(item) && Object.hasOwn(item, spec.key!) ? item[spec.key!] : undefined;
    const name = typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
    if (name === undefined) problems.push(`item ${i} has no string or number field "${spec.key}" (key)`);
    else if (!TASK_ID_PATTERN.test(name) || `${spec.id}/${name}`.length > TASK_ID_MAX_LENGTH) problems.push(`item ${i}: key "${name}" cannot name a task (letters, digits and _ . : / - only)`);
    else if (seen.has(name)) problems.push(`item ${i}: key "${name}" is already item ${seen.get(name)}'s (keys must be unique)`);
    else seen.set(name, i);
  });
  return problems.slice(0, 10);
}

/** A placeholder's name that reads an item: `item`, `item.a.b`. */
const ITEM_NAME = /^([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_-]+)*)$/;

/**
 * `{{<as>}}` and `{{<as>.a.b}}` of one item (a string as it is, anything else as JSON), filled in
 * the same pass as the deps (machines/prompt.ts); `onMissing` hears of a field the item lacks.
 */
function itemPlaceholders(as: string, item: unknown, onMissing: (message: string) => void): OwnPlaceholders {
  return (name) => {
    const match = ITEM_NAME.exec(name);
    if (!match || match[1] !== as) return undefined;
    let value = item;
    for (const part of match[2]!.split('.').slice(1)) {
      if (!isRecord(value) || !Object.hasOwn(value, part)) {
        onMissing(`{{${name}}}: the item has no field "${part}"`);
        return `{{${name}}}`;
      }
      value = value[part];
    }
    return typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');
  };
}

/** `{{item}}` and `{{item.a.b}}` filled with the item (strings as they are, anything else as JSON). */
export function fillItem(text: string, as: string, item: unknown): { ok: true; text: string } | { ok: false; message: string } {
  let missing: string | undefined;
  const filled = fillPlaceholders(text, [], () => '', itemPlaceholders(as, item, (m) => (missing ??= m)));
  return missing === undefined ? { ok: true, text: filled } : { ok: false, message: missing };
}

/** Fields of a map or reduce spec that its sub-tasks do not inherit. */
const OWN_FIELDS = ['kind', 'items', 'as', 'maxItems', 'key', 'dedupe', 'over', 'fanIn', 'budgetUsd', 'reviews', 'maxRounds'] as const;

function inherited(spec: TaskSpec): Omit<TaskSpec, (typeof OWN_FIELDS)[number]> {
  const copy = { ...spec } as Record<string, unknown>;
  for (const f of OWN_FIELDS) delete copy[f];
  return copy as Omit<TaskSpec, (typeof OWN_FIELDS)[number]>;
}

/** A map's prompt and system as written, and its deps' outputs (in the order of `deps`). */
export interface MapTemplate {
  prompt: string;
  system?: string;
  deps: readonly string[];
  outputs: readonly string[];
}

/**
 * A map's sub-tasks: one plain task per item, its prompt and system filled in one pass, the item
 * and the deps' outputs together (nothing placed is read again: a dep's answer may say
 * `{{item.x}}`, an item `{{dep}}`). They depend on nothing: the map's deps had completed when it
 * expanded.
 */
export function mapSubtasks(spec: TaskSpec, items: readonly unknown[], template: MapTemplate): { ok: true; tasks: TaskSpec[] } | { ok: false; issues: string[] } {
  const problems = itemProblems(items, spec);
  if (problems.length > 0) return { ok: false, issues: problems };
  const as = spec.as ?? 'item';
  const base = inherited(spec);
  const at = new Map(template.deps.map((d, i) => [d, i]));
  const outputOf = (id: string) => template.outputs[at.get(id) ?? -1] ?? '';
  const tasks: TaskSpec[] = [];
  const fn = (spec as { fn?: string }).fn;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (fn !== undefined) {
      // A function's item step: the item as a value, the map's deps (completed) as its deps.
      const name = spec.key === undefined ? String(i) : String((item as Record<string, unknown>)[spec.key]);
      tasks.push({ ...base, id: `${spec.id}/${name}`, kind: 'fn', deps: [...template.deps], item } as unknown as TaskSpec);
      continue;
    }
    let missing: string | undefined;
    const own = itemPlaceholders(as, item, (m) => (missing ??= m));
    const prompt = renderPrompt(template.prompt, template.deps, outputOf, own);
    const system = template.system === undefined ? undefined : fillPlaceholders(template.system, template.deps, outputOf, own);
    if (missing !== undefined) return { ok: false, issues: [`item ${i}: ${missing}`] };
    const name = spec.key === undefined ? String(i) : String((item as Record<string, unknown>)[spec.key]);
    const task: TaskSpec = { ...base, id: `${spec.id}/${name}`, kind: 'task', deps: [], prompt };
    if (system !== undefined) task.system = system;
    else delete task.system;
    tasks.push(task);
  }
  return { ok: true, tasks };
}

/** A reduce's groups as tasks: each a reduce over exactly its inputs, waiting for them and for the reduce's other deps. */
export function groupSubtasks(spec: TaskSpec, groups: readonly Group[]): TaskSpec[] {
  const inputs = new Set(typeof spec.over === 'string' ? [spec.over] : (spec.over ?? []));
  const others = spec.deps.filter((d) => !inputs.has(d));
  const base = inherited(spec);
  const fanIn = spec.fanIn ?? DEFAULT_FAN_IN;
  return groups.map((g) => {
    const tasks = [...new Set(g.inputs.map((r) => (r.includes('#') ? r.slice(0, r.indexOf('#')) : r)))];
    return { ...base, id: g.id, kind: 'reduce', over: g.inputs, fanIn, deps: [...new Set([...tasks, ...others])] };
  });
}

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.:/-]+)\s*\}\}/g;

type At = (...path: Path) => Path;

/** A map: items that exist and are a list within `maxItems`, `from` naming a task that can give one, an item name that hides no dep. */
export function checkMap(t: RawTask, ctx: KindContext): void {
  const { at, out } = ctx;
  const items = t.items;
  // Missing: said with the kind's other required fields (kinds/map.ts).
  if (!isRecord(items)) return;
  const spec = { id: typeof t.id === 'string' ? t.id : '', ...(typeof t.maxItems === 'number' ? { maxItems: t.maxItems } : {}), ...(typeof t.key === 'string' ? { key: t.key } : {}) };
  const listed = ctx.itemsOf(t);
  if (listed && !listed.ok) out.push(issue(at('items', 'file'), listed.message));
  if (listed?.ok) for (const problem of itemProblems(listed.items, spec)) out.push(issue(at('items'), problem));
  if (typeof items.from === 'string') {
    const source = ctx.byId.get(items.from);
    const noArray = source && ctx.noArrayOf(source);
    if (items.from === t.id) out.push(issue(at('items', 'from'), 'a map cannot read its items from its own output'));
    else if (!source) out.push(issue(at('items', 'from'), `unknown task "${items.from}"`));
    else if (noArray !== undefined) out.push(issue(at('items', 'from'), `task "${items.from}" cannot give a list of items: ${noArray}`));
  }
  checkItemName(t, at, out);
}

/**
 * The item's name (`as`) must not be a dep's id, nor the start of one (`{{row.notes}}` with a dep
 * `row.notes`): the placeholder would read the dep, and the items would be silently hidden.
 */
function checkItemName(t: RawTask, at: At, out: PlanIssue[]): void {
  const named = typeof t.as === 'string';
  const as = named ? (t.as as string) : 'item';
  const deps: { id: string; path: (string | number)[] }[] = [];
  if (Array.isArray(t.deps)) t.deps.forEach((d: unknown, j: number) => typeof d === 'string' && deps.push({ id: d, path: at('deps', j) }));
  if (isRecord(t.items) && typeof t.items.from === 'string') deps.push({ id: t.items.from, path: at('items', 'from') });
  for (const dep of deps) {
    const exact = dep.id === as;
    if (!exact && !dep.id.startsWith(`${as}.`)) continue;
    if (named && exact) out.push(issue(at('as'), `"${as}" is also the id of a dep of this map: {{${as}}} would place the dep's output, not the item; give the item another name`));
    else if (named) out.push(issue(at('as'), `"${as}" is the start of dep "${dep.id}": {{${dep.id}}} would read the dep, not the item; give the item another name`));
    else if (exact) out.push(issue(dep.path, `"${as}" is also the name of this map's item ("as" unset): {{${as}}} would place this dep's output, not the item; set "as" to another name`));
    else out.push(issue(dep.path, `dep "${dep.id}" starts with "${as}", the name of this map's item ("as" unset): {{${dep.id}}} would read the dep, not the item; set "as" to another name`));
    return;
  }
}

/** A reduce: `over` names tasks that can give what it merges, and not nothing. */
export function checkReduce(t: RawTask, ctx: KindContext): void {
  const { at, out } = ctx;
  const over = t.over;
  // Missing: said with the kind's other required fields (kinds/reduce.ts).
  if (over === undefined) return;
  if (Array.isArray(over) && over.length === 0) {
    out.push(issue(at('over'), 'a reduce over nothing: name a map, a task with a JSON array output, or at least one task'));
    return;
  }
  const ids = typeof over === 'string' ? [over] : Array.isArray(over) ? over : [];
  ids.forEach((id, j) => {
    if (typeof id !== 'string' || id === '') return;
    const path = typeof over === 'string' ? at('over') : at('over', j);
    const source = ctx.byId.get(id);
    const noArray = typeof over === 'string' && source ? ctx.noArrayOf(source) : undefined;
    if (id === t.id) out.push(issue(path, 'a reduce cannot merge its own output'));
    else if (!source) out.push(issue(path, `unknown task "${id}"`));
    else if (noArray !== undefined) out.push(issue(path, `task "${id}" cannot give a list of inputs: ${noArray} (to merge several tasks' outputs, list them: "over": ["a", "b"])`));
    else if (typeof over === 'string' && isEmpty(ctx.itemsOf(source))) out.push(issue(path, `map "${id}" has no items: a reduce over it would have nothing to merge`));
  });
}

const isEmpty = (listed: Items | undefined) => listed?.ok === true && listed.items.length === 0;

/**
 * `{{item...}}` outside a map (or naming another name than the map's `as`), `{{inputs}}` outside
 * a reduce, and what a map reads as items or a reduce as inputs (`reads`: its implicit deps)
 * placed whole in its prompt.
 */
export function checkItemPlaceholders(t: RawTask, kind: unknown, reads: readonly string[], byId: ReadonlyMap<string, unknown>, at: At, out: PlanIssue[]): void {
  const as = typeof t.as === 'string' ? t.as : 'item';
  let read: Set<string> | undefined;
  for (const field of ['prompt', 'system'] as const) {
    const text = t[field];
    if (typeof text !== 'string' || !text.includes('{{')) continue;
    // What a map reads as items, or a reduce as inputs, is not placed whole in the prompt.
    read ??= new Set(kind === 'map' || kind === 'reduce' ? reads : []);
    const reported = new Set<string>();
    for (const match of text.matchAll(PLACEHOLDER)) {
      const root = match[1]!.split('.')[0]!;
      if (read.has(match[1]!) && !reported.has(root)) {
        reported.add(root);
        out.push(issue(at(field), kind === 'map' ? `{{${match[1]}}} is where the items come from: write {{${as}}} for each item instead` : `{{${match[1]}}} is what this reduce merges: write {{inputs}} instead`));
      }
      if (reported.has(root) || byId.has(root)) continue;
      if (root === 'item' && (kind !== 'map' || as !== 'item')) {
        reported.add(root);
        out.push(issue(at(field), kind === 'map' ? `{{${match[1]}}}: this map names its item "${as}" (as), so write {{${as}...}}` : `{{${match[1]}}} is filled only in a task with "kind": "map" (one sub-task per item)`));
      } else if (root === 'inputs' && kind !== 'reduce') {
        reported.add(root);
        out.push(issue(at(field), '{{inputs}} is filled only in a task with "kind": "reduce"'));
      }
    }
  }
}

