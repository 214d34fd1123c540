/** definePlan at run time: the plan comes back as given, and runs as any plan does. */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createScriptedProvider, createSwarm, definePlan, validatePlan } from '../../src/index.js';
import { refused } from './definePlan.typecheck.js';

describe('definePlan', () => {
  it('returns the plan unchanged; it validates and runs', async () => {
    const written = {
      providers: { llm: { type: 'sim' as const } },
      models: { fast: { provider: 'llm', model: 'small' } },
      tasks: [
        { id: 'facts', model: 'fast', prompt: 'facts' },
        { id: 'poem', model: 'fast', prompt: 'poem from {{facts}}', deps: ['facts'] },
      ],
    };
    const plan = definePlan(written);
    expect(plan).toBe(written);
    expect(validatePlan(plan).ok).toBe(true);
    const swarm = createSwarm({ store: false, providers: { llm: createScriptedProvider((req) => `answer for ${req.meta.taskId}`) } });
    const result = await swarm.run(plan).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(result.tasks[plan.tasks[1].id]!.output).toBe('answer for poem');
  });

  it("types a map's output as its items' outputs and a reduce's as its root's, as they are at run time", async () => {
    const Row = z.object({ name: z.string(), n: z.number() });
    const Total = z.object({ total: z.number() });
    const plan = definePlan({
      providers: { llm: { type: 'custom' } },
      models: { fast: { provider: 'llm', model: 'small' } },
      tasks: [
        { id: 'texts', kind: 'map', items: { values: ['a', 'b', 'c'] }, model: 'fast', prompt: 'Say {{item}}' },
        { id: 'rows', kind: 'map', items: { values: ['x', 'y', 'z'] }, model: 'fast', prompt: 'Describe {{item}}', output: { schema: Row } },
        { id: 'merged', kind: 'reduce', over: 'texts', model: 'fast', prompt: 'Merge {{inputs}}' },
        { id: 'total', kind: 'reduce', over: 'rows', fanIn: 2, model: 'fast', prompt: 'Add {{inputs}}', output: { schema: Total } },
      ],
    });
    // An item's answer that is JSON is parsed, any other stays text; reduce groups all answer alike.
    const answers: Record<string, string> = { 'texts/0': 'plain text', 'texts/1': '42', 'texts/2': '{"a":1}', 'rows/0': '{"name":"x","n":0}', 'rows/1': '{"name":"y","n":1}', 'rows/2': '{"name":"z","n":2}' };
    const llm = createScriptedProvider((req) => answers[req.meta.taskId] ?? (req.meta.taskId.startsWith('total/') ? '{"total":3}' : `merged by ${req.meta.taskId}`));
    const swarm = createSwarm({ store: false, providers: { llm } });
    const result = await swarm.run(plan).result;
    await swarm.close();
    expect(result.status).toBe('completed');

    expectTypeOf(result.tasks.texts.output).toEqualTypeOf<unknown[] | undefined>();
    expect(result.tasks.texts.output).toEqual(['plain text', 42, { a: 1 }]);
    expectTypeOf(result.tasks.rows.output).toEqualTypeOf<{ name: string; n: number }[] | undefined>();
    expect(result.tasks.rows.output).toEqual([{ name: 'x', n: 0 }, { name: 'y', n: 1 }, { name: 'z', n: 2 }]);
    expectTypeOf(result.tasks.merged.output).toEqualTypeOf<string | undefined>();
    expect(result.tasks.merged.output).toBe('merged by merged/L1/0');
    expectTypeOf(result.tasks.total.output).toEqualTypeOf<{ total: number } | undefined>();
    expect(result.tasks.total.output).toEqual({ total: 3 });
    expect(result.tasks['total/L2/0']).toBeDefined();
  });

  it('each plan whose shape the types refuse is refused by validate, with the message named', () => {
    expect(refused.length).toBe(34);
    for (const { says, plan } of refused) {
      const result = validatePlan(plan, { env: {} });
      expect(result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`), says).toEqual([says]);
    }
  });
});
