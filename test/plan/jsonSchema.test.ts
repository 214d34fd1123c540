/**
 * The plan's JSON Schema (schema/plan.schema.json, shipped in the package): what the build writes
 * is what the zod schema gives now, every example plan passes it, a typo fails it, and a plan may
 * name it in `$schema` (which the run then ignores).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planJsonSchema } from '../../src/plan/jsonSchema.js';
import { validatePlan } from '../../src/plan/index.js';
import { ROOT } from '../store/helpers.js';

const require = createRequire(import.meta.url);
const { Ajv } = require('ajv') as typeof import('ajv');
const shipped = JSON.parse(readFileSync(join(ROOT, 'schema/plan.schema.json'), 'utf8')) as Record<string, unknown>;
const check = new Ajv({ allErrors: true, strict: false, validateFormats: false }).compile(shipped);
const EXAMPLES = ['plans/hello.json', 'plans/review.json', 'plans/fallback.json', 'plans/planner.json', 'plans/catalog-small.json', 'catalog-swarm/plan.json'];
const readExample = (name: string) => JSON.parse(readFileSync(join(ROOT, 'examples', name), 'utf8')) as Record<string, unknown>;

describe('the plan JSON Schema', () => {
  it('is what the zod schema gives (the build wrote the current one)', () => {
    expect(shipped).toEqual(planJsonSchema());
  });

  it.each(EXAMPLES)('accepts examples/%s', (name) => {
    expect(check(readExample(name)), JSON.stringify(check.errors)).toBe(true);
  });

  it('rejects a misspelt field and a wrong type, as validatePlan does', () => {
    const plan = readExample('plans/hello.json');
    const tasks = plan.tasks as Array<Record<string, unknown>>;
    expect(check({ ...plan, tasks: [{ ...tasks[0], promt: 'typo' }] })).toBe(false);
    expect(check({ ...plan, models: { m: { provider: 'p', model: 'x', temperature: 'hot' } } })).toBe(false);
  });

  it('takes an MCP server url inline or as {"env": NAME}, as validatePlan does', () => {
    const plan = readExample('plans/hello.json');
    const withUrl = (url: unknown) => ({ ...plan, tools: { servers: { docs: { url } } } });
    expect(check(withUrl('https://mcp.example.com/mcp')), JSON.stringify(check.errors)).toBe(true);
    expect(check(withUrl({ env: 'DOCS_URL' })), JSON.stringify(check.errors)).toBe(true);
    expect(check(withUrl({ env: 'DOCS_URL', value: 'x' }))).toBe(false);
    expect(check(withUrl(5))).toBe(false);
  });

  it('holds each kind`s rules: what it requires, and the fields it does not take (another kind`s, a model call`s on a function step)', () => {
    const plan = readExample('plans/hello.json');
    const withTasks = (...tasks: unknown[]) => ({ ...plan, tasks });
    const accepted = [
      [{ id: 'fetch', kind: 'fn', fn: 'fetchOrders', output: { schema: { type: 'array' } }, maxRetries: 2 }],
      [{ id: 'each', kind: 'map', items: { values: [1] }, fn: 'enrich', key: 'id' }],
      [{ id: 'each', kind: 'map', items: { values: [1] }, model: 'm', prompt: '{{item}}' }],
      [{ id: 'all', kind: 'reduce', over: ['a'], fn: 'merge' }],
      [{ id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send?', maxRounds: 2, timeoutMs: 1000 }],
      [{ id: 'plain', model: 'm', prompt: 'p' }],
    ];
    for (const tasks of accepted) expect(check(withTasks(...tasks)), JSON.stringify(tasks)).toBe(true);
    const refused = [
      { id: 'fetch', kind: 'fn' },
      { id: 'fetch', kind: 'fn', fn: 'go', model: 'm' },
      { id: 'fetch', kind: 'fn', fn: 'go', prompt: 'p' },
      { id: 'fetch', kind: 'fn', fn: 'fetch-orders' },
      { id: 'each', kind: 'map', items: { values: [1] } },
      { id: 'each', kind: 'map', items: { values: [1] }, fn: 'go', model: 'm', prompt: 'p' },
      { id: 'each', kind: 'map', items: { values: [1] }, fn: 'go', as: 'row' },
      { id: 'all', kind: 'reduce', over: ['a'], fn: 'go', fanIn: 2 },
      { id: 'ok', kind: 'approval', prompt: 'Send?' },
      { id: 'ok', kind: 'approval', approves: 'draft' },
      { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send?', model: 'm' },
      { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send?', output: { schema: {} } },
      { id: 'plain', prompt: 'p' },
      { id: 'plain', model: 'm', prompt: 'p', fn: 'go' },
      { id: 'plain', model: 'm', prompt: 'p', approves: 'x' },
      { id: 'rev', kind: 'review', model: 'm', prompt: 'p' },
    ];
    for (const task of refused) expect(check(withTasks(task)), JSON.stringify(task)).toBe(false);
  });

  it('lets a plan name it in $schema; validatePlan ignores it, and says so when it is not a string', () => {
    const plan = { $schema: '../../schema/plan.schema.json', ...readExample('plans/hello.json') };
    expect(check(plan)).toBe(true);
    const result = validatePlan(plan, { env: {} });
    expect(result.ok, JSON.stringify(!result.ok && result.issues)).toBe(true);
    if (result.ok) expect(result.plan).not.toHaveProperty('$schema');
    const bad = validatePlan({ ...plan, $schema: 5 }, { env: {} });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.issues).toEqual([expect.objectContaining({ path: expect.stringContaining('$schema'), message: expect.stringContaining('must be a string') })]);
  });
});
