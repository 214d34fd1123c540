/**
 * What the published package holds and exposes: the files `npm pack` takes (the LICENSE, the docs
 * the help points to, the plan's JSON Schema), and public declaration files that name no optional
 * package (a consumer without better-sqlite3, bullmq, ioredis or @statelyai/inspect type-checks).
 */
import { execFile } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './store/helpers.js';

const exec = promisify(execFile);
const OPTIONAL = ['better-sqlite3', 'bullmq', 'ioredis', '@statelyai/inspect', '@xstate/graph'];

/** The declaration files a consumer's compiler reads: the entry points' and every one they import. */
function publicDeclarations(): { files: string[]; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const walk = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    // Comments hold examples (`import ... from 'swarmstate'`): only code counts.
    const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
    for (const match of code.matchAll(/(?:from|import\()\s*['"]([^'"]+)['"]/g)) {
      const spec = match[1]!;
      if (!spec.startsWith('.')) {
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
        continue;
      }
      const target = resolve(dirname(file), spec).replace(/\.js$/, '.d.ts');
      expect(existsSync(target), `${relative(ROOT, file)} imports ${spec}`).toBe(true);
      walk(target);
    }
  };
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { types?: string }> };
  for (const entry of Object.values(pkg.exports)) if (typeof entry === 'object' && entry.types) walk(join(ROOT, entry.types));
  return { files: [...files], packages };
}

describe('the package', () => {
  it('ships the LICENSE, the docs the help names and the plan JSON Schema', async () => {
    const { stdout } = await exec('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT });
    const packed = new Set((JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((f) => f.path));
    for (const file of ['LICENSE', 'README.md', 'package.json', 'bin/swarmstate.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'schema/plan.schema.json']) {
      expect(packed.has(file), file).toBe(true);
    }
    // Every file of this package the help names is in the package.
    const { stdout: help } = await exec(process.execPath, [join(ROOT, 'bin/swarmstate.js'), '--help']);
    const named = [...help.matchAll(/(\/\S+\.(?:md|json))/g)].map((m) => m[1]!.replace(/[,.]$/, ''));
    expect(named.length).toBeGreaterThanOrEqual(4);
    for (const path of named) {
      expect(path.startsWith(ROOT + '/'), path).toBe(true);
      expect(packed.has(relative(ROOT, path)), path).toBe(true);
    }
  });

  it('has public declaration files that import no optional package', () => {
    const { files, packages } = publicDeclarations();
    expect(files.length).toBeGreaterThan(10);
    const deps = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const name of packages) {
      expect(OPTIONAL, `a public .d.ts imports ${name}`).not.toContain(name);
      // Whatever they import, a consumer has: a dependency, or Node's own.
      if (!name.startsWith('node:')) expect(Object.keys(deps.dependencies), `a public .d.ts imports ${name}`).toContain(name);
    }
  });
});
