/**
 * Tools as users of the AI SDK and zod write them, through the whole runtime on the simulator
 * over real HTTP: a ToolDefinition with a zod schema, AI SDK tool()s (zod and jsonSchema()),
 * given as an array and as a record. The simulator receives JSON Schema (zod's, not its
 * internals); each tool runs with the arguments checked and parsed (zod's default filled in)
 * and the model's id of the call; arguments the schema refuses never reach the tool.
 */
import { jsonSchema, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSwarm, startSim, type SimServer, type SwarmTools } from '../../src/index.js';
import { recordingProvider, toolResultsOf } from '../helpers/recordingProvider.js';

let sim: SimServer;
beforeAll(async () => {
  sim = await startSim({ seed: 28 });
});
afterAll(() => sim.close());

interface Ran {
  tool: string;
  args: unknown;
  callId: string | undefined;
  signal: boolean;
}

/** The three tools, each writing down what it ran with. */
function toolsOf(ran: Ran[]) {
  const weather = {
    description: 'The weather in a city',
    inputSchema: z.object({ city: z.string().describe('City name'), days: z.number().int().default(3) }),
    handler: (args: { city: string; days: number }, ctx: { signal: AbortSignal; toolCallId?: string }) => {
      ran.push({ tool: 'weather', args, callId: ctx.toolCallId, signal: ctx.signal instanceof AbortSignal });
      return `sunny in ${args.city} for ${args.days} days`;
    },
  };
  const convert = tool({
    description: 'Converts an amount',
    inputSchema: z.object({ amount: z.number(), to: z.enum(['EUR', 'USD']) }),
    execute: async (input, { toolCallId, abortSignal }) => {
      ran.push({ tool: 'convert', args: input, callId: toolCallId, signal: abortSignal instanceof AbortSignal });
      return { amount: input.amount * 2, currency: input.to };
    },
  });
  const echo = tool({
    description: 'Says it back',
    inputSchema: jsonSchema<{ text: string }>({ type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'], additionalProperties: false }),
    execute: async ({ text }, { toolCallId, abortSignal }) => {
      ran.push({ tool: 'echo', args: { text }, callId: toolCallId, signal: abortSignal instanceof AbortSignal });
      return text;
    },
  });
  return { weather, convert, echo };
}

const shapes: Record<string, (ran: Ran[]) => SwarmTools> = {
  record: (ran) => toolsOf(ran),
  array: (ran) => {
    const { weather, convert, echo } = toolsOf(ran);
    return [{ name: 'weather', ...weather }, { ...convert, name: 'convert' }, { ...echo, name: 'echo' }];
  },
};

describe.each(Object.keys(shapes))('tools given as %s', (shape) => {
  it('offers JSON Schema to the model and runs each tool with its checked, parsed arguments and call id', async () => {
    const ran: Ran[] = [];
    const { provider, requests } = recordingProvider(sim.url);
    const swarm = createSwarm({ store: false, providers: { main: provider }, tools: shapes[shape]!(ran) });
    sim.resetStats();
    const run = swarm.run({
      providers: { main: { type: 'sim' } },
      models: { m: { provider: 'main', model: 'sim-small', maxTokens: 128 } },
      tasks: [
        {
          id: 'good',
          model: 'm',
          tools: ['weather', 'convert', 'echo'],
          prompt: 'Use them. [[sim:tool weather {"city":"Oslo"}]] [[sim:tool convert {"amount":5,"to":"EUR"}]] [[sim:tool echo {"text":"hi"}]]',
        },
        {
          id: 'bad',
          model: 'm',
          tools: ['weather', 'convert', 'echo'],
          prompt: 'Get them wrong. [[sim:tool weather {"city":5}]] [[sim:tool convert {"amount":5,"to":"GBP"}]] [[sim:tool echo {"text":""}]]',
        },
      ],
    });
    const result = await run.result;
    await swarm.close();
    expect(result.status).toBe('completed');

    // What the simulator received over HTTP: zod's JSON Schema (the input side), not its internals.
    const offered = sim.stats().log.find((e) => e.call?.startsWith('good;'))!.tools!;
    const byName = Object.fromEntries(offered.map((t) => [t.name, t]));
    expect(Object.keys(byName).sort()).toEqual(['convert', 'echo', 'weather']);
    expect(byName.weather).toEqual({
      name: 'weather',
      description: 'The weather in a city',
      inputSchema: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { city: { type: 'string', description: 'City name' }, days: { type: 'integer', default: 3, minimum: expect.any(Number), maximum: expect.any(Number) } },
        required: ['city'],
      },
    });
    expect(byName.convert!.inputSchema).toMatchObject({ type: 'object', properties: { amount: { type: 'number' }, to: { type: 'string', enum: ['EUR', 'USD'] } }, required: ['amount', 'to'] });
    expect(byName.echo!.inputSchema).toEqual({ type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'], additionalProperties: false });
    expect(JSON.stringify(offered)).not.toMatch(/_zod|"def"|~standard/);

    // Each tool ran once, for the good task only: zod's default filled in, the model's call id given.
    const results = toolResultsOf(requests, 'good');
    expect(ran.map((r) => r.tool).sort()).toEqual(['convert', 'echo', 'weather']);
    const of = (name: string) => ran.find((r) => r.tool === name)!;
    expect(of('weather')).toMatchObject({ args: { city: 'Oslo', days: 3 }, signal: true });
    expect(of('convert')).toMatchObject({ args: { amount: 5, to: 'EUR' }, signal: true });
    expect(of('echo')).toMatchObject({ args: { text: 'hi' }, signal: true });
    expect(ran.map((r) => r.callId).sort()).toEqual(results.map((b) => b.toolUseId).sort());
    expect(results.map((b) => b.content).sort()).toEqual(['hi', JSON.stringify({ amount: 10, currency: 'EUR' }), 'sunny in Oslo for 3 days'].sort());

    // The bad task's arguments were refused by the JSON Schema before any tool ran.
    const refused = toolResultsOf(requests, 'bad');
    expect(refused).toHaveLength(3);
    for (const block of refused) {
      expect(block.isError).toBe(true);
      expect(block.content).toMatch(/^invalid arguments for "(weather|convert|echo)": /);
    }
  });
});
