/**
 * The built-in demo (`swarmstate demo`): the catalog swarm in examples/catalog-swarm/, 120
 * products through extract -> classify -> translate x3 -> SEO -> review and one report, on the
 * embedded simulated provider (3 keys with limits, faults, latency) and a catalog MCP server
 * that ships with the package. No key, no network.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  const plan = planJson(await readFile(path, 'utf8')) as PlanJson;
  return withPlanFolder(plan, dirname(resolve(path)));
}

/**
 * A plan file's text as JSON. Editors on Windows save UTF-8 with a byte order mark, which
 * JSON.parse rejects with an error pointing at a character nobody can see: it is dropped.
 *
 * @throws SyntaxError when the text is not JSON.
 */
export function planJson(text: string): unknown {
  return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text) as unknown;
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
 * tasks, stages, keys and their limits.
 */
export function demoIntro(plan: Record<string, unknown>): string {
  const p = plan as {
    tasks?: unknown[];
    providers?: Record<string, { type?: string; keys?: unknown[]; limits?: Record<string, number> }>;
    defaults?: { maxInFlight?: number };
  };
  const providers = Object.entries(p.providers ?? {}).map(([name, spec]) => {
    const limits = Object.entries(spec.limits ?? {}).map(([k, v]) => `${k} ${v}`).join(', ');
    const keys = spec.keys?.length ?? 0;
    return `${name} (${spec.type}, ${keys} key${keys === 1 ? '' : 's'}${limits ? `, each ${limits}` : ''})`;
  });
  return [
    `catalog demo: ${p.tasks?.length ?? 0} tasks (120 products: extract with a catalog tool -> classify -> translate de/fr/es -> SEO -> review; then one report)`,
    `providers: ${providers.join('; ')}; at most ${p.defaults?.maxInFlight ?? '?'} agents in flight`,
  ].join('\n');
}
