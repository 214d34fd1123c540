/**
 * The catalog demo (examples/catalog-swarm): the hand-written plan is valid and expands to 865
 * tasks (maps over the 120 products, a reduce over the 120 reviews), it runs through the real CLI
 * to the end with every task completed (faults and 429s absorbed by retries, the keys visibly
 * saturated), its stages read their shared brief from the prompt cache and share the catalog
 * tool's lookups, and `realPlan` turns it into a plan for a real provider.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { demoIntro, demoPlanPath, expandedCounts, loadDemoPlan, mapItemCounts, packageRoot } from '../src/cli/demo.js';
import { MissingApiKeyError, REAL_MODELS, realPlan, stripSimDirectives } from '../src/cli/real.js';
import { validatePlan } from '../src/plan/index.js';

const exec = promisify(execFile);
const dir = join(packageRoot(), 'examples', 'catalog-swarm');

interface Event {
  type: string;
  at: number;
  taskId?: string;
  state?: string;
  released?: number;
  error?: { code: string };
}

/** 120 products x (extract, classify, seo, translate x3, review) + 7 brief sections + the report's 18 groups: the tasks (the 9 plan tasks, 8 maps and a reduce, are containers once expanded). */
const TASKS = 120 * 7 + 7 + 18;

describe('the catalog demo plan', () => {
  it('is found from the package root, is valid, and its 9 tasks expand to 865 tasks and 9 containers', async () => {
    expect(demoPlanPath()).toBe(join(dir, 'plan.json'));
    const plan = await loadDemoPlan();
    const checked = validatePlan(plan, { tools: [] });
    expect(checked.ok ? [] : checked.issues).toEqual([]);
    if (!checked.ok) return;
    const tasks = new Map(checked.plan.tasks.map((t) => [t.id, t]));
    expect([...tasks.keys()]).toEqual(['brief', 'extract', 'classify', 'seo', 'translate.de', 'translate.fr', 'translate.es', 'review', 'report']);
    expect(checked.plan.providers.sim!.keys).toHaveLength(3);
    expect(checked.plan.providers.sim!.sim?.limits).toBeDefined();
    expect(checked.plan.providers.sim!.sim?.faults).toBeDefined();
    expect(new Set(Object.values(checked.plan.models).map((m) => m.model)).size).toBe(3);
    expect(Object.values(checked.plan.models).every((m) => m.price)).toBe(true);

    // The pipeline: products.json -> extract -> classify -> seo -> (translate x3, review) -> report.
    expect(tasks.get('extract')).toMatchObject({ kind: 'map', key: 'sku', tools: ['catalog.lookup_product'] });
    expect(tasks.get('classify')).toMatchObject({ kind: 'map', items: { from: 'extract' }, tools: ['catalog.list_categories'] });
    expect(tasks.get('seo')).toMatchObject({ kind: 'map', items: { from: 'classify' } });
    for (const id of ['translate.de', 'translate.fr', 'translate.es', 'review']) expect(tasks.get(id)).toMatchObject({ kind: 'map', items: { from: 'seo' } });
    expect(tasks.get('report')).toMatchObject({ kind: 'reduce', over: 'review', fanIn: 8 });
    // Structured outputs where later stages read fields; a quality gate on the page text.
    expect(tasks.get('extract')!.output?.schema).toMatchObject({ type: 'object', required: expect.arrayContaining(['sku', 'department']) });
    expect(tasks.get('classify')!.output?.schema).toMatchObject({ type: 'object', required: expect.arrayContaining(['path', 'keywords']) });
    expect(tasks.get('seo')!.accept).toMatchObject({ minChars: 300, pattern: expect.any(String), judge: { model: 'cheap' } });
    // Reviews are full answers now (a reduce keeps every prompt inside its budget), not one-liners.
    expect(tasks.get('review')!.prompt).toMatch(/\[\[sim:length (\d{3})\]\]/);
    // Every stage after extract shares the house brief in its system prompt: the cacheable prefix.
    for (const id of ['classify', 'seo', 'translate.de', 'translate.fr', 'translate.es', 'review', 'report']) {
      expect(tasks.get(id)!.system, id).toContain('{{brief}}');
      expect(tasks.get(id)!.prompt, id).not.toContain('{{brief}}');
    }

    expect(Object.fromEntries(mapItemCounts(plan))).toEqual({ brief: 7, extract: 120, classify: 120, seo: 120, 'translate.de': 120, 'translate.fr': 120, 'translate.es': 120, review: 120 });
    expect(expandedCounts(plan)).toEqual({ tasks: TASKS, containers: 9 });
    expect(demoIntro(plan)).toMatch(/9 tasks in the plan; once its maps and reduce expand, 865 tasks and 9 containers [\s\S]*3 keys, each rpm 1500, itpm \d+, otpm \d+, concurrency 12\); at most 36 agents/);
    expect(demoIntro(plan)).not.toContain('[object Object]');
  });

  it('runs its catalog server from the plan folder, whatever the working directory; its items file is the plan\'s neighbour', async () => {
    const plan = (await loadDemoPlan()) as { tools: { servers: Record<string, { cwd?: string; args: string[] }> }; tasks: { id: string; items?: { file?: string } }[] };
    expect(plan.tools.servers.catalog!.cwd).toBe(dir);
    expect(existsSync(join(plan.tools.servers.catalog!.cwd!, plan.tools.servers.catalog!.args[0]!))).toBe(true);
    expect(plan.tasks.find((t) => t.id === 'extract')!.items!.file).toBe(join(dir, 'products.json'));
  });

  it('products.json holds the 120 products the catalog server serves, with unique SKUs', () => {
    const products = JSON.parse(readFileSync(join(dir, 'products.json'), 'utf8')) as { sku: string; department: string }[];
    expect(products).toHaveLength(120);
    expect(new Set(products.map((p) => p.sku)).size).toBe(120);
    expect(new Set(products.map((p) => p.department)).size).toBe(8);
  });
});

