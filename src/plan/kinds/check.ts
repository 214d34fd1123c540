/**
 * The kinds' pass over a plan's tasks, after the checks every task shares (checkTasks.ts): for
 * each task, the fields of other kinds, the fields its kind refuses, placeholders only some kinds
 * fill, its kind's own checks, and the functions it names.
 */
import { isRecord, issue, nearest } from '../problems.js';
import { FN_NAME_PATTERN } from '../names.js';
import { checkItemPlaceholders, loadItemsFile } from '../mapreduce.js';
import type { PlanIssue } from '../validate.js';
import { foreignFields, implicitDepsOf, kindOfTask, noArrayOf, runsFunction } from './index.js';
import type { ItemsRead, KindContext, Path, RawTask } from './types.js';
import type { SwarmFunctions } from '../../fn/types.js';

export interface KindCheckOptions {
  /** Where a map's relative `items.file` is read from. Default: the working directory. */
  baseDir?: string;
  /** The names of the functions the run has: each `fn` of the plan must be one. Not given: not checked. */
  functions?: readonly string[];
  /**
   * The tasks are a planner's answer: a kind a planner may not emit is refused (subtasks.ts), and
   * its own checks are not made (a map's would open files a model named).
   */
  asSubTasks?: boolean;
}

/** Paths under `tasks[i]` (made by a function: a closure written inline is named again for each task under tsx). */
function pathIn(i: number): (...path: Path) => Path {
  return (...path) => ['tasks', i, ...path];
}

export function checkKinds(tasks: unknown[], out: PlanIssue[], opts: KindCheckOptions = {}): void {
  const byId = new Map<string, RawTask>();
  for (const t of tasks) if (isRecord(t) && typeof t.id === 'string') byId.set(t.id, t);
  const items = new Map<RawTask, ItemsRead | undefined>();
  const itemsOf = (map: RawTask): ItemsRead | undefined => {
    if (!items.has(map)) items.set(map, listedItems(map, opts.baseDir));
    return items.get(map);
  };
  tasks.forEach((t, i) => {
    if (!isRecord(t)) return;
    const name = String(t.kind ?? 'task');
    const kind = kindOfTask(t);
    const at = pathIn(i);
    for (const { field, message } of foreignFields(t, name)) out.push(issue(at(field), message));
    if (!kind) return;
    if (opts.asSubTasks && kind.asSubTask !== true) return;
    for (const { field, message } of kind.refused(t)) out.push(issue(at(field), message));
    // A function step's prompt is refused above: what it would place is beside the point.
    if (!runsFunction(t)) checkItemPlaceholders(t, t.kind, implicitDepsOf(t), byId, at, out);
    for (const [field, message] of Object.entries(kind.requires)) if (t[field] === undefined) out.push(issue(at(field), message));
    const ctx: KindContext = { byId, baseDir: opts.baseDir, itemsOf, noArrayOf, at, out };
    kind.check?.(t, ctx);
    if (opts.functions && Object.hasOwn(kind.fields, 'fn') && typeof t.fn === 'string' && FN_NAME_PATTERN.test(t.fn) && !opts.functions.includes(t.fn)) {
      out.push(issue(at('fn'), noFunction(t.fn, opts.functions)));
    }
  });
}

/** A map's items when the plan lists them: read from its file, or inline. */
function listedItems(map: RawTask, baseDir: string | undefined): ItemsRead | undefined {
  if (map.kind !== 'map' || !isRecord(map.items)) return undefined;
  if (typeof map.items.file === 'string') return loadItemsFile(map.items.file, baseDir);
  if (Array.isArray(map.items.values)) return { ok: true, items: map.items.values };
  return undefined;
}

const LISTED = 20;

/** `no function "x" (did you mean "y"?): the functions given are a, b` */
function noFunction(name: string, given: readonly string[]): string {
  if (given.length === 0) return `no function "${name}": no functions were given (createSwarm({ functions }) in code, --functions <file> on the command line)`;
  const guess = given.length <= 200 ? nearest(name, given) : undefined;
  const more = given.length > LISTED ? ` and ${given.length - LISTED} more` : '';
  return `no function "${name}"${guess ? ` (did you mean "${guess}"?)` : ''}: the functions given are ${given.slice(0, LISTED).join(', ')}${more}`;
}

/** The names of the functions given as names, or as the functions by name (an entry that is not a function names none). */
export function functionNames(functions: readonly string[] | SwarmFunctions): string[] {
  if (Array.isArray(functions)) return [...(functions as readonly string[])];
  const record = functions as Readonly<Record<string, unknown>>;
  return Object.keys(record).filter((name) => typeof record[name] === 'function');
}
