/**
 * Real MCP servers in a plan, end to end: server-everything and server-memory over stdio, a
 * project-own server over Streamable HTTP on loopback, and a stdio server that crashes. The model
 * is the simulated provider over real HTTP; its `[[sim:tool ...]]` directives make the calls, and
 * a recording provider keeps every request so the tests can see what reached the model.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, PlanValidationError, startSim, type ProviderRequest, type SimServer } from '../../src/index.js';
import type { ModelCallOutput } from '../../machines/protocol.js';
import { ofType, recordEvents, recordingProvider as recorder, toolResultsOf } from '../helpers/recordingProvider.js';
import { startHttpFixture, type HttpFixture } from '../tools/fixtures/httpServer.js';

const EVERYTHING = { command: process.execPath, args: ['node_modules/@modelcontextprotocol/server-everything/dist/index.js', 'stdio'] };
const MEMORY = 'node_modules/@modelcontextprotocol/server-memory/dist/index.js';
const CRASHY = { command: process.execPath, args: ['test/tools/fixtures/crash-server.mjs'] };

describe('a plan with real MCP servers (stdio and Streamable HTTP)', () => {
  let sim: SimServer;
  let http: HttpFixture;
  let dir: string;
  beforeAll(async () => {
    [sim, http, dir] = await Promise.all([startSim({ seed: 3 }), startHttpFixture(), mkdtemp(join(tmpdir(), 'swarmstate-mcp-'))]);
  });
  afterAll(async () => {
    await Promise.all([sim.close(), http.close(), rm(dir, { recursive: true, force: true })]);
  });

  const servers = () => ({
    everything: EVERYTHING,
    memory: { command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') } },
    // Trusted: its read-only, closed-world `add` may be shared and cached.
    calc: { url: http.url, trusted: true },
  });
  const base = (tasks: unknown[]) => ({
    providers: { main: { type: 'sim' } },
    models: { m: { provider: 'main', model: 'sim-small', maxTokens: 256 } },
    tools: { servers: servers() },
    tasks,
  });

  it('calls every server from sim directives, and each result reaches the next model request', async () => {
    const { provider, requests } = recorder(sim.url);
    const swarm = createSwarm({ providers: { main: provider } });
    const run = swarm.run(
      base([
        { id: 'echo', model: 'm', tools: ['everything.echo'], prompt: 'Say it back. [[sim:tool everything__echo {"message":"hello from the swarm"}]]' },
        {
          id: 'remember',
          model: 'm',
          tools: ['memory.create_entities'],
          prompt: 'Remember Ada. [[sim:tool memory__create_entities {"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]}]]',
        },
        { id: 'recall', model: 'm', deps: ['remember'], tools: ['memory.read_graph'], prompt: 'What do you know? [[sim:tool memory__read_graph {}]]' },
        // Two calls in one turn, to two servers, in parallel.
        { id: 'sum', model: 'm', tools: ['calc.add', 'everything.echo'], prompt: 'Add and echo. [[sim:tool calc__add {"a":2,"b":40}]] [[sim:tool everything__echo {"message":"sum"}]]' },
        // The same sum again, later: the trusted read-only tool answers from the bus's cache.
        { id: 'sum-again', model: 'm', deps: ['sum'], tools: ['calc.add'], prompt: 'Add again. [[sim:tool calc__add {"a":2,"b":40}]]' },
        // Then a tool that fails on the server (after the sum: a call that may write drops the server's cache).
        { id: 'fail', model: 'm', deps: ['sum-again'], tools: ['calc.fail'], prompt: 'Fail. [[sim:tool calc__fail {}]]' },
      ]),
    );
    const events = recordEvents(run);
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    expect(result.totals.completed).toBe(6);

    // Every call was announced and answered on the event stream.
    const called = ofType(events, 'tool:called').map((e) => `${e.taskId}:${e.name}`);
    expect(called.sort()).toEqual([
      'echo:everything.echo',
      'fail:calc.fail',
      'recall:memory.read_graph',
      'remember:memory.create_entities',
      'sum-again:calc.add',
      'sum:calc.add',
      'sum:everything.echo',
    ]);
    // One tool:result per execution: the cached call has none.
    const answered = ofType(events, 'tool:result').map((e) => `${e.name}:${e.isError}`);
    expect(answered.sort()).toEqual(['calc.add:false', 'calc.fail:true', 'everything.echo:false', 'everything.echo:false', 'memory.create_entities:false', 'memory.read_graph:false']);
    expect(ofType(events, 'tool:called').find((e) => e.taskId === 'sum-again')).toMatchObject({ cached: true });
    expect(http.seen.added).toEqual({ '2+40': 1 });

    // The servers' answers are what the model saw in its next request, as tool results.
    expect(toolResultsOf(requests, 'echo')).toEqual([{ type: 'tool_result', toolUseId: expect.any(String), content: 'Echo: hello from the swarm' }]);
    const [created] = toolResultsOf(requests, 'remember');
    expect(created!.isError).toBeUndefined();
    expect(created!.content).toContain('Ada');
    const [graph] = toolResultsOf(requests, 'recall');
    expect(graph!.isError).toBeUndefined();
    expect(JSON.parse(graph!.content)).toMatchObject({ entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] });
    expect(toolResultsOf(requests, 'sum').map((b) => b.content)).toEqual(['42', 'Echo: sum']);
    expect(toolResultsOf(requests, 'sum-again').map((b) => b.content)).toEqual(['42']);
    expect(toolResultsOf(requests, 'fail')).toEqual([
      { type: 'tool_result', toolUseId: expect.any(String), content: expect.stringContaining('the fail tool failed, as designed'), isError: true },
    ]);

    // The model was offered each task's tools under wire-safe names, and only those.
    const first = requests.find((r) => r.meta.taskId === 'sum' && r.meta.turn === 0)!;
    expect(first.tools.map((t) => t.name).sort()).toEqual(['calc__add', 'everything__echo']);
    // The simulator read the results: its answer after a tool round names them.
    expect(result.tasks.sum!.output).toMatch(/^Received 2 tool results from calc__add, everything__echo\./);
    expect(result.tasks.recall!.output).toMatch(/^Received 1 tool result from memory__read_graph\./);
  });

  it('fails the run before any model call when a task names a tool its server does not have', async () => {
    const { provider, requests } = recorder(sim.url);
    const swarm = createSwarm({ providers: { main: provider } });
    const before = sim.stats().requests;
    const run = swarm.run(
      base([
        { id: 'ok', model: 'm', tools: ['everything.echo'], prompt: 'fine' },
        { id: 'bad', model: 'm', tools: ['everything.echo', 'everything.teleport', 'calc.divide'], prompt: 'not fine' },
      ]),
    );
    const events = recordEvents(run);
    const error = await run.result.then(
      () => undefined,
      (e: unknown) => e,
    );
    await swarm.close();

    expect(error).toBeInstanceOf(PlanValidationError);
    expect((error as PlanValidationError).issues).toEqual([
      { path: 'tasks[1].tools[1]', message: 'server "everything" has no tool "teleport"' },
      { path: 'tasks[1].tools[2]', message: 'server "calc" has no tool "divide"' },
    ]);
    expect((error as Error).message).toContain('everything" has no tool "teleport"');
    expect(requests).toEqual([]);
    expect(sim.stats().requests).toBe(before);
    expect(events).toEqual([]);
  });

  it('answers a call to a tool the task may not use with an error result and tool:denied', async () => {
    // A model that calls a tool of the run it was not offered (and one it was), then answers.
    const rogue = (req: ProviderRequest): Promise<ModelCallOutput> | undefined => {
      if (req.meta.taskId !== 'rogue' || req.meta.turn !== 0) return undefined;
      return Promise.resolve({
        content: [
          { type: 'tool_use', id: 'toolu_denied', name: 'memory.read_graph', input: {} },
          { type: 'tool_use', id: 'toolu_allowed', name: 'everything.echo', input: { message: 'allowed' } },
        ],
        stopReason: 'tool_use',
        usage: { inputTokens: 10, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
      });
    };
    const { provider, requests } = recorder(sim.url, rogue);
    const swarm = createSwarm({ providers: { main: provider } });
    const run = swarm.run(base([{ id: 'rogue', model: 'm', tools: ['everything.echo'], prompt: 'Behave.' }]));
    const events = recordEvents(run);
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    const denied = ofType(events, 'tool:denied');
    expect(denied).toHaveLength(1);
    expect(denied[0]).toMatchObject({ taskId: 'rogue', name: 'memory.read_graph', reason: 'task "rogue" may not use tool "memory.read_graph"' });
    // The denied call never reached the bus; the allowed one did.
    expect(ofType(events, 'tool:called').map((e) => e.name)).toEqual(['everything.echo']);
    expect(toolResultsOf(requests, 'rogue')).toEqual([
      { type: 'tool_result', toolUseId: 'toolu_denied', content: 'tool "memory.read_graph" is not available: task "rogue" may not use tool "memory.read_graph"', isError: true },
      { type: 'tool_result', toolUseId: 'toolu_allowed', content: 'Echo: allowed' },
    ]);
    expect(result.tasks.rogue!.output).toMatch(/^Received 2 tool results/);
  });

  // BUG: RunTools.open connects each MCP server with the SDK connection's defaults (8 calls in
  // flight, 60 s per call), not the plan's tools.serverConcurrency / callTimeoutMs, so a plan that
  // allows more than 8 calls per server gets 8 (src/tools/registry.ts, the connectMcpServer call).
  it("runs as many calls at once on a server as the plan's serverConcurrency allows", async () => {
    const { provider } = recorder(sim.url);
    const swarm = createSwarm({ providers: { main: provider } });
    const run = swarm.run({
      // Each call ends once all twelve run at once (20 s at the latest): on a loaded machine the
      // twelve may reach the server far apart, and a fixed sleep would end before the last came.
      ...base(Array.from({ length: 12 }, (_, i) => ({ id: `slow-${i}`, model: 'm', tools: ['calc.slow'], prompt: `Wait ${i}. [[sim:tool calc__slow {"ms":20000,"untilActive":12}]]` }))),
      defaults: { maxInFlight: 12 },
      tools: { servers: { calc: { url: http.url } }, serverConcurrency: 12 },
    });
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    expect(http.seen.slowFinished).toBe(12);
    expect(http.seen.maxActive).toBe(12);
  });

  it('restarts a stdio server that died mid-run once: the call it took down fails, later calls work', async () => {
    const { provider, requests } = recorder(sim.url);
    const swarm = createSwarm({ providers: { main: provider } });
    const run = swarm.run({
      providers: { main: { type: 'sim' } },
      models: { m: { provider: 'main', model: 'sim-small', maxTokens: 256 } },
      tools: { servers: { crashy: CRASHY } },
      tasks: [
        { id: 'before', model: 'm', tools: ['crashy.work'], prompt: 'Work. [[sim:tool crashy__work {}]]' },
        { id: 'crash', model: 'm', deps: ['before'], tools: ['crashy.work'], prompt: 'Crash it. [[sim:tool crashy__work {"crash":true}]]' },
        { id: 'after', model: 'm', deps: ['crash'], tools: ['crashy.work'], prompt: 'Work again. [[sim:tool crashy__work {}]]' },
        { id: 'later', model: 'm', deps: ['after'], tools: ['crashy.work'], prompt: 'And again. [[sim:tool crashy__work {"sleepMs":1}]]' },
      ],
    });
    const events = recordEvents(run);
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('completed');
    const [before] = toolResultsOf(requests, 'before');
    const [crash] = toolResultsOf(requests, 'crash');
    const [after] = toolResultsOf(requests, 'after');
    const [later] = toolResultsOf(requests, 'later');
    expect(before!.content).toMatch(/^pid \d+$/);
    expect(crash).toMatchObject({ isError: true, content: expect.stringMatching(/^tool crashy\.work failed: server "crashy" exited while it ran; the server is being restarted/) });
    expect(crash!.content).toContain('crashing as asked');
    // A new process answers, and keeps answering.
    expect(after!.isError).toBeUndefined();
    expect(after!.content).toMatch(/^pid \d+$/);
    expect(after!.content).not.toBe(before!.content);
    expect(later!.content).toBe(after!.content);
    expect(ofType(events, 'tool:result').map((e) => e.isError)).toEqual([false, true, false, false]);
  });
});
