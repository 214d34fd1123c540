/**
 * What one streamed call costs the adapter beyond a plain undici program making the same call
 * (the peer of the inflight bench), counted rather than timed: the promises created per call.
 * With thousands of calls in flight each promise is CPU and garbage; the adapter's frame
 * (exchange, the reply's limits, the SSE parse) should add a handful, not double-digit counts.
 */
import { createHook } from 'node:async_hooks';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import { createOpenAIProvider } from '../../src/providers/openai.js';
import type { Provider } from '../../src/providers/types.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { peerCall } from '../bench/inflightPeer.js';

let sim: SimServer;
beforeAll(async () => {
  sim = await startSim({ seed: 1, latency: { ttftMs: 0, tokensPerSecond: 1_000_000 } });
});
afterAll(async () => {
  await sim.close();
});

/** Promises created per call while `n` calls made by `call` run at once (after a warm-up). */
async function promisesPerCall(call: (i: number) => Promise<unknown>, n = 50): Promise<number> {
  await Promise.all(Array.from({ length: 10 }, (_, i) => call(1_000_000 + i)));
  let count = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') count++;
    },
  });
  hook.enable();
  try {
    await Promise.all(Array.from({ length: n }, (_, i) => call(i)));
  } finally {
    hook.disable();
  }
  return count / n;
}

const request = (i: number) => ({
  provider: 'p',
  model: 'sim-fast',
  messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: `Task ${i}.` }] }],
  tools: [],
  maxTokens: 16,
  key: { id: 'p:test', secret: 'sk-test' },
  signal: new AbortController().signal,
  meta: { taskId: `t${i}`, attempt: 1, turn: 1 },
});

describe('a streamed call: promises beyond a plain undici call', () => {
  it.each([
    ['anthropic', (url: string) => createAnthropicProvider({ baseURL: url })],
    ['openai', (url: string) => createOpenAIProvider({ baseURL: `${url}/v1` })],
  ] as const)('%s makes no more than the peer', async (_name, make) => {
    const pool = new Pool(sim.url);
    const provider: Provider = make(sim.url);
    try {
      const peer = await promisesPerCall((i) => peerCall(pool, `Call ${i}.`, 16));
      const adapter = await promisesPerCall((i) => provider.call(request(i)));
      // Earlier: an async post awaiting undici's import each call and an async generator between
      // the body and the adapter's loop (11 more than the peer for the Anthropic adapter); then
      // the body's own async iterator (a promise a chunk and its end: 5 more than the peer). The
      // body is now read by its events, as the peer's `for await` does not (3 fewer than it).
      expect(adapter - peer).toBeLessThanOrEqual(0);
    } finally {
      await provider.close?.();
      await pool.close();
    }
  });
});