describe('the catalog demo through the CLI', () => {
  beforeAll(() => {
    // `npm test` builds first (pretest); a lone `npx vitest run` may find no build.
    if (!existsSync(join(packageRoot(), 'dist', 'src', 'cli', 'main.js'))) execFileSync('npm', ['run', 'build'], { stdio: 'ignore' });
  });

  // Its makespan (about 30 s on a loaded machine) is printed, not asserted.
  it('completes every task, absorbing faults and rate limits, reading the brief from the cache and sharing lookups', async () => {
    const events = join(mkdtempSync(join(tmpdir(), 'swarmstate-demo-')), 'events.ndjson');
    const started = Date.now();
    const { stdout } = await exec(process.execPath, ['bin/swarmstate.js', 'run', 'examples/catalog-swarm/plan.json', '--json', '--store', 'memory', '--events', events], {
      timeout: 290_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const wall = Date.now() - started;
    const result = JSON.parse(stdout) as {
      status: string;
      tasks: Record<string, { status: string; output?: unknown; subtasks?: string[] }>;
      totals: { tasks: number; completed: number; containers: number; requests: number; retries: number; durationMs: number; costUsd: number; usage: { inputTokens: number; cacheReadTokens: number; cacheWriteTokens: number } };
      tools: { requested: number; executed: number; deduplicated: number; cached: number };
    };
    const log = readFileSync(events, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Event);
    const count = (pred: (e: Event) => boolean) => log.filter(pred).length;
    const errors = (code: string) => count((e) => e.type === 'model:error' && e.error?.code === code);
    // A gate's rejection fails the attempt (task:failed, then task:retry), not a model call.
    const rejected = count((e) => e.type === 'task:failed' && e.error?.code === 'rejected_output');
    const t = result.totals;
    const u = t.usage;
    const cacheRead = u.cacheReadTokens / (u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens);
    console.log(
      `catalog demo: ${t.completed}/${t.tasks} tasks completed, ${t.requests} requests, ${t.retries} retries ` +
        `(${errors('rate_limited')} x 429, ${errors('overloaded')} x 529, ${errors('server_error')} x 500, ${errors('network')} resets, ` +
        `${rejected} rejected by the gate), ` +
        `${count((e) => e.type === 'key:state' && e.state === 'saturated')} key saturations, cache read ${(cacheRead * 100).toFixed(1)}%, ` +
        `tools ${result.tools.requested} requested / ${result.tools.executed} executed / ${result.tools.deduplicated} shared / ${result.tools.cached} cached, ` +
        `$${t.costUsd.toFixed(2)}; makespan ${(t.durationMs / 1000).toFixed(1)} s (CLI wall ${(wall / 1000).toFixed(1)} s)`,
    );

    expect(result.status).toBe('completed');
    // The 9 plan tasks are maps and a reduce that expand: containers, counted apart from the tasks they made.
    expect(t.tasks).toBe(TASKS);
    expect(t.completed).toBe(TASKS);
    expect(t.containers).toBe(9);
    // The maps ran one task per item, in item order; the reduce merged all 120 reviews in a tree.
    expect(result.tasks.extract!.subtasks).toHaveLength(120);
    expect(result.tasks.extract!.subtasks![0]).toBe('extract/CAT-001');
    expect(result.tasks.review!.output).toHaveLength(120);
    expect(result.tasks.report!.subtasks?.filter((id) => /^report\/L1\//.test(id))).toHaveLength(15);
    expect(typeof result.tasks.report!.output).toBe('string');
    // Structured outputs arrive parsed, and follow their schemas.
    // (A map item's result output is its JSON text today, not the parsed value: parsed here.)
    const parsed = (id: string) => {
      const output = result.tasks[id]!.output;
      return typeof output === 'string' ? (JSON.parse(output) as unknown) : output;
    };
    expect(parsed('extract/CAT-001')).toMatchObject({ sku: expect.any(String), department: expect.any(String), priceEur: expect.any(Number) });
    expect((parsed('classify/0') as { keywords: unknown[] }).keywords.length).toBeGreaterThanOrEqual(3);
    // The quality gate's judge turned down one page, which was written again and passed.
    expect(rejected).toBeGreaterThan(0);

    // Cache-aware fan-out: one leader per stage wrote the brief, the other items read it.
    const leads = log.filter((e) => e.type === 'cache:lead').map((e) => e.taskId!.split('/')[0]);
    for (const stage of ['classify', 'seo', 'translate.de', 'translate.fr', 'translate.es', 'review', 'report']) expect(leads, stage).toContain(stage);
    expect(cacheRead).toBeGreaterThan(0.5);
    // 120 product lookups, then 120 category lookups for 8 departments at most: shared or cached.
    expect(count((e) => e.type === 'tool:called')).toBe(240);
    expect(result.tools.requested).toBe(240);
    expect(result.tools.deduplicated + result.tools.cached).toBeGreaterThanOrEqual(112);

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
    tasks: { id: string; prompt: string; system?: string; maxTokens?: number; accept?: { judge?: { prompt: string } } }[];
  }>;

  it('with ANTHROPIC_API_KEY: an anthropic provider keyed from it, Claude models per stage, no simulator left', async () => {
    const original = await demo();
    const before = JSON.stringify(original);
    const { plan, notes } = realPlan(original, { ANTHROPIC_API_KEY: 'sk-ant-test', OPENAI_API_KEY: 'sk-openai' });
    expect(JSON.stringify(original)).toBe(before);
    expect(plan.providers.sim).toEqual({ type: 'anthropic', keys: [{ env: 'ANTHROPIC_API_KEY' }], limits: { concurrency: 12 } });
    expect(Object.fromEntries(Object.entries(plan.models).map(([k, m]) => [k, m.model]))).toEqual({
      cheap: 'claude-haiku-4-5',
      mid: 'claude-sonnet-4-5',
      strong: 'claude-opus-4-5',
    });
    const text = JSON.stringify(plan.tasks);
    expect(text).not.toContain('[[sim:');
    expect(text).not.toContain('sim-catalog-key');
    expect(plan.tasks.every((t) => t.maxTokens === undefined)).toBe(true);
    expect(plan.tasks.find((t) => t.id === 'extract')!.prompt).toBe('Look up product {{item.sku}} with the catalog tool and answer with its record.');
    // The judge's criteria lose their scripted scores too.
    expect(plan.tasks.find((t) => t.id === 'seo')!.accept!.judge!.prompt).toBe(
      'Is this page text specific to its product, faithful to the house brief and free of keyword stuffing?',
    );
    expect(plan.defaults.taskTimeoutMs).toBeGreaterThanOrEqual(300_000);
    expect(notes.join('\n')).toMatch(/ANTHROPIC_API_KEY[\s\S]*claude-opus-4-5[\s\S]*removed 10 \[\[sim:\.\.\.\]\] directives[\s\S]*1225 billed model calls \(865 model tasks, 240 of them with a tool round trip, 120 quality-gate judgements\)/);
    // What remains is a valid plan for that environment, the MCP catalog server included.
    const checked = validatePlan(plan, { env: { ANTHROPIC_API_KEY: 'sk-ant-test' }, tools: [] });
    expect(checked.ok ? [] : checked.issues).toEqual([]);
  });

  it('with only OPENAI_API_KEY (and OPENAI_BASE_URL): an openai provider at that URL with GPT models', async () => {
    const env = { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: 'http://127.0.0.1:9999/v1' };
    const { plan } = realPlan(await demo(), env);
    expect(plan.providers.sim).toEqual({ type: 'openai', keys: [{ env: 'OPENAI_API_KEY' }], baseURL: 'http://127.0.0.1:9999/v1', limits: { concurrency: 12 } });
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
        expect(validatePlan(real, { env: { ...env }, baseDir: dir }).ok, file).toBe(true);
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
