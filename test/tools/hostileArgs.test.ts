/**
 * Tool arguments a model sends, checked against the tool's schema in a run: a schema with `$id`
 * seen twice (two tools sharing it, one server listed by two runs in one process) checks every
 * call; a pattern that backtracks for ever on JavaScript's engine meets a hostile argument and the
 * run completes, the call answered with an error the model sees.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startSim, type SimServer, type ToolDefinition } from '../../src/index.js';
import { recordingProvider, toolResultsOf } from '../helpers/recordingProvider.js';

const exec = promisify(execFile);
const SCHEMA_SERVER = { command: process.execPath, args: [fileURLToPath(new URL('./fixtures/schema-server.mjs', import.meta.url))] };
const HOSTILE_RUN = fileURLToPath(new URL('./fixtures/hostileArgsRun.ts', import.meta.url));

let sim: SimServer;
beforeAll(async () => {
  sim = await startSim({ seed: 11 });
});
afterAll(() => sim.close());

const plan = (tasks: unknown[], servers: Record<string, unknown> = {}) => ({
  providers: { main: { type: 'sim' } },
  models: { m: { provider: 'main', model: 'sim-small', maxTokens: 256 } },
  tools: { servers },
  tasks,
});

const seen = (requests: Parameters<typeof toolResultsOf>[0], id: string) => toolResultsOf(requests, id).map((b) => ({ isError: b.isError === true, content: b.content }));

describe('a tool schema with $id seen twice', () => {
  it('two local tools sharing one $id schema both refuse bad arguments and run good ones', async () => {
    const args = { $id: 'https://example.com/schemas/sku', type: 'object', properties: { sku: { type: 'string', pattern: '^SKU-\\d+$' } }, required: ['sku'] };
    const ran: string[] = [];
    // Each tool its own copy of the schema, as two modules that import one JSON file would have.
    const tools: ToolDefinition<{ sku: string }>[] = ['lookup', 'stock'].map((name) => ({
      name,
      inputSchema: JSON.parse(JSON.stringify(args)) as Record<string, unknown>,
      handler: ({ sku }) => (ran.push(`${name} ${sku}`), `${name} ${sku}`),
    }));
    const { provider, requests } = recordingProvider(sim.url);
    const swarm = createSwarm({ store: false, tools, providers: { main: provider } });
    try {
      const result = await swarm.run(
        plan([
          { id: 'a', model: 'm', tools: ['lookup'], prompt: 'Look. [[sim:tool lookup {"sku":"SKU-1"}]] [[sim:tool lookup {"sku":"one"}]]' },
          { id: 'b', model: 'm', tools: ['stock'], prompt: 'Stock. [[sim:tool stock {"sku":"SKU-2"}]] [[sim:tool stock {"sku":"two"}]]' },
        ]),
      ).result;
      expect(result.status).toBe('completed');
      expect(ran.sort()).toEqual(['lookup SKU-1', 'stock SKU-2']);
      expect(seen(requests, 'a')).toEqual([
        { isError: false, content: 'lookup SKU-1' },
        { isError: true, content: 'invalid arguments for "lookup": /sku must match pattern "^SKU-\\d+$"' },
      ]);
      expect(seen(requests, 'b')).toEqual([
        { isError: false, content: 'stock SKU-2' },
        { isError: true, content: 'invalid arguments for "stock": /sku must match pattern "^SKU-\\d+$"' },
      ]);
    } finally {
      await swarm.close();
    }
  });

  it('one MCP server (two tools, one $id schema) listed by two runs in one process: every run checks every call', async () => {
    const { provider, requests } = recordingProvider(sim.url);
    const swarm = createSwarm({ store: false, providers: { main: provider } });
    try {
      for (const run of ['first', 'second']) {
        const result = await swarm.run(
          plan(
            [
              { id: `${run}-lookup`, model: 'm', tools: ['shop.lookup'], prompt: `Look (${run}). [[sim:tool shop__lookup {"sku":"SKU-7"}]] [[sim:tool shop__lookup {"sku":"seven"}]]` },
              { id: `${run}-stock`, model: 'm', tools: ['shop.stock'], prompt: `Stock (${run}). [[sim:tool shop__stock {"sku":8}]]` },
            ],
            { shop: SCHEMA_SERVER },
          ),
        ).result;
        expect(result.status, run).toBe('completed');
        expect(seen(requests, `${run}-lookup`), run).toEqual([
          { isError: false, content: 'lookup got "SKU-7"' },
          { isError: true, content: 'invalid arguments for "shop.lookup": /sku must match pattern "^SKU-\\d+$"' },
        ]);
        expect(seen(requests, `${run}-stock`), run).toEqual([{ isError: true, content: 'invalid arguments for "shop.stock": /sku must be string' }]);
      }
    } finally {
      await swarm.close();
    }
  });
});

describe('a tool pattern that backtracks for ever on JavaScript\'s engine', () => {
  // In a child process, so that a check that blocks its thread ends in the child's kill (the
  // bound below, a hang guard), not in a hung suite.
  it('a hostile argument (10,000 a\'s and a !) gets a failed check at once, or at the time bound, and the run completes', async () => {
    const { stdout } = await exec(process.execPath, ['--import', 'tsx', HOSTILE_RUN], { timeout: 170_000, env: { ...process.env, SWARMSTATE_STORE: 'memory' } });
    const out = JSON.parse(stdout) as { status: string; tasks: Record<string, string>; results: Record<string, { isError: boolean; content: string }[]>; handled: Record<string, number[]> };
    expect(out.status).toBe('completed');
    expect(out.tasks).toEqual({ linear: 'completed', lookahead: 'completed', batched: 'completed' });
    // Linear time: refused by the check, as any argument that does not match; the good one runs.
    expect(out.results.linear).toEqual([
      { isError: true, content: 'invalid arguments for "check": /code must match pattern "^(a+)+$"' },
      { isError: false, content: 'checked 4' },
    ]);
    // A lookahead: JavaScript's engine in a worker, stopped at its bound; the call fails clearly.
    expect(out.results.lookahead).toEqual([
      {
        isError: true,
        content:
          'invalid arguments for "lookahead": checking the pattern /^(?=(a+)+$)/ took more than 1000 ms and was stopped ' +
          '(a pattern with lookaround or backreferences runs on a backtracking engine, with this time bound; without them it runs in linear time)',
      },
    ]);
    // A batch tool: the bad call gets its error, the good one runs in the batch.
    expect(out.results.batched).toEqual([
      { isError: true, content: 'invalid arguments for "batch": /code must match pattern "^(a+)+$"' },
      { isError: false, content: 'batched 3' },
    ]);
    expect(out.handled).toEqual({ check: [4], lookahead: [], batch: [3] });
  });
});
