/**
 * No secret of the run reaches a model through a tool: every tool outcome, local (in-process) or
 * remote (MCP), single or batched, result or error (an Error, a frozen Error, a thrown string or
 * plain object, a batch handler that throws), is redacted on the one path all tool outcomes take
 * before they enter a conversation. The provider records every request it is sent (the Anthropic
 * adapter to the simulator over loopback): none holds the key.
 */
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startSim, type SimServer, type ToolDefinition } from '../../src/index.js';
import { recordingProvider, toolResultsOf } from '../helpers/recordingProvider.js';

const KEY = 'sk-tool-leak-0123456789abcdef';
const LEAKY = resolve('test/fixtures/mcp/leaky-server.mjs');

let sim: SimServer;
beforeAll(async () => {
  sim = await startSim({ seed: 11 });
});
afterAll(() => sim.close());

const noArgs = { type: 'object', properties: {} };
/** A tool that is read-only (not journaled as a side effect) or not (journaled), for both paths. */
const tool = (name: string, readOnly: boolean, handler: ToolDefinition['handler']): ToolDefinition => ({
  name,
  inputSchema: noArgs,
  ...(readOnly ? { annotations: { readOnlyHint: true, openWorldHint: true } } : {}),
  handler,
});

const tools: ToolDefinition[] = [
  tool('returns', true, () => `the key is ${KEY}`),
  tool('returnsJson', false, () => ({ nested: { key: KEY } })),
  tool('throws', false, () => {
    throw new Error(`denied for ${KEY}`);
  }),
  tool('throwsFrozen', true, () => {
    throw Object.freeze(new Error(`frozen ${KEY}`));
  }),
  tool('throwsString', false, () => {
    throw `a string with ${KEY}`;
  }),
  tool('throwsObject', true, () => {
    throw { reason: `an object with ${KEY}` };
  }),
  {
    name: 'batchy',
    inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
    batchHandler: async (calls: { n: number }[]) => calls.map((c) => (c.n === 1 ? `batch result ${KEY}` : new Error(`batch error ${KEY}`))),
    handler: () => 'unused',
  },
  {
    name: 'batchThrows',
    inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
    batchHandler: async () => {
      throw new Error(`the whole batch failed: ${KEY}`);
    },
    handler: () => 'unused',
  },
];

const call = (name: string, args = '{}') => `[[sim:tool ${name} ${args}]]`;

describe('tool outcomes are redacted before they enter a conversation', () => {
  it('a local tool that returns, throws (Error, frozen Error, string, object), a batch, and an MCP tool: the provider never sees the key', async () => {
    const { provider, requests } = recordingProvider(sim.url);
    const swarm = createSwarm({ providers: { p: provider }, tools, env: { GH: KEY } });
    const run = swarm.run({
      providers: { p: { type: 'sim', keys: [KEY] } },
      models: { m: { provider: 'p', model: 'sim-small', maxTokens: 128 } },
      // The MCP server is given the key as its token, and echoes it in a result and an error.
      tools: { servers: { gh: { command: process.execPath, args: [LEAKY], env: { GH_TOKEN: { env: 'GH' } } } }, batchWindowMs: 50 },
      defaults: { maxTurns: 2 },
      tasks: [
        { id: 'local', model: 'm', tools: ['returns', 'returnsJson', 'throws', 'throwsFrozen', 'throwsString', 'throwsObject'], prompt: `Use them. ${['returns', 'returnsJson', 'throws', 'throwsFrozen', 'throwsString', 'throwsObject'].map((n) => call(n)).join(' ')}` },
        { id: 'batch', model: 'm', tools: ['batchy', 'batchThrows'], prompt: `Batch. ${call('batchy', '{"n":1}')} ${call('batchy', '{"n":2}')} ${call('batchThrows', '{"n":1}')} ${call('batchThrows', '{"n":2}')}` },
        { id: 'mcp', model: 'm', tools: ['gh.whoami', 'gh.refuse'], prompt: `Ask. ${call('gh__whoami')} ${call('gh__refuse')}` },
      ],
    });
    const result = await run.result;
    await swarm.close();
    expect(result.status, JSON.stringify(result.tasks)).toBe('completed');

    // Every outcome reached the model, each with the key's id in place of the key.
    const results = (task: string) => toolResultsOf(requests, task);
    expect(results('local')).toHaveLength(6);
    expect(results('batch')).toHaveLength(4);
    expect(results('mcp')).toHaveLength(2);
    const redacted = /\[redacted (p:[0-9a-f]{8}|tools\.servers\.gh\.env\.GH_TOKEN)\]/;
    for (const r of [...results('local'), ...results('batch'), ...results('mcp')]) expect(r.content, r.content).toMatch(redacted);
    expect(results('local').map((r) => r.isError === true)).toEqual([false, false, true, true, true, true]);
    expect(results('batch').map((r) => r.isError === true)).toEqual([false, true, true, true]);
    expect(results('local')[3]!.content).toMatch(/^frozen \[redacted p:[0-9a-f]{8}\]$/);
    expect(results('local')[5]!.content).toContain('an object with [redacted');

    // What the model was sent, every turn of every task: no key.
    const sent = JSON.stringify(requests.map((r) => ({ system: r.system, messages: r.messages })));
    expect(sent).not.toContain(KEY);
    // Nor the result.
    expect(JSON.stringify(result)).not.toContain(KEY);
  }, 60_000);
});
