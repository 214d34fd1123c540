/**
 * The built-in demo (`swarmstate demo`): the catalog swarm in examples/catalog-swarm/, 120
 * products through map stages (extract -> classify -> SEO -> translate x3 and review) and a
 * reduce report, on the embedded simulated provider (3 keys with limits, faults, latency) and a
 * catalog MCP server that ships with the package. No key, no network.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { planGroups } from '../../machines/mapReduce.js';
import { DEFAULT_FAN_IN, loadItemsFile } from '../plan/mapreduce.js';
import { parseJsonText } from '../util/jsonText.js';

/** The package's root folder (the one with package.json), from src/cli (tsx) or dist/src/cli (the build). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('swarmstate: cannot find the package root (no package.json above ' + fileURLToPath(import.meta.url) + ')');
    dir = up;
  }
  return dir;
}

/**
 * Absolute path of the demo plan.
 *
 * @example
 * demoPlanPath() // '/usr/lib/node_modules/swarmstate/examples/catalog-swarm/plan.json'
 */
export function demoPlanPath(): string {
  return join(packageRoot(), 'examples', 'catalog-swarm', 'plan.json');
}

/** What a plan file holds, as far as its stdio servers' working folder goes. */
interface PlanJson {
  tools?: { servers?: Record<string, { command?: string; cwd?: string }> };
  [field: string]: unknown;
}

/**
 * A plan read from a file: its stdio MCP servers run in the plan's own folder unless they say
 * otherwise, so a plan's script paths are relative to the plan, whatever the working directory.
 *
 * @example
 * const plan = await loadPlanFile('examples/catalog-swarm/plan.json');
 */
export async function loadPlanFile(path: string): Promise<Record<string, unknown>> {
  const plan = planJson(await readFile(path, 'utf8'), path) as PlanJson;
  return withPlanFolder(plan, dirname(resolve(path)));
}

/**
 * A plan file's text as JSON (a byte order mark dropped).
 *
 * @throws JsonTextError naming `source`, the line and the column when the text is not JSON.
 */
export function planJson(text: string, source = 'the plan'): unknown {
  return parseJsonText(text, source);
}

/** Gives every stdio server without a `cwd`, a relative hook module and a map's items file, the plan's folder. */
export function withPlanFolder<T>(plan: T, folder: string): T {
  const hooks = (plan as { hooks?: { module?: unknown } } | null)?.hooks;
  if (hooks && typeof hooks.module === 'string' && !isAbsolute(hooks.module)) hooks.module = resolve(folder, hooks.module);
  // A map's items file is the plan's neighbour: stored absolute, a resume finds it from anywhere.
  for (const task of (plan as { tasks?: unknown } | null)?.tasks instanceof Array ? (plan as { tasks: unknown[] }).tasks : []) {
    const items = (task as { items?: { file?: unknown } } | null)?.items;
    if (items && typeof items.file === 'string' && !isAbsolute(items.file)) items.file = resolve(folder, items.file);
  }
  const servers = (plan as PlanJson | null)?.tools?.servers;
  if (servers && typeof servers === 'object') {
    for (const server of Object.values(servers)) {
      if (server && typeof server === 'object' && server.command !== undefined && server.cwd === undefined) server.cwd = folder;
    }
  }
  return plan;
}

/** The demo plan, ready to run from any working directory. */
export function loadDemoPlan(path: string = demoPlanPath()): Promise<Record<string, unknown>> {
  return loadPlanFile(path);
}

/**
 * Two lines that say what the demo is about to do, for the CLI to print before the run:
 * tasks (as written, and once the maps and the reduce expand), stages, keys and their limits.
 */
