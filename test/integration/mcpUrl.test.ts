/**
 * An MCP server's URL and the token it may carry (`?api_key=...`): given as `{ "env": NAME }` it
 * is read when the run connects (and again by a resume), never journaled; given inline, the
 * journal stores it without its credentials and a resume takes it from the plan given again.
 * Real parts: the project-own MCP server over Streamable HTTP on loopback, the simulated provider
 * over HTTP, SQLite journal files read as bytes.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, parsePlan, PlanValidationError, RunTools, SqliteStore, startSim, ToolSetupError, type Plan, type SimServer } from '../../src/index.js';
import { recordingProvider } from '../helpers/recordingProvider.js';
import { startHttpFixture, type HttpFixture } from '../tools/fixtures/httpServer.js';

const TOKEN = 'urlEnvToken-0123456789abcdef';
const TOKEN_AGAIN = 'urlEnvTokenAgain-9876543210';

let sim: SimServer;
let dir: string;
let fixtures: HttpFixture[] = [];
beforeAll(async () => {
  sim = await startSim({ seed: 5 });
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-mcpurl-'));
});
afterAll(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(fixtures.map((f) => f.close()));
  fixtures = [];
});

async function serve(): Promise<HttpFixture> {
  const fixture = await startHttpFixture();
  fixtures.push(fixture);
  return fixture;
}

/** Two tasks, one after the other, each adding on the `docs` server. */
const plan = (url: unknown) => ({
  providers: { main: { type: 'sim' } },
  models: { m: { provider: 'main', model: 'sim-small', maxTokens: 128 } },
  tools: { servers: { docs: { url } } },
  tasks: [
    { id: 'first', model: 'm', tools: ['docs.add'], prompt: 'Add. [[sim:tool docs__add {"a":1,"b":2}]]' },
    { id: 'second', model: 'm', deps: ['first'], tools: ['docs.add'], prompt: 'Add more. [[sim:tool docs__add {"a":3,"b":4}]]' },
  ],
});

function swarmOf(env: Record<string, string>, store: string) {
  const { provider, requests } = recordingProvider(sim.url);
  return { swarm: createSwarm({ env, store, providers: { main: provider } }), requests };
}

/** Everything SQLite wrote: the database file and its write-ahead log. */
function journalBytes(file: string): string {
  return [file, `${file}-wal`].map((f) => (existsSync(f) ? readFileSync(f).toString('latin1') : '')).join('');
}

function storedPlan(file: string, runId: string): { tools: { servers: { docs: { url: unknown } } } } {
  const store = new SqliteStore(file);
  try {
    return store.getRun(runId)!.plan as ReturnType<typeof storedPlan>;
  } finally {
    store.close();
  }
}

