/**
 * A plan model's sampling settings (temperature, topP, stopSequences) reach the wire on both
 * protocols, through the whole run (plan -> resolve -> agent -> adapter): real runs against the
 * simulator, which checks the fields as the real APIs do, behind a loopback proxy that records
 * every request body. A model without them sends none.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm } from '../../src/swarm.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { validatePlan } from '../../src/plan/index.js';

let sim: SimServer;
let proxy: Server;
let proxyUrl: string;
const bodies: Array<{ path: string; body: Record<string, unknown> }> = [];

beforeAll(async () => {
  sim = await startSim({ seed: 3 });
  const target = new URL(sim.url);
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      bodies.push({ path: req.url ?? '', body: JSON.parse(raw.toString() || '{}') as Record<string, unknown> });
      const out = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      out.end(raw);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => proxy.close(resolve));
  await sim.close();
});

const env = { SAMPLING_KEY: 'sk-sampling-test-key' };

function plan() {
  return {
    providers: {
      a: { type: 'anthropic', baseURL: proxyUrl, keys: [{ env: 'SAMPLING_KEY' }] },
      o: { type: 'openai', baseURL: `${proxyUrl}/v1`, keys: [{ env: 'SAMPLING_KEY' }] },
    },
    models: {
      tuned: { provider: 'a', model: 'claude-haiku-4-5', maxTokens: 32, temperature: 0.2, topP: 0.9, stopSequences: ['END'] },
      tunedOpenAI: { provider: 'o', model: 'gpt-4o-mini', maxTokens: 32, temperature: 1.5, topP: 0.5, stopSequences: ['###', 'STOP'] },
      plain: { provider: 'a', model: 'claude-haiku-4-5', maxTokens: 32 },
    },
    tasks: [
      { id: 'anthropic', model: 'tuned', prompt: 'anthropic task' },
      { id: 'openai', model: 'tunedOpenAI', prompt: 'openai task' },
      { id: 'plain', model: 'plain', prompt: 'plain task' },
    ],
  };
}

const bodyOf = (prompt: string) => {
  const found = bodies.find((b) => JSON.stringify(b.body.messages).includes(prompt));
  expect(found, `a request for "${prompt}"`).toBeDefined();
  return found!.body;
};

describe('model sampling settings', () => {
  it('reach the request on both protocols, and the simulator accepts them', async () => {
    const swarm = createSwarm({ env, store: false, seed: 1 });
    const result = await swarm.run(plan()).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(bodyOf('anthropic task')).toMatchObject({ temperature: 0.2, top_p: 0.9, stop_sequences: ['END'] });
    expect(bodyOf('openai task')).toMatchObject({ temperature: 1.5, top_p: 0.5, stop: ['###', 'STOP'] });
    const plain = bodyOf('plain task');
    for (const field of ['temperature', 'top_p', 'stop_sequences', 'stop']) expect(plain).not.toHaveProperty(field);
  });

  it('the simulator refuses values the real APIs refuse, naming the field', async () => {
    const post = async (path: string, body: Record<string, unknown>) => {
      const res = await fetch(sim.url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k', authorization: 'Bearer k', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    };
    const messages = [{ role: 'user', content: 'hi' }];
    const anthropic = await post('/v1/messages', { model: 'claude-haiku-4-5', max_tokens: 8, messages, temperature: 1.5 });
    expect(anthropic.status).toBe(400);
    expect(anthropic.text).toContain('temperature');
    const openai = await post('/v1/chat/completions', { model: 'gpt-4o-mini', messages, stop: ['a', 'b', 'c', 'd', 'e'] });
    expect(openai.status).toBe(400);
    expect(openai.text).toContain('stop');
  });

  it('are checked in the plan, with the path of each bad value', () => {
    const bad = plan();
    Object.assign(bad.models.tuned, { temperature: 1.5 }); // over Anthropic's 1
    Object.assign(bad.models.tunedOpenAI, { topP: 0, stopSequences: [] });
    Object.assign(bad.models.plain, { temperature: 3 });
    const result = validatePlan(bad, { env });
    expect(result.ok).toBe(false);
    const paths = result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
    expect(paths).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^models\.tuned\.temperature: must be at most 1 on an Anthropic provider/),
        expect.stringMatching(/^models\.tunedOpenAI\.topP: must be greater than 0/),
        expect.stringMatching(/^models\.tunedOpenAI\.stopSequences: must list at least one/),
        expect.stringMatching(/^models\.plain\.temperature: must be at most 2/),
      ]),
    );
  });
});
