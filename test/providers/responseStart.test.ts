/**
 * `ProviderRequest.onResponseStart` against the simulated server, for both adapters, streamed
 * and not: called once when a 2xx response starts (before the call resolves), never for an error
 * answer or a connection that fails first, and a throwing callback does not break the call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import { ProviderError } from '../../src/providers/errors.js';
import { createOpenAIProvider } from '../../src/providers/openai.js';
import { createScriptedProvider } from '../../src/providers/scripted.js';
import type { Provider, ProviderRequest } from '../../src/providers/types.js';
import { startSim, type SimServer } from '../../src/sim/index.js';

const TTFT_MS = 150;
let sim: SimServer;
let reset: SimServer;
const adapters: Provider[] = [];

beforeAll(async () => {
  [sim, reset] = await Promise.all([startSim({ seed: 4, latency: { ttftMs: TTFT_MS, tokensPerSecond: 200 }, minCacheTokens: 64 }), startSim({ faults: { reset: 1 } })]);
});
afterAll(async () => {
  await Promise.all(adapters.map((a) => a.close?.()));
  await Promise.all([sim.close(), reset.close()]);
});

type Kind = 'anthropic' | 'openai';
function adapter(kind: Kind, stream: boolean, server: SimServer = sim): Provider {
  const provider = kind === 'anthropic' ? createAnthropicProvider({ baseURL: server.url, stream }) : createOpenAIProvider({ baseURL: `${server.url}/v1`, stream });
  adapters.push(provider);
  return provider;
}

function request(kind: Kind, text: string, overrides: Partial<ProviderRequest> = {}): ProviderRequest {
  return {
    provider: 'sim',
    model: kind === 'anthropic' ? 'claude-sim' : 'gpt-sim',
    system: 'You review patches.',
    messages: [{ role: 'user', content: [{ type: 'text', text }] }],
    tools: [],
    maxTokens: 200,
    key: { id: 'sim:test', secret: 'sk-sim-test' },
    signal: new AbortController().signal,
    meta: { taskId: 't1', attempt: 1, turn: 1 },
    ...overrides,
  };
}

const cases: [Kind, boolean][] = [
  ['anthropic', true],
  ['anthropic', false],
  ['openai', true],
  ['openai', false],
];

describe.each(cases)('onResponseStart: %s, stream %s', (kind, stream) => {
  it('is called once when the response starts, before the call resolves', async () => {
    const events: string[] = [];
    const t0 = performance.now();
    let startedAt = -1;
    let serverDoneAtStart: boolean | undefined;
    // The server counts a request when it has finished answering it.
    const answered = sim.stats().requests;
    const out = await adapter(kind, stream).call(
      request(kind, `Say something. ${kind} ${stream}`, {
        onResponseStart: () => {
          startedAt = performance.now() - t0;
          serverDoneAtStart = sim.stats().requests > answered;
          events.push('start');
        },
      }),
    );
    events.push('resolved');
    expect(events).toEqual(['start', 'resolved']);
    expect(out.stopReason).toBe('end_turn');
    expect(out.content.length).toBeGreaterThan(0);
    if (stream) {
      // The stream begins (headers and first event) after ttft, then the output takes its time
      // (200 tokens/s): the callback comes at the start, while the server is still sending (seen
      // in its log, not on the clock: a loaded machine can stall the client for longer than that).
      expect(startedAt).toBeGreaterThanOrEqual(TTFT_MS * 0.8);
      expect(serverDoneAtStart).toBe(false);
    } else {
      // A plain answer's headers come with its body, after ttft.
      expect(startedAt).toBeGreaterThanOrEqual(TTFT_MS * 0.8);
      expect(serverDoneAtStart).toBe(true);
    }
  });

  it('is not called for an error answer ([[sim:error 500]], [[sim:error 429]])', async () => {
    for (const code of ['500', '429']) {
      let calls = 0;
      const error = await adapter(kind, stream)
        .call(request(kind, `Fail please. [[sim:error ${code}]]`, { onResponseStart: () => void calls++ }))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error, code).toBeInstanceOf(ProviderError);
      expect(calls, code).toBe(0);
    }
  });

  it('is not called when the connection fails before any answer', async () => {
    let calls = 0;
    await expect(adapter(kind, stream, reset).call(request(kind, 'Hello.', { onResponseStart: () => void calls++ }))).rejects.toBeInstanceOf(ProviderError);
    expect(calls).toBe(0);
  });

  it('does not let a throwing callback break the call', async () => {
    let calls = 0;
    const out = await adapter(kind, stream).call(
      request(kind, `Throw in the callback. ${kind} ${stream}`, {
        onResponseStart: () => {
          calls++;
          throw new Error('callback failure');
        },
      }),
    );
    expect(calls).toBe(1);
    expect(out.content.length).toBeGreaterThan(0);
  });
});

describe('onResponseStart for cache-aware fan-out', () => {
  it('Anthropic, streamed: a sibling sent when the first response starts reads the prefix it wrote', async () => {
    const provider = adapter('anthropic', true);
    const system = `The shared brief. ${'Context that every sibling task repeats. '.repeat(40)}`;
    let sibling: Promise<Awaited<ReturnType<Provider['call']>>> | undefined;
    const first = await provider.call(
      request('anthropic', 'Task one.', {
        system,
        onResponseStart: () => {
          sibling = provider.call(request('anthropic', 'Task two.', { system }));
        },
      }),
    );
    expect(first.usage.cacheWriteTokens).toBeGreaterThan(0);
    expect(sibling).toBeDefined();
    const second = await sibling!;
    expect(second.usage.cacheReadTokens).toBeGreaterThan(0);
  });

  it('Anthropic, streamed: a stream that fails mid-way has started, so the callback fires before the call rejects', async () => {
    const faulty = await startSim({ faults: { streamError: 1 } });
    try {
      let calls = 0;
      await expect(adapter('anthropic', true, faulty).call(request('anthropic', 'Hello.', { onResponseStart: () => void calls++ }))).rejects.toBeInstanceOf(ProviderError);
      expect(calls).toBe(1);
    } finally {
      await faulty.close();
    }
  });
});

describe('onResponseStart in the scripted provider', () => {
  it('is called once when the script answers, and not when it throws', async () => {
    let calls = 0;
    const provider = createScriptedProvider((_request, n) => {
      if (n === 1) throw new Error('scripted fault');
      return 'ok';
    });
    await provider.call(request('anthropic', 'a', { onResponseStart: () => void calls++ }));
    expect(calls).toBe(1);
    await expect(provider.call(request('anthropic', 'b', { onResponseStart: () => void calls++ }))).rejects.toThrow();
    expect(calls).toBe(1);
  });
});
