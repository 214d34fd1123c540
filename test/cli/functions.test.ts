/**
 * `--functions <file>` on the CLI: an ES module's exported functions are the plan's `fn` steps.
 * Real child processes on the build, real modules in a temp folder: `validate --functions` names
 * a function the module lacks; without it, `validate` says the names went unchecked and `run`
 * refuses; a missing file, a module that throws while loading and one that exports no function
 * are each one line, exit 2, on every command that takes the flag.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';

let dir: string;
let plan: string;
const at = (name: string) => join(dir, name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-functions-'));
  plan = at('plan.json');
  writeFileSync(
    plan,
    JSON.stringify({
      providers: { sim: { type: 'sim' } },
      models: { fast: { provider: 'sim', model: 'sim-fast' } },
      tasks: [
        { id: 'fetch', kind: 'fn', fn: 'fetchOrders' },
        { id: 'each', kind: 'map', items: { from: 'fetch' }, fn: 'enrich' },
        { id: 'sum', model: 'fast', prompt: 'Sum up', deps: ['each'] },
      ],
    }),
  );
  writeFileSync(at('steps.mjs'), 'export async function fetchOrders() { return []; }\nexport const writeOutbox = async () => null;\nexport const LIMIT = 3;\n');
  writeFileSync(at('all.mjs'), 'export async function fetchOrders() { return []; }\nexport function enrich(ctx) { return ctx.item; }\n');
  writeFileSync(at('default.mjs'), 'export default { fetchOrders: async () => [], enrich: (ctx) => ctx.item, note: "not a function" };\n');
  writeFileSync(at('clash.mjs'), 'export function enrich() { return 1; }\nexport default { enrich: () => 2 };\n');
  writeFileSync(at('throws.mjs'), 'throw new Error("cannot reach the orders database\\nsecond line");\n');
  writeFileSync(at('broken.mjs'), 'export function (\n');
  writeFileSync(at('none.mjs'), 'export const LIMIT = 3;\n');
  writeFileSync(at('anonymous.mjs'), 'export default async function () { return 1; }\n');
});

describe('validate --functions', () => {
  it('names each function the plan gives that the module lacks, with the names it has (exit 2)', async () => {
    const r = await cli(['validate', plan, '--functions', at('steps.mjs')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('invalid plan: 1 problem, fix it and run again\ntasks[1].fn: no function "enrich": the functions given are fetchOrders, writeOutbox\n');
    const json = await cli(['validate', plan, '--functions', at('steps.mjs'), '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({ valid: false, problems: [{ path: 'tasks[1].fn', message: 'no function "enrich": the functions given are fetchOrders, writeOutbox' }] });
  });

  it('is valid when the module has every function, as named exports or in a default object', async () => {
    for (const module of ['all.mjs', 'default.mjs']) {
      const r = await cli(['validate', plan, '--functions', at(module)]);
      expect(r, module).toEqual({ code: 0, stdout: 'plan is valid: 3 tasks, 1 models, 1 providers\n', stderr: '' });
    }
  });

  it('without it, says the functions were not checked: a note, not an error (exit 0)', async () => {
    const r = await cli(['validate', plan]);
    expect(r).toEqual({
      code: 0,
      stdout: 'plan is valid: 3 tasks, 1 models, 1 providers\n',
      stderr: 'note: the functions the plan names (fetchOrders, enrich) were not checked: give the module that exports them with --functions <file>\n',
    });
    const json = await cli(['validate', plan, '--json']);
    expect(JSON.parse(json.stdout)).toEqual({
      valid: true,
      problems: [],
      tasks: 3,
      models: 1,
      providers: 1,
      notes: ['the functions the plan names (fetchOrders, enrich) were not checked: give the module that exports them with --functions <file>'],
    });
  });
});

describe('run', () => {
  it('refuses a plan naming functions without --functions, naming the first task and function', async () => {
    const r = await cli(['run', plan, '--store', 'memory']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('swarmstate: task "fetch" runs function "fetchOrders": give the module that exports it with --functions <file> (and 1 more task names a function)\n');
  });

  it('hands the module`s functions to the swarm, which refuses a plan naming one it lacks', async () => {
    const r = await cli(['run', plan, '--store', 'memory', '--functions', at('steps.mjs')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('invalid plan: 1 problem, fix it and run again\ntasks[1].fn: no function "enrich": the functions given are fetchOrders, writeOutbox\n');
  });
});

describe('a module that cannot give functions: one line, exit 2, on each command', () => {
  const cases: [string, (file: string) => string | RegExp][] = [
    ['missing.mjs', (f) => `swarmstate: --functions ${f}: no such file\n`],
    ['throws.mjs', (f) => `swarmstate: --functions ${f}: the module threw while loading: cannot reach the orders database\n`],
    // V8 words its syntax errors its own way from one version to the next: the line is checked, not its words.
    ['broken.mjs', (f) => new RegExp(`^swarmstate: --functions ${f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: the module threw while loading: SyntaxError: [^\\n]+\\n$`)],
    ['none.mjs', (f) => `swarmstate: --functions ${f}: the module exports no function: export each one by name (export async function fetchOrders(ctx) { ... })\n`],
    ['anonymous.mjs', (f) => `swarmstate: --functions ${f}: the module exports no function: export each one by name (export async function fetchOrders(ctx) { ... }); its default export is a function, which no plan can name\n`],
    ['clash.mjs', (f) => `swarmstate: --functions ${f}: "enrich" is both a named export and a field of the default export, two different functions: keep one\n`],
  ];
  it.each(cases)('%s', async (name, line) => {
    const file = at(name);
    for (const args of [['validate', plan], ['run', plan, '--store', 'memory'], ['resume', 'run-x', '--store', 'memory'], ['retry', 'run-x', '--store', 'memory']]) {
      const r = await cli([...args, '--functions', file]);
      const expected = line(file);
      expect({ code: r.code, stderr: r.stderr }, args[0]).toEqual({ code: 2, stderr: typeof expected === 'string' ? expected : expect.stringMatching(expected) });
    }
  });

  it('a folder is not a module', async () => {
    const r = await cli(['validate', plan, '--functions', dir]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 2, stderr: `swarmstate: --functions ${dir}: is a folder, not a module\n` });
  });
});
