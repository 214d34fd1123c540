/**
 * Test files that need a program npm does not install (redis-server, chromium: Debian's
 * packages). On a machine without it the file skips, saying why and how to run it, so `npm test`
 * passes on a fresh machine. `.ci/run` installs both and sets SWARMSTATE_REQUIRE_ALL=1: there a
 * missing program fails the file, so CI cannot go green by skipping what it is meant to run.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

export const REQUIRE_ALL = 'SWARMSTATE_REQUIRE_ALL';

/** An absolute path that is executable, or a name found executable on $PATH. */
export function programFound(program: string, path = process.env['PATH'] ?? ''): boolean {
  const candidates = isAbsolute(program) ? [program] : path.split(delimiter).filter(Boolean).map((dir) => join(dir, program));
  return candidates.some((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * Whether a file's tests must skip for want of `program`. Prints the reason when they do; throws
 * (failing the file) when SWARMSTATE_REQUIRE_ALL=1 asks for everything to run.
 */
export function skipWithout(program: string, what: string, install: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (programFound(program, env['PATH'] ?? '')) return false;
  if (env[REQUIRE_ALL] === '1') {
    throw new Error(`${what} cannot run: ${program} is not installed (${install}), and ${REQUIRE_ALL}=1 requires every test to run`);
  }
  console.warn(`${what} skipped: ${program} is not installed. To run: ${install}, then npm test (CI sets ${REQUIRE_ALL}=1 and fails without it)`);
  return true;
}