export function demoIntro(plan: Record<string, unknown>): string {
  const p = plan as {
    tasks?: unknown[];
    providers?: Record<string, { type?: string; keys?: unknown[]; limits?: Record<string, unknown> }>;
    defaults?: { maxInFlight?: number };
  };
  const providers = Object.entries(p.providers ?? {}).map(([name, spec]) => {
    // Rates only: `burst` is an object, and a detail of pacing.
    const limits = Object.entries(spec.limits ?? {})
      .filter((entry): entry is [string, number] => typeof entry[1] === 'number')
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const keys = spec.keys?.length ?? 0;
    return `${name} (${spec.type}, ${keys} key${keys === 1 ? '' : 's'}${limits ? `, each ${limits}` : ''})`;
  });
  const written = p.tasks?.length ?? 0;
  const expanded = expandedCounts(plan);
  return [
    `catalog demo: ${written} tasks in the plan; once its maps and reduce expand, ${expanded.tasks} tasks and ${expanded.containers} containers ` +
      '(120 products: extract with a catalog tool -> classify -> SEO with a quality gate -> translate de/fr/es and review; then a reduce report)',
    `providers: ${providers.join('; ')}; at most ${p.defaults?.maxInFlight ?? '?'} agents in flight`,
  ].join('\n');
}

interface TaskJson {
  id?: unknown;
  kind?: unknown;
  items?: { file?: unknown; from?: unknown; values?: unknown };
  over?: unknown;
  fanIn?: unknown;
}

/**
 * What a plan runs once its maps and reduces expand, counted as the run's totals count: each item
 * of a map and each group of a reduce's tree is a task, and a map or reduce that expanded is a
 * container (counted apart, calling no model); one that did not (no items, one call takes every
 * input) is a task. Items files are read (relative ones from the working directory). A reduce's
 * split of a group too large for its model is not foreseen, nor planner sub-tasks.
 *
 * @example
 * expandedCounts(await loadDemoPlan()) // { tasks: 865, containers: 9 }
 */
export function expandedCounts(plan: Record<string, unknown>): { tasks: number; containers: number } {
  const tasks = tasksOf(plan);
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const items = mapItemCounts(plan);
  let count = 0;
  let containers = 0;
  for (const t of tasks) {
    let made = 0;
    if (t.kind === 'map') made = items.get(t.id) ?? 0;
    if (t.kind === 'reduce' && typeof t.over === 'string' && byId.get(t.over)?.kind === 'map') {
      const inputs = items.get(t.over) ?? 0;
      const fanIn = typeof t.fanIn === 'number' ? t.fanIn : DEFAULT_FAN_IN;
      const tree = planGroups('r', Array.from({ length: inputs }, (_, i) => String(i)), fanIn);
      if (inputs > fanIn && tree.ok) made = tree.groups.length;
    }
    if (made > 0) containers += 1;
    count += made > 0 ? made : 1;
  }
  return { tasks: count, containers };
}

function tasksOf(plan: Record<string, unknown>): TaskJson[] {
  const tasks = (plan as { tasks?: unknown }).tasks;
  return Array.isArray(tasks) ? tasks.filter((t): t is TaskJson => t !== null && typeof t === 'object') : [];
}

/**
 * The number of items of each map of a plan, as far as the plan tells: inline values, an items
 * file (read; a relative path from the working directory), or as many as the map it reads
 * (`items.from`). A map over another task's output counts 0.
 */
export function mapItemCounts(plan: Record<string, unknown>): Map<unknown, number> {
  const tasks = tasksOf(plan);
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const counts = new Map<unknown, number>();
  const itemsOf = (t: TaskJson, seen: Set<unknown>): number => {
    if (counts.has(t.id)) return counts.get(t.id)!;
    let n = 0;
    if (Array.isArray(t.items?.values)) n = t.items.values.length;
    else if (typeof t.items?.file === 'string') {
      const loaded = loadItemsFile(t.items.file);
      n = loaded.ok ? loaded.items.length : 0;
    } else if (typeof t.items?.from === 'string' && !seen.has(t.items.from)) {
      const source = byId.get(t.items.from);
      n = source?.kind === 'map' ? itemsOf(source, seen.add(t.id)) : 0;
    }
    counts.set(t.id, n);
    return n;
  };
  for (const t of tasks) if (t.kind === 'map') itemsOf(t, new Set());
  return counts;
}
