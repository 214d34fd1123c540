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
