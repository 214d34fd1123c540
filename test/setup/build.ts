/**
 * Vitest global setup: the CLI tests run bin/swarmstate.js, which loads the build in dist/, so
 * `npx vitest run` after a source edit would test the old code. When any source file is newer
 * than its output, `npm run build` runs once, before the first test.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { staleOutputs } from '../helpers/build.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export default function buildIfStale(): void {
  const before = staleOutputs(ROOT);
  if (before.length === 0) return;
  console.error(`global setup: dist/ is older than ${before.length} source file(s) (${before.slice(0, 3).join(', ')}${before.length > 3 ? ', ...' : ''}): npm run build`);
  let failure: unknown;
  try {
    execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (error) {
    // tsc still writes its output when the types do not check (typecheck is its own step): what
    // matters here is whether dist/ now holds the source.
    failure = error;
  }
  const after = staleOutputs(ROOT);
  if (after.length > 0) throw new Error(`npm run build left dist/ older than ${after.join(', ')}: the CLI tests would run old code`, { cause: failure });
}