describe('an MCP server URL from the environment', () => {
  it('connects, its tool works, and the journal holds {"env": NAME}, never the URL or its token', async () => {
    const docs = await serve();
    const file = join(dir, 'env-url.db');
    const { swarm } = swarmOf({ DOCS_URL: `${docs.url}?api_key=${TOKEN}` }, file);
    const run = swarm.run(plan({ env: 'DOCS_URL' }));
    const result = await run.result;
    const whileOpen = journalBytes(file);
    await swarm.close();

    expect(result.status).toBe('completed');
    expect(docs.seen.added).toEqual({ '1+2': 1, '3+4': 1 });
    // The server was reached at the URL the variable holds, token included.
    expect(docs.seen.urls.length).toBeGreaterThan(0);
    for (const url of docs.seen.urls) expect(url).toBe(`/mcp?api_key=${TOKEN}`);

    expect(storedPlan(file, run.id).tools.servers.docs.url).toEqual({ env: 'DOCS_URL' });
    for (const bytes of [whileOpen, journalBytes(file)]) {
      expect(bytes).toContain('DOCS_URL');
      expect(bytes.includes(TOKEN)).toBe(false);
      expect(bytes.includes(docs.url)).toBe(false);
    }
  });

  it('a variable not set or empty is a plan error with its path, and nothing runs', async () => {
    const docs = await serve();
    const file = join(dir, 'env-url-missing.db');
    for (const env of [{}, { DOCS_URL: '' }] as Record<string, string>[]) {
      const { swarm, requests } = swarmOf(env, file);
      let error: unknown;
      try {
        swarm.run(plan({ env: 'DOCS_URL' }));
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PlanValidationError);
      expect((error as PlanValidationError).issues).toEqual([{ path: 'tools.servers.docs.url.env', message: 'environment variable DOCS_URL is not set' }]);
      expect(swarm.runs()).toEqual([]);
      await swarm.close();
      expect(requests).toHaveLength(0);
    }
    expect(docs.seen.urls).toEqual([]);
  });

  it('a resume reads the variable again: the rest of the run goes to the URL it holds now', async () => {
    const before = await serve();
    const after = await serve();
    const file = join(dir, 'env-url-resume.db');
    const first = swarmOf({ DOCS_URL: `${before.url}?api_key=${TOKEN}` }, file);
    const run = first.swarm.run(plan({ env: 'DOCS_URL' }));
    run.events.on('task:completed', (e) => {
      if (e.taskId === 'first') run.cancel('stop after the first task');
    });
    expect((await run.result).status).toBe('cancelled');
    await first.swarm.close();
    expect(before.seen.added).toEqual({ '1+2': 1 });

    const again = swarmOf({ DOCS_URL: `${after.url}?api_key=${TOKEN_AGAIN}` }, file);
    const result = await again.swarm.resume(run.id).result;
    await again.swarm.close();
    expect(result.status).toBe('completed');
    expect(after.seen.added).toEqual({ '3+4': 1 });
    expect(before.seen.added).toEqual({ '1+2': 1 });
    for (const url of after.seen.urls) expect(url).toBe(`/mcp?api_key=${TOKEN_AGAIN}`);
    const bytes = journalBytes(file);
    expect(bytes.includes(TOKEN)).toBe(false);
    expect(bytes.includes(TOKEN_AGAIN)).toBe(false);
  });

  it('a failed connect names the variable, not the URL (a token may be in its path)', async () => {
    const file = join(dir, 'env-url-refused.db');
    // Nothing listens on port 1: the connect fails at once.
    const { swarm, requests } = swarmOf({ DOCS_URL: `http://127.0.0.1:1/mcp/pathToken-0123456789?api_key=${TOKEN}` }, file);
    const run = swarm.run(plan({ env: 'DOCS_URL' }));
    const error = await run.result.then(
      () => undefined,
      (e: unknown) => e,
    );
    await swarm.close();
    expect(error).toBeInstanceOf(ToolSetupError);
    const message = (error as ToolSetupError).message;
    expect(message).toContain('could not connect to MCP server "docs" (the URL in environment variable DOCS_URL)');
    expect(requests).toHaveLength(0);
    for (const text of [message, journalBytes(file)]) {
      expect(text.includes('pathToken-0123456789')).toBe(false);
      expect(text.includes(TOKEN)).toBe(false);
    }
  });
});

describe('the tools of a worker, whose environment lacks the URL', () => {
  it('fail to open, naming the variable', async () => {
    // A worker opens the run's tools from the plan's tool settings and its own environment.
    const { tools } = parsePlan(plan({ env: 'DOCS_URL' }), { env: { DOCS_URL: 'http://127.0.0.1:1/mcp' } });
    const error = await RunTools.open({ tools } as Plan, [], {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ToolSetupError);
    expect((error as ToolSetupError).issues).toEqual([{ path: 'tools.servers.docs', message: "cannot connect: environment variable DOCS_URL (the server's url) is not set" }]);
  });
});

describe('an inline MCP server URL with a token', () => {
  it('is journaled without its query values; a resume takes the URL from the plan given again', async () => {
    const docs = await serve();
    const file = join(dir, 'inline-url.db');
    const inline = plan(`${docs.url}?api_key=${TOKEN}`);
    const first = swarmOf({}, file);
    const run = first.swarm.run(inline);
    run.events.on('task:completed', (e) => {
      if (e.taskId === 'first') run.cancel('stop after the first task');
    });
    expect((await run.result).status).toBe('cancelled');
    const whileOpen = journalBytes(file);
    await first.swarm.close();

    // Where the server was, without the token; and the whole URL's fingerprint, for the resume.
    expect(storedPlan(file, run.id).tools.servers.docs.url).toMatch(new RegExp(`^\\[redacted [0-9a-f]{8}\\] ${docs.url.replace(/[.]/g, '\\.')}\\?api_key=\\.\\.\\.$`));
    for (const bytes of [whileOpen, journalBytes(file)]) expect(bytes.includes(TOKEN)).toBe(false);

    const again = swarmOf({}, file);
    try {
      // The run was not started from a file: the URL is asked for, as inline keys and headers are.
      expect(() => again.swarm.resume(run.id)).toThrow(/pass the plan again/);
      expect(() => again.swarm.resume(run.id, { plan: plan(`${docs.url}?api_key=other-token-value`) })).toThrow(/at: tools\.servers\.docs\.url$/);
      const result = await again.swarm.resume(run.id, { plan: inline }).result;
      expect(result.status).toBe('completed');
    } finally {
      await again.swarm.close();
    }
    expect(docs.seen.added).toEqual({ '1+2': 1, '3+4': 1 });
    for (const url of docs.seen.urls) expect(url).toBe(`/mcp?api_key=${TOKEN}`);
    expect(journalBytes(file).includes(TOKEN)).toBe(false);
  });
});
