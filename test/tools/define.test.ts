/**
 * createSwarm({ tools }) as users arrive with them (src/tools/define.ts, schema.ts): arrays and
 * records, JSON Schema, zod (classic and mini), AI SDK jsonSchema()/lazySchema()/tool(), and a
 * definition that cannot work refused at createSwarm with its name and every problem at once.
 */
import { jsonSchema, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as zm from 'zod/mini';
import * as z3 from 'zod/v3';
import { createSwarm, ToolDefinitionError, type SwarmTools } from '../../src/index.js';
import { toolDefinitions } from '../../src/tools/define.js';
import { toolInputOf } from '../../src/tools/schema.js';

const signal = new AbortController().signal;
const only = (given: SwarmTools) => {
  const defs = toolDefinitions(given);
  expect(defs).toHaveLength(1);
  return defs[0]!;
};
/** The refusal's issues, thrown at createSwarm. */
function refusal(given: unknown): { path: string; message: string }[] {
  try {
    createSwarm({ store: false, tools: given as SwarmTools });
  } catch (error) {
    expect(error).toBeInstanceOf(ToolDefinitionError);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/^createSwarm\(\{ tools \}\): \d+ problems?/);
    return (error as ToolDefinitionError).issues;
  }
  throw new Error('createSwarm accepted the tools');
}

describe('input schemas', () => {
  it('keeps JSON Schema as given, and says type "object" for an object schema that did not', () => {
    const schema = { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] };
    expect(toolInputOf(schema)).toEqual({ jsonSchema: schema });
    const bare = { properties: { n: { type: 'number' } } };
    expect(toolInputOf(bare)).toEqual({ jsonSchema: { type: 'object', properties: { n: { type: 'number' } } } });
    expect(bare).not.toHaveProperty('type');
    expect(toolInputOf(undefined)).toEqual({ jsonSchema: { type: 'object' } });
  });

  it("converts a zod schema with zod's own JSON Schema (draft-07, the input side: a default is optional)", () => {
    const input = toolInputOf(z.object({ city: z.string().describe('the city'), days: z.number().int().default(3) }));
    expect(input).toMatchObject({
      jsonSchema: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { city: { type: 'string', description: 'the city' }, days: { type: 'integer', default: 3 } },
        required: ['city'],
      },
    });
  });

  it('converts a zod/mini schema (no converter on the schema) with z.toJSONSchema', () => {
    const input = toolInputOf(zm.object({ q: zm.string() }));
    expect(input).toMatchObject({ jsonSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } });
  });

  it('reads an AI SDK jsonSchema() and lazySchema(), and a Standard Schema that writes JSON Schema', () => {
    const json = { type: 'object', properties: { a: { type: 'string' } } } as const;
    expect(toolInputOf(jsonSchema(json))).toMatchObject({ jsonSchema: json });
    // lazySchema() (@ai-sdk/provider-utils) is a function that makes the wrapper.
    expect(toolInputOf(() => jsonSchema(json))).toMatchObject({ jsonSchema: json });
    const standard = {
      '~standard': { version: 1, vendor: 'other', validate: (value: unknown) => ({ value }), jsonSchema: { input: () => json, output: () => json } },
    };
    expect(toolInputOf(standard)).toMatchObject({ jsonSchema: json });
  });

  it('parses with the schema itself: zod defaults and transforms reach the tool, its refusals are invalid arguments', async () => {
    const input = toolInputOf(z.object({ city: z.string().transform((s) => s.toUpperCase()), days: z.number().default(3) }));
    if ('problem' in input) throw new Error(input.problem);
    expect(await input.parse!({ city: 'oslo' })).toEqual({ value: { city: 'OSLO', days: 3 } });
    const refined = toolInputOf(z.object({ n: z.number().refine((n) => n % 2 === 0, 'must be even') }));
    if ('problem' in refined) throw new Error(refined.problem);
    expect(await refined.parse!({ n: 3 })).toEqual({ issues: '/n must be even' });
  });
});

