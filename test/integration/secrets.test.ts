/**
 * Secrets that come back: a provider endpoint that echoes the API key in a successful reply, and
 * an MCP server that prints and echoes the token of its config (stderr, results, errors, its
 * dying words). The CLI runs as a real child process against a real local HTTP endpoint (a proxy
 * in front of the simulator that echoes the request's key) and a real stdio MCP server; no
 * secret may reach the model (request bodies), --json, --events, --report, stderr, or the
 * journal's bytes.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimServer } from '../../src/index.js';

const exec = promisify(execFile);
const BIN = resolve('bin/swarmstate.js');
const LEAKY = resolve('test/fixtures/mcp/leaky-server.mjs');

const KEY = 'sk-echoed-secret-0123456789';
const GH_TOKEN = 'ghp_leakedTokenValue0123456789';
const INLINE = 'inline-"quoted"-secret-42';
const SECRETS = [KEY, GH_TOKEN, INLINE, JSON.stringify(INLINE).slice(1, -1)];

let sim: SimServer;
let proxy: Server;
let proxyUrl: string;
let dir: string;
/** The bodies of the requests that reached the endpoint: what the model saw. */
const bodies: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-secrets-'));
  sim = await startSim({ seed: 4 });
  // A hostile (or broken) endpoint: a 200 reply whose text has ECHOKEY replaced by the caller's key.
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      bodies.push(body);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
      fetch(`${sim.url}${req.url}`, { method: req.method, headers, body })
        .then(async (reply) => {
          const text = (await reply.text()).replaceAll('ECHOKEY', String(req.headers['x-api-key'] ?? ''));
          res.writeHead(reply.status, { 'content-type': reply.headers.get('content-type') ?? 'application/json' });
          res.end(text);
        })
        .catch((error: Error) => {
          res.writeHead(502);
          res.end(error.message);
        });
    });
  });
  await new Promise<void>((ready) => proxy.listen(0, '127.0.0.1', ready));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((done) => proxy.close(done));
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

function bytesOf(file: string): string {
  return existsSync(file) ? readFileSync(file).toString('latin1') : '';
}

describe('secrets echoed back to the run', () => {
  it('a key echoed in a 200 reply and an MCP token in stderr, results and errors reach no output, no model and no journal', async () => {
    const plan = {
      providers: { p: { type: 'anthropic', baseURL: proxyUrl, keys: [{ env: 'ECHO_KEY' }] } },
      models: { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 } },
      defaults: { onFailure: 'continue' },
      tools: { servers: { gh: { command: process.execPath, args: [LEAKY], env: { GH_TOKEN: { env: 'LEAK_GH_TOKEN' }, GH_AUTH: `Bearer ${INLINE}` } } } },
      tasks: [
        { id: 'echo', model: 'm', prompt: '[[sim:reply the key is ECHOKEY]]' },
        { id: 'next', model: 'm', deps: ['echo'], prompt: 'Check this: {{echo}}' },
        { id: 'who', model: 'm', tools: ['gh.whoami'], prompt: 'Who am I? [[sim:tool gh__whoami {}]]' },
        { id: 'refused', model: 'm', tools: ['gh.refuse'], prompt: 'Try. [[sim:tool gh__refuse {}]]' },
        { id: 'crash', model: 'm', deps: ['who', 'refused'], tools: ['gh.crash'], prompt: 'Crash it. [[sim:tool gh__crash {}]]' },
      ],
    };
    const planFile = join(dir, 'plan.json');
    writeFileSync(planFile, JSON.stringify(plan));
    const db = join(dir, 'runs.db');
    const events = join(dir, 'events.ndjson');
    const report = join(dir, 'report.html');
    const { stdout, stderr } = await exec(process.execPath, [BIN, 'run', planFile, '--json', '--store', db, '--events', events, '--report', report], {
      env: { ...process.env, SWARMSTATE_STORE: '', ECHO_KEY: KEY, LEAK_GH_TOKEN: GH_TOKEN },
      timeout: 120_000,
    }).catch((error: { stdout: string; stderr: string }) => error);
    const result = JSON.parse(stdout) as { status: string; tasks: Record<string, { status: string; output?: string }> };
    expect(result.status, stderr).toBe('completed');

    // The echo happened, and what came out of it names the key, not the secret.
    expect(result.tasks.echo!.output).toMatch(/^the key is \[redacted p:[0-9a-f]{8}\]$/);
    // The tool results reached the model, redacted: the token's setting is named instead.
    const toModel = bodies.join('\n');
    expect(toModel).toContain('[redacted tools.servers.gh.env.GH_TOKEN]');
    expect(toModel).toContain('[redacted tools.servers.gh.env.GH_AUTH]');
    expect(toModel).toMatch(/exited while it ran[^"]*server stderr[^"]*fatal: rejected token \[redacted tools\.servers\.gh\.env\.GH_TOKEN\]/);

    const places = {
      model: toModel,
      json: stdout,
      stderr,
      events: readFileSync(events, 'utf8'),
      report: readFileSync(report, 'utf8'),
      journal: bytesOf(db) + bytesOf(`${db}-wal`),
    };
    expect(places.events).toContain('"type":"task:completed"');
    expect(places.journal).toContain('the key is [redacted');
    for (const [where, text] of Object.entries(places)) {
      for (const secret of SECRETS) expect(text.includes(secret), `${where} holds a secret`).toBe(false);
    }
  }, 150_000);
});
