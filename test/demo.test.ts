/**
 * The catalog demo (examples/catalog-swarm): the plan is valid and current, it runs through the
 * real CLI to the end with every one of its 841 tasks completed (faults and 429s absorbed by
 * retries, the keys visibly saturated), and `realPlan` turns it into a plan for a real provider.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildPlan, planJson, productsJson } from '../examples/catalog-swarm/generate.js';
import { demoIntro, demoPlanPath, loadDemoPlan, packageRoot } from '../src/cli/demo.js';
import { MissingApiKeyError, REAL_MODELS, realPlan, stripSimDirectives } from '../src/cli/real.js';
import { validatePlan } from '../src/plan/index.js';

const exec = promisify(execFile);
const dir = join(packageRoot(), 'examples', 'catalog-swarm');

interface Event {
  type: string;
  at: number;
  state?: string;
  error?: { code: string };
}

describe('the catalog demo plan', () => {
  it('is found from the package root, is valid, and has 120 products x 7 stages + 1 report', async () => {
    expect(demoPlanPath()).toBe(join(dir, 'plan.json'));
    const plan = await loadDemoPlan();
    const checked = validatePlan(plan, { tools: [] });
    expect(checked.ok ? [] : checked.issues).toEqual([]);
    if (!checked.ok) return;
    expect(checked.plan.tasks).toHaveLength(120 * 7 + 1);
    expect(checked.plan.providers.sim!.keys).toHaveLength(3);
    expect(checked.plan.providers.sim!.sim?.limits).toBeDefined();
    expect(new Set(Object.values(checked.plan.models).map((m) => m.model)).size).toBe(3);
    expect(Object.values(checked.plan.models).every((m) => m.price)).toBe(true);
    expect(checked.plan.tasks.find((t) => t.id === 'report')!.deps).toHaveLength(120);
    expect(demoIntro(plan)).toMatch(/841 tasks[\s\S]*3 keys, each rpm 1000/);
  });

  it('runs its catalog server from the plan folder, whatever the working directory', async () => {
    const plan = (await loadDemoPlan()) as { tools: { servers: Record<string, { cwd?: string; args: string[] }> } };
    expect(plan.tools.servers.catalog!.cwd).toBe(join(packageRoot(), 'examples', 'catalog-swarm'));
    expect(existsSync(join(plan.tools.servers.catalog!.cwd!, plan.tools.servers.catalog!.args[0]!))).toBe(true);
  });

  it('plan.json and products.json are what generate.ts writes (run it after editing a prompt)', () => {
    expect(readFileSync(join(dir, 'plan.json'), 'utf8')).toBe(planJson(buildPlan(dir)));
    expect(readFileSync(join(dir, 'products.json'), 'utf8')).toBe(productsJson());
  });
});

describe('the catalog demo through the CLI', () => {
  beforeAll(() => {
    // `npm test` builds first (pretest); a lone `npx vitest run` may find no build.
    if (!existsSync(join(packageRoot(), 'dist', 'src', 'cli', 'main.js'))) execFileSync('npm', ['run', 'build'], { stdio: 'ignore' });
  });

  // Its makespan (about 25 s on an idle machine) is printed, not asserted: a loaded machine is slower.
  it('completes every task, absorbing faults and rate limits', async () => {
    const events = join(mkdtempSync(join(tmpdir(), 'swarmstate-demo-')), 'events.ndjson');
    const started = Date.now();
    const { stdout } = await exec(process.execPath, ['bin/swarmstate.js', 'run', 'examples/catalog-swarm/plan.json', '--json', '--events', events], {
      timeout: 290_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const wall = Date.now() - started;
    const result = JSON.parse(stdout) as { status: string; totals: { tasks: number; completed: number; requests: number; retries: number; durationMs: number; costUsd: number } };
    const log = readFileSync(events, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Event);
    const count = (pred: (e: Event) => boolean) => log.filter(pred).length;
    const errors = (code: string) => count((e) => e.type === 'model:error' && e.error?.code === code);
    const t = result.totals;
    console.log(
      `catalog demo: ${t.completed}/${t.tasks} tasks completed, ${t.requests} requests, ${t.retries} retries ` +
        `(${errors('rate_limited')} x 429, ${errors('overloaded')} x 529, ${errors('server_error')} x 500, ${errors('network')} resets), ` +
        `${count((e) => e.type === 'key:state' && e.state === 'saturated')} key saturations, ${count((e) => e.type === 'tool:called')} tool calls, ` +
        `$${t.costUsd.toFixed(2)}; makespan ${(t.durationMs / 1000).toFixed(1)} s (CLI wall ${(wall / 1000).toFixed(1)} s)`,
    );

    expect(result.status).toBe('completed');
    expect(t.completed).toBe(841);
    expect(t.tasks).toBe(841);
    // Every product looked itself up through the catalog MCP server.
    expect(count((e) => e.type === 'tool:called')).toBe(120);
    // The injected faults happened and were retried away.
    expect(t.retries).toBeGreaterThan(0);
    expect(errors('overloaded') + errors('server_error') + errors('network')).toBeGreaterThan(0);
    // The keys' limits shaped the run: keys filled up and waited.
    expect(count((e) => e.type === 'key:state' && e.state === 'saturated')).toBeGreaterThan(0);
  }, 300_000);
});

describe('realPlan', () => {
  const demo = () => loadDemoPlan() as Promise<{
    providers: Record<string, Record<string, unknown>>;
    models: Record<string, { model: string; price: unknown }>;
    defaults: { taskTimeoutMs: number };
    tasks: { id: string; prompt: string; system?: string; maxTokens?: number }[];
  }>;

  it('with ANTHROPIC_API_KEY: an anthropic provider keyed from it, Claude models per stage, no simulator left', async () => {
    const original = await demo();
    const before = JSON.stringify(original);
    const { plan, notes } = realPlan(original, { ANTHROPIC_API_KEY: 'sk-ant-test', OPENAI_API_KEY: 'sk-openai' });
    expect(JSON.stringify(original)).toBe(before);
    expect(plan.providers.sim).toEqual({ type: 'anthropic', keys: [{ env: 'ANTHROPIC_API_KEY' }], limits: { concurrency: 8 } });
    expect(Object.fromEntries(Object.entries(plan.models).map(([k, m]) => [k, m.model]))).toEqual({
      cheap: 'claude-haiku-4-5',
      mid: 'claude-sonnet-4-5',
      strong: 'claude-opus-4-5',
    });
    const text = JSON.stringify(plan.tasks);
    expect(text).not.toContain('[[sim:');
    expect(text).not.toContain('sim-catalog-key');
    expect(plan.tasks.every((t) => t.maxTokens === undefined)).toBe(true);
    expect(plan.tasks[0]!.prompt).toBe(
      'Look up product CAT-001 with the catalog tool, then list its attributes as short "key: value" lines: name, brand, department, materials, colours, dimensions, weight, price.',
    );
    expect(plan.defaults.taskTimeoutMs).toBeGreaterThanOrEqual(300_000);
    expect(notes.join('\n')).toMatch(/ANTHROPIC_API_KEY[\s\S]*claude-opus-4-5[\s\S]*removed 841 \[\[sim:\.\.\.\]\] directives[\s\S]*961 billed model calls/);
    // What remains is a valid plan for that environment, the MCP catalog server included.
    const checked = validatePlan(plan, { env: { ANTHROPIC_API_KEY: 'sk-ant-test' }, tools: [] });
    expect(checked.ok ? [] : checked.issues).toEqual([]);
  });

  it('with only OPENAI_API_KEY (and OPENAI_BASE_URL): an openai provider at that URL with GPT models', async () => {
    const env = { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: 'http://127.0.0.1:9999/v1' };
    const { plan } = realPlan(await demo(), env);
    expect(plan.providers.sim).toEqual({ type: 'openai', keys: [{ env: 'OPENAI_API_KEY' }], baseURL: 'http://127.0.0.1:9999/v1', limits: { concurrency: 8 } });
    expect(plan.models.cheap).toMatchObject(REAL_MODELS.openai['claude-haiku-4-5']!);
    expect(plan.models.strong!.model).toBe('gpt-4.1');
    expect(validatePlan(plan, { env, tools: [] }).ok).toBe(true);
    expect(realPlan(await demo(), { OPENAI_API_KEY: 'sk-test' }).plan.providers.sim).not.toHaveProperty('baseURL');
  });

  it('without a key: a clear error naming both variables; an empty variable counts as unset', async () => {
    const plan = await demo();
    expect(() => realPlan(plan, {})).toThrow(MissingApiKeyError);
    expect(() => realPlan(plan, { ANTHROPIC_API_KEY: '' })).toThrow(/ANTHROPIC_API_KEY[\s\S]*OPENAI_API_KEY/);
  });

  it('has a real stand-in for every simulated model id of the example plans, on both providers', () => {
    const dir = join(packageRoot(), 'examples/plans');
    const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(3);
    for (const file of files) {
      const plan = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>;
      for (const env of [{ ANTHROPIC_API_KEY: 'k' }, { OPENAI_API_KEY: 'k' }]) {
        const { plan: real } = realPlan(plan, env);
        const ids = Object.values(real.models as Record<string, { model: string }>).map((m) => m.model);
        expect(ids.filter((id) => id.startsWith('sim-')), `${file} on ${Object.keys(env)[0]}`).toEqual([]);
        expect(validatePlan(real, { env: { ...env } }).ok, file).toBe(true);
      }
    }
  });

  it('refuses a simulated model it has no real stand-in for', () => {
    const plan = { providers: { s: { type: 'sim' } }, models: { m: { provider: 's', model: 'sim-mystery' } }, tasks: [] };
    expect(() => realPlan(plan, { ANTHROPIC_API_KEY: 'k' })).toThrow(/model "m": no real anthropic model stands in for simulated "sim-mystery"/);
    for (const id of ['constructor', 'toString', '__proto__']) {
      const named = { providers: { s: { type: 'sim' } }, models: { m: { provider: 's', model: id } }, tasks: [] };
      expect(() => realPlan(named, { ANTHROPIC_API_KEY: 'k' }), id).toThrow(`no real anthropic model stands in for simulated "${id}"`);
    }
  });
});

describe('stripSimDirectives', () => {
  it('removes every directive with its blanks, JSON arguments holding "]]" included', () => {
    expect(stripSimDirectives('Look it up.\n[[sim:tool db__get {"id":[[1]],"s":"a]]b"}]]')).toEqual({ text: 'Look it up.', removed: 1 });
    expect(stripSimDirectives('A [[sim:length 5]] B\n\n\n[[sim:error 529 2]]\nC [[sim:reply x y]]')).toEqual({ text: 'A B\n\nC', removed: 3 });
    expect(stripSimDirectives('[[sim:tools]] [[sim:tool t]]Go')).toEqual({ text: 'Go', removed: 2 });
  });

  it('leaves a text without directives, or with an unclosed one, exactly as it was', () => {
    expect(stripSimDirectives('  keep {{dep}}  \n')).toEqual({ text: '  keep {{dep}}  \n', removed: 0 });
    expect(stripSimDirectives('broken [[sim:length 5')).toEqual({ text: 'broken [[sim:length 5', removed: 0 });
  });
});
