/**
 * A server that answers 429 to everything (a key throttled to zero, a gateway that refuses all):
 * a 429 uses no retry, so without an end to it each attempt would wait out its whole deadline.
 * Each key that meets nothing but 429s for its provider's `maxRateLimitedMs` is set aside, and
 * once none is left the tasks fail `rate_limited` at once. Real loopback HTTP against the
 * simulator (a key with `rpm: 0` refuses every request: 429, Retry-After 1 s).
 *
 * The deadline (20 s) is far above `maxRateLimitedMs` (300 ms), so a task that ends
 * `task_timeout` waited out its deadline: the end this guards against.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createSwarm, type RunEvent } from '../../src/index.js';
import { validatePlan } from '../../src/plan/index.js';
import { formatEventLine } from '../../src/cli/format.js';

const SECRETS = ['sk-zero-aaaaaaaa', 'sk-zero-bbbbbbbb'];

const throttledPlan = () => ({
  providers: { zero: { type: 'sim', keys: SECRETS, maxRateLimitedMs: 300, sim: { limits: { rpm: 0 } } } },
  models: { m: { provider: 'zero', model: 'sim-m' } },
  defaults: { maxRetries: 2, taskTimeoutMs: 20_000, maxInFlight: 4 },
  tasks: Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `task ${i} [[sim:reply done-${i}]]` })),
});

describe('a provider that answers 429 to everything', () => {
  it('sets each key aside after maxRateLimitedMs of nothing but 429s, then fails every task rate_limited in one attempt', async () => {
    const swarm = createSwarm({ seed: 1 });
    const run = swarm.run(throttledPlan());
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const result = await run.result;
    await swarm.close();

    expect(result.status).toBe('failed');
    for (const task of Object.values(result.tasks)) {
      expect(task).toMatchObject({ status: 'failed', attempts: 1, retries: 0, error: { code: 'rate_limited', retryable: false, provider: 'zero' } });
    }
    const setAside = events.filter((e): e is Extract<RunEvent, { type: 'key:set-aside' }> => e.type === 'key:set-aside');
    expect(setAside.map((e) => e.keyId).sort()).toEqual(events.filter((e) => e.type === 'key:state' && e.state === 'setAside').map((e) => (e as { keyId: string }).keyId).sort());
    expect(setAside).toHaveLength(2);
    for (const e of setAside) {
      expect(e.provider).toBe('zero');
      expect(e.keyId.startsWith('zero:')).toBe(true);
      expect(e.rateLimitedMs).toBeGreaterThanOrEqual(300);
      expect(e.responses).toBeGreaterThanOrEqual(1);
      expect(formatEventLine(e)).toBe(`key      ${e.keyId} SET ASIDE: nothing but 429s for ${e.rateLimitedMs} ms (${e.responses} response${e.responses === 1 ? '' : 's'})`);
    }
    // Every request the tasks made was refused: none billed, none retried as an error.
    expect(events.filter((e) => e.type === 'model:response')).toEqual([]);
    const text = JSON.stringify(events) + JSON.stringify(result);
    for (const secret of SECRETS) expect(text).not.toContain(secret);
  });

  it('refuses a maxRateLimitedMs that is not a positive number of ms a timer can hold, naming its path', () => {
    for (const [value, message] of [
      [0, 'must be a positive integer'],
      [1.5, 'must be an integer'],
      ['2m', 'expected a number, got a string'],
      [2 ** 31, 'must be at most 2147483647 ms (about 24.8 days)'],
    ] as const) {
      const plan = { ...throttledPlan(), providers: { zero: { ...throttledPlan().providers.zero, maxRateLimitedMs: value } } };
      const result = validatePlan(plan, { env: {} });
      expect(result.ok).toBe(false);
      expect(result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`)).toContainEqual(`providers.zero.maxRateLimitedMs: ${message}`);
    }
    expect(validatePlan(throttledPlan(), { env: {} }).ok).toBe(true);
  });
});

const QUOTA_BODIES = {
  // As OpenAI answers a spent quota (test/fixtures/openai/errors).
  openai: JSON.stringify({ error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } }),
  // Anthropic says a reached spend limit as a 429 rate_limit_error, often with a long Retry-After.
  anthropic: JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: "This request would exceed your account's monthly spend limit. Please try again later." }, request_id: 'req_spend' }),
} as const;

describe('429 insufficient_quota', () => {
  it.each([
    ['openai', 'no Retry-After', {}],
    ['openai', 'a Retry-After', { 'retry-after': '60' }],
    ['openai', 'a Retry-After and x-ratelimit headers', { 'retry-after': '1', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '1s' }],
    ['anthropic', 'no Retry-After', {}],
    ['anthropic', 'a Retry-After', { 'retry-after': '3600' }],
  ] as const)('stays a permanent error (%s, %s): the task fails spend_cap on its first answer, with no wait and no key set aside', async (type, _headers, headers) => {
    let requests = 0;
    const server: Server = createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        res.writeHead(429, { 'content-type': 'application/json', ...headers });
        res.end(QUOTA_BODIES[type]);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const baseURL = type === 'openai' ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`;
      const swarm = createSwarm({ seed: 1 });
      const run = swarm.run({
        providers: { quota: { type, baseURL, keys: ['sk-quota-aaaaaaaa'], maxRateLimitedMs: 300 } },
        models: { m: { provider: 'quota', model: type === 'openai' ? 'gpt-4o-mini' : 'claude-x' } },
        defaults: { maxRetries: 3, taskTimeoutMs: 20_000 },
        tasks: [{ id: 'a', model: 'm', prompt: 'hi' }],
      });
      const events: RunEvent[] = [];
      run.events.on('*', (_t, e) => events.push(e as RunEvent));
      const result = await run.result;
      await swarm.close();
      expect(result.tasks.a).toMatchObject({ status: 'failed', attempts: 1, retries: 0, requests: 1, error: { code: 'spend_cap', retryable: false, status: 429 } });
      expect(result.tasks.a!.error!.message).toMatch(/raise the limit or add credits; this is not retried/);
      expect(requests).toBe(1);
      expect(events.filter((e) => e.type === 'key:set-aside' || e.type === 'key:backoff')).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
