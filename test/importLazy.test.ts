/**
 * What `import('swarmstate')` loads (issue 27), counted, not timed: a real child process imports
 * the built package with a preload (fixtures/record-modules.mjs) that writes down every module
 * it loads, ES modules and CommonJS files alike. What only some runs use must not be among them,
 * and must load when first used. The cost itself is a benchmark (`npm run bench -- import`).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './store/helpers.js';

const exec = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'swarmstate-import-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Packages a plain import must not load: each loads when the feature that needs it is used. */
const LAZY_PACKAGES = ['zod', '@opentelemetry/api', 'ajv', 'js-tiktoken', '@modelcontextprotocol/sdk', 'undici', 'better-sqlite3', 'bullmq', 'ioredis', '@statelyai/inspect'];
/** This package's own modules a plain import must not load (paths under dist/). */
const LAZY_FILES = ['src/sim/', 'src/ui/', 'src/cli/', 'src/report/cli.js', 'src/tools/mcp.js', 'src/plan/jsonSchema.js', 'src/distributed/redis.js', 'src/distributed/worker.js', 'machines/index.js'];

let runs = 0;
/** The modules (file: URLs) a fresh node loads running `script` (an ES module), after `import('swarmstate')` at its top. */
async function modulesLoadedBy(script: string): Promise<string[]> {
  const file = join(dir, `modules-${runs++}.txt`);
  const code = `const swarmstate = await import('swarmstate');\n${script}`;
  await exec(process.execPath, ['--import', join(ROOT, 'test/fixtures/record-modules.mjs'), '--input-type=module', '-e', code], {
    cwd: ROOT,
    env: { ...process.env, SWARMSTATE_RECORD_MODULES: file, SWARMSTATE_STORE: '' },
  });
  return [...new Set(readFileSync(file, 'utf8').split('\n').filter((u) => u.startsWith('file:')))];
}

const packagesOf = (urls: string[]) => new Set(urls.map((u) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1]).filter((p): p is string => p !== undefined));
const distFiles = (urls: string[]) => urls.map((u) => /\/dist\/(.*)$/.exec(u)?.[1]).filter((f): f is string => f !== undefined);

describe("import('swarmstate')", () => {
  it('loads the runtime and nothing that only some runs use', async () => {
    const urls = await modulesLoadedBy('');
    const packages = packagesOf(urls);
    const own = distFiles(urls);
    // The recorder sees ES modules and CommonJS: the runtime's own and xstate are there.
    expect(own).toContain('src/index.js');
    expect(own).toContain('src/swarm.js');
    expect(packages.has('xstate')).toBe(true);
    for (const name of LAZY_PACKAGES) expect(packages.has(name), `the import loads ${name}`).toBe(false);
    for (const path of LAZY_FILES) expect(own.filter((f) => f.startsWith(path)), `the import loads dist/${path}`).toEqual([]);
  });

  it('loads each of them when first used: zod with a plan checked, OpenTelemetry with a run, the simulator when started', async () => {
    const urls = await modulesLoadedBy(`
      const plan = { providers: { p: { type: 'custom' } }, models: { m: { provider: 'p', model: 'x' } }, tasks: [{ id: 'a', model: 'm', prompt: 'hi' }] };
      swarmstate.parsePlan(plan);
      const swarm = swarmstate.createSwarm({ store: false, providers: { p: swarmstate.createScriptedProvider(() => 'ok') } });
      const result = await swarm.run(plan).result;
      if (result.status !== 'completed') throw new Error('the run did not complete: ' + result.status);
      await swarm.close();
      const sim = await swarmstate.startSim();
      await sim.close();
    `);
    const packages = packagesOf(urls);
    const own = distFiles(urls);
    expect(packages.has('zod')).toBe(true);
    expect(packages.has('@opentelemetry/api')).toBe(true);
    expect(own).toContain('src/sim/server.js');
    // A run on an in-process provider still needs neither undici nor the MCP SDK.
    expect(packages.has('undici')).toBe(false);
    expect(packages.has('@modelcontextprotocol/sdk')).toBe(false);
  });

  it('loads no zod for tools given in JSON Schema (a zod tool brings its own: its schema converts itself)', async () => {
    const urls = await modulesLoadedBy(`
      const handler = () => 'ok';
      const swarm = swarmstate.createSwarm({ store: false, tools: { a: { inputSchema: { type: 'object', properties: { q: { type: 'string' } } }, handler } } });
      await swarm.close();
    `);
    expect(packagesOf(urls).has('zod')).toBe(false);
  });
});