describe('tools given as users write them', () => {
  it('runs our handler with the parsed arguments and the call id', async () => {
    const seen: unknown[] = [];
    const def = only([{ name: 'weather', inputSchema: z.object({ city: z.string(), days: z.number().default(3) }), handler: (args, ctx) => seen.push(args, ctx.toolCallId) }]);
    expect(def.inputSchema).toMatchObject({ type: 'object', required: ['city'] });
    await def.handler({ city: 'Oslo' }, { signal, toolCallId: 'call_1' });
    expect(seen).toEqual([{ city: 'Oslo', days: 3 }, 'call_1']);
  });

  it("runs an AI SDK tool() in a record through execute, with the call id and the abort signal", async () => {
    const calls: { input: unknown; toolCallId: string; abortSignal: AbortSignal | undefined; messages: unknown[] }[] = [];
    const weather = tool({
      description: 'The weather in a city',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }, { toolCallId, abortSignal, messages }) => {
        calls.push({ input: { city }, toolCallId, abortSignal, messages });
        return { city, sky: 'clear' };
      },
    });
    const def = only({ weather });
    expect(def).toMatchObject({ name: 'weather', description: 'The weather in a city', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } });
    expect(await def.handler({ city: 'Oslo' }, { signal, toolCallId: 'call_7' })).toEqual({ city: 'Oslo', sky: 'clear' });
    expect(calls).toEqual([{ input: { city: 'Oslo' }, toolCallId: 'call_7', abortSignal: signal, messages: [] }]);
  });

  it('takes the last value of an AI SDK tool whose execute streams (an async generator)', async () => {
    const def = only({
      progress: tool({
        inputSchema: jsonSchema<{ n: number }>({ type: 'object', properties: { n: { type: 'number' } } }),
        async *execute({ n }) {
          yield 'working';
          yield `done ${n}`;
        },
      }),
    });
    expect(await def.handler({ n: 2 }, { signal })).toBe('done 2');
  });

  it('keeps annotations, shareable and a batch handler, and checks each batched call with the schema', async () => {
    const def = only([
      {
        name: 'get',
        inputSchema: z.object({ k: z.number().refine((k) => k > 0, 'must be positive') }),
        annotations: { readOnlyHint: true },
        shareable: true,
        handler: ({ k }) => k,
        batchHandler: async (calls) => calls.map(({ k }) => k * 10),
      },
    ]);
    expect(def).toMatchObject({ annotations: { readOnlyHint: true }, shareable: true });
    const out = await def.batchHandler!([{ k: 1 }, { k: -1 }, { k: 2 }], { signal });
    expect(out[0]).toBe(10);
    expect(out[1]).toBeInstanceOf(Error);
    expect((out[1] as Error).message).toBe('invalid arguments for "get": /k must be positive');
    expect(out[2]).toBe(20);
  });
});

describe('the type of the tools option', () => {
  it('takes the shapes above and refuses what cannot be a tool, with no any to let it through', () => {
    const handler = (args: { q: string }) => args.q;
    const fine: SwarmTools[] = [
      [{ name: 'a', handler }],
      { a: { handler }, b: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q }) },
      [{ ...tool({ inputSchema: jsonSchema<{ q: string }>({ type: 'object' }), execute: ({ q }) => q }), name: 'c' }],
    ];
    expect(fine).toHaveLength(3);
    // @ts-expect-error a handler that is not a function
    const notFn: SwarmTools = [{ name: 'a', handler: 'run' }];
    // @ts-expect-error a tool in an array says its name
    const noName: SwarmTools = [{ handler }];
    // @ts-expect-error a number is no tool
    const num: SwarmTools = [1];
    // @ts-expect-error an input schema that is a string
    const str: SwarmTools = { a: { inputSchema: 'q: string', handler } };
    expect([notFn, noName, num, str]).toHaveLength(4);
  });
});

