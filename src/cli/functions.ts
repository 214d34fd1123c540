/**
 * `--functions <file>`: the module whose exported functions a plan's `fn` steps name. It is
 * imported as an ES module (a path relative to the working directory); its named exports that
 * are functions are taken, and so are the functions of a default export that is a plain object
 * (`export default { fetchOrders, enrich }`, or a CommonJS `module.exports`). Anything else it
 * exports is left alone. Every way it can fail is one line naming the file.
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { SwarmFunction, SwarmFunctions } from '../fn/types.js';
import { FN_NAME_PATTERN } from '../plan/names.js';
import { isRecord } from '../plan/issues.js';
import { kindOf } from '../plan/kinds/index.js';
import { visible } from './terminal.js';

export type LoadedFunctions = { ok: true; functions: SwarmFunctions } | { ok: false; message: string };

/** The functions `file` exports, or the one line that says why it gives none (`--functions <file>: ...`). */
export async function loadFunctions(file: string): Promise<LoadedFunctions> {
  const path = resolve(file);
  const fail = (why: string): LoadedFunctions => ({ ok: false, message: `--functions ${file}: ${why}` });
  try {
    if (statSync(path).isDirectory()) return fail('is a folder, not a module');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return fail(code === 'ENOENT' ? 'no such file' : `cannot be read (${code ?? (error as Error).message})`);
  }
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    return fail(`the module threw while loading: ${thrown(error)}`);
  }
  const functions: Record<string, SwarmFunction> = {};
  for (const [name, value] of Object.entries(module)) {
    if (name !== 'default' && typeof value === 'function' && FN_NAME_PATTERN.test(name)) functions[name] = value as SwarmFunction;
  }
  const fallback = module.default;
  if (isRecord(fallback)) {
    for (const [name, value] of Object.entries(fallback)) {
      if (typeof value !== 'function' || !FN_NAME_PATTERN.test(name)) continue;
      // A CommonJS module's exports are both its named exports and its default: the same function twice is one.
      if (Object.hasOwn(functions, name) && functions[name] !== value) {
        return fail(`"${name}" is both a named export and a field of the default export, two different functions: keep one`);
      }
      functions[name] = value as SwarmFunction;
    }
  }
  if (Object.keys(functions).length === 0) {
    const unnamed = typeof fallback === 'function' ? '; its default export is a function, which no plan can name' : '';
    return fail(`the module exports no function: export each one by name (export async function fetchOrders(ctx) { ... })${unnamed}`);
  }
  return { ok: true, functions };
}

/** `boom`, `SyntaxError: Unexpected token '('`: the first line of what the module threw. */
function thrown(error: unknown): string {
  const e = error as { name?: unknown; message?: unknown } | null;
  const message = typeof e?.message === 'string' ? e.message : String(error);
  const name = typeof e?.name === 'string' && e.name !== 'Error' ? `${e.name}: ` : '';
  return `${name}${message.split('\n')[0]}`;
}

/**
 * The `--functions` flag's module: undefined when the flag is not given, false once its one line
 * is said on stderr.
 */
export async function functionsFlag(value: string | boolean | undefined, err: NodeJS.WritableStream): Promise<SwarmFunctions | undefined | false> {
  if (typeof value !== 'string') return undefined;
  const loaded = await loadFunctions(value);
  if (loaded.ok) return loaded.functions;
  err.write(`swarmstate: ${visible(loaded.message)}\n`);
  return false;
}

/** The plan's steps that run a function, as written (a plan file, before validation), in task order. */
export function functionSteps(plan: unknown): { taskId: string; fn: string }[] {
  if (!isRecord(plan) || !Array.isArray(plan.tasks)) return [];
  const steps: { taskId: string; fn: string }[] = [];
  for (const t of plan.tasks) {
    if (!isRecord(t) || typeof t.id !== 'string' || typeof t.fn !== 'string') continue;
    if (Object.hasOwn(kindOf(t.kind ?? 'task')?.fields ?? {}, 'fn')) steps.push({ taskId: t.id, fn: t.fn });
  }
  return steps;
}

/** What `run` says of a plan that names functions when no --functions module was given. */
export function functionsNeeded(steps: readonly { taskId: string; fn: string }[]): string {
  const [first] = steps;
  const more = steps.length - 1;
  const rest = more > 0 ? ` (and ${more} more task${more === 1 ? ' names a function' : 's name functions'})` : '';
  return `task "${first!.taskId}" runs function "${first!.fn}": give the module that exports it with --functions <file>${rest}`;
}

/** What `validate` notes of a plan that names functions when no --functions module was given. */
export function functionsUnchecked(steps: readonly { taskId: string; fn: string }[]): string {
  const names = [...new Set(steps.map((s) => s.fn))];
  return `the functions the plan names (${names.join(', ')}) were not checked: give the module that exports them with --functions <file>`;
}
