/**
 * The CLI tests run bin/swarmstate.js, which loads dist/: a build older than the source would
 * test old code and pass. The suite's global setup (test/setup/build.ts) rebuilds a stale dist/.
 */
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { staleOutputs } from '../helpers/build.js';

describe('the build the CLI tests run', () => {
  it('is the build of the source as it is now', () => {
    expect(staleOutputs(process.cwd())).toEqual([]);
  });

  it('a source newer than its output, or without one, is stale; a .d.ts is not compiled', () => {
    const root = mkdtempSync(join(tmpdir(), 'swarmstate-build-'));
    const files = ['src/a.ts', 'src/cli/b.ts', 'machines/c.ts', 'src/types.d.ts'];
    for (const f of files) {
      mkdirSync(join(root, f, '..'), { recursive: true });
      writeFileSync(join(root, f), '');
    }
    for (const f of ['src/a.js', 'src/cli/b.js']) {
      mkdirSync(join(root, 'dist', f, '..'), { recursive: true });
      writeFileSync(join(root, 'dist', f), '');
    }
    // a's output is newer than a; b's is older than b; c has none.
    utimesSync(join(root, 'src/a.ts'), 1_000, 1_000);
    utimesSync(join(root, 'dist/src/a.js'), 2_000, 2_000);
    utimesSync(join(root, 'src/cli/b.ts'), 3_000, 3_000);
    utimesSync(join(root, 'dist/src/cli/b.js'), 2_000, 2_000);
    expect(staleOutputs(root)).toEqual(['machines/c.ts', 'src/cli/b.ts']);
  });
});