describe('refused at createSwarm', () => {
  it('lists every wrong definition at once, each with its name and the problem', () => {
    const ok = { name: 'ok', handler: () => 'fine' };
    const issues = refusal([
      ok,
      { handler: () => 1 },
      { name: 'noRun', inputSchema: { type: 'object' } },
      { name: 'notFn', handler: 'run me' },
      { name: 'both', handler: () => 1, execute: () => 2 },
      { name: 'num', inputSchema: 42, handler: () => 1 },
      { name: 'str', inputSchema: z.string(), handler: () => 1 },
      { name: 'json', inputSchema: { type: 'array' }, handler: () => 1 },
      { name: 'union', inputSchema: { anyOf: [{ type: 'object' }, { type: 'string' }] }, handler: () => 1 },
      { name: 'date', inputSchema: z.object({ when: z.date() }), handler: () => 1 },
      { name: 'v3', inputSchema: z3.z.object({ a: z3.z.string() }), handler: () => 1 },
      { name: 'shape', inputSchema: { a: z.string() }, handler: () => 1 },
      { name: 'old', parameters: z.object({}), execute: () => 1 },
      { name: 'broken', inputSchema: { type: 'object', properties: { a: { type: 'no-such-type' } } }, handler: () => 1 },
      { ...ok },
    ]);
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i.message]));
    expect(issues.map((i) => i.path)).toEqual([
      'tools[1]',
      'tools[2] ("noRun")',
      'tools[3] ("notFn")',
      'tools[4] ("both")',
      'tools[5] ("num")',
      'tools[6] ("str")',
      'tools[7] ("json")',
      'tools[8] ("union")',
      'tools[9] ("date")',
      'tools[10] ("v3")',
      'tools[11] ("shape")',
      'tools[12] ("old")',
      'tools[13] ("broken")',
      'tools[14] ("ok")',
    ]);
    expect(byPath['tools[1]']).toMatch(/has no name/);
    expect(byPath['tools[2] ("noRun")']).toMatch(/nothing to run: give handler/);
    expect(byPath['tools[3] ("notFn")']).toBe('handler is a string, not a function');
    expect(byPath['tools[4] ("both")']).toMatch(/both handler and execute/);
    expect(byPath['tools[5] ("num")']).toMatch(/^inputSchema is a number/);
    expect(byPath['tools[6] ("str")']).toMatch(/not an object schema \(type "string"\)/);
    expect(byPath['tools[7] ("json")']).toMatch(/not an object schema \(type "array"\)/);
    expect(byPath['tools[8] ("union")']).toMatch(/no "type": "object" at the top/);
    expect(byPath['tools[9] ("date")']).toMatch(/zod cannot express inputSchema in JSON Schema: Date cannot be represented/);
    expect(byPath['tools[10] ("v3")']).toMatch(/zod 3 schema/);
    expect(byPath['tools[11] ("shape")']).toMatch(/wrap it in z\.object/);
    expect(byPath['tools[12] ("old")']).toMatch(/parameters.*call it inputSchema/);
    expect(byPath['tools[13] ("broken")']).toMatch(/not a JSON Schema ajv can check/);
    expect(byPath['tools[14] ("ok")']).toBe('the name "ok" is taken by tools[0]: tool names must differ');
  });

  it("refuses a record entry whose own name is not its key, a provider-defined tool, and tools that are neither array nor object", () => {
    expect(refusal({ lookup: { name: 'find', handler: () => 1 }, search: { type: 'provider', id: 'x.search', args: {} } })).toEqual([
      { path: 'tools.lookup', message: 'its name is "find", not its key "lookup": in a record the key is the name (drop name, or make them the same)' },
      { path: 'tools.search', message: expect.stringMatching(/provider-defined AI SDK tool/) },
    ]);
    expect(refusal('lookup')).toEqual([{ path: 'tools', message: expect.stringMatching(/^tools is a string: give an array/) }]);
    expect(refusal([() => 1])).toEqual([{ path: 'tools[0]', message: expect.stringMatching(/not a function/) }]);
  });

  it('accepts a record of tools (the name from the key) and an array, all shapes together', () => {
    const swarm = createSwarm({
      store: false,
      tools: {
        a: tool({ inputSchema: z.object({ x: z.string() }), execute: async ({ x }) => x }),
        b: { inputSchema: { type: 'object' }, handler: () => 'b' },
        c: { name: 'c', description: 'c', handler: () => 'c' },
      },
    });
    void swarm.close();
    const swarm2 = createSwarm({ store: false, tools: [{ ...tool({ inputSchema: jsonSchema({ type: 'object' }), execute: () => 1 }), name: 'd' }] });
    void swarm2.close();
  });
});
