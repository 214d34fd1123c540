/**
 * Whether dist/ (what bin/swarmstate.js loads, so what every CLI test runs) is the build of the
 * source as it is now: a source file newer than its output, or without one, is stale.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The folders `npm run build` compiles (tsconfig.build.json's `include`). */
const SOURCES = ['src', 'machines'];

/**
 * The source files under `root` (relative paths) whose build in `root`/dist is missing or older.
 *
 * @example
 * staleOutputs(process.cwd()) // [] right after `npm run build`; ['src/cli/main.ts'] after an edit
 */
export function staleOutputs(root: string): string[] {
  const stale: string[] = [];
  for (const top of SOURCES) {
    const dir = join(root, top);
    if (!existsSync(dir)) continue;
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.d.ts')) continue;
      const source = join(entry.parentPath, entry.name);
      const path = relative(root, source);
      const output = join(root, 'dist', path.replace(/\.ts$/, '.js'));
      if (!existsSync(output) || statSync(output).mtimeMs < statSync(source).mtimeMs) stale.push(path.split('\\').join('/'));
    }
  }
  return stale.sort();
}
