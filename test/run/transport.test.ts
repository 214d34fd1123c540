/**
 * The two CallTransports side by side: what each hands its backend (an adapter here, a job for
 * the workers) and what comes back. The remote one is driven with a stand-in for the queue (the
 * real queue is covered by test/distributed); the local one with a scripted adapter and real tools.
 */
import { describe, expect, it } from 'vitest';
import type { ToolResult } from '../../machines/protocol.js';
import type { Remote } from '../../src/distributed/lazy.js';
import type { CallJob, CallOutcome } from '../../src/distributed/protocol.js';
import { Keyring } from '../../src/keys.js';
import { parsePlan } from '../../src/plan/index.js';
import { createScriptedProvider } from '../../src/providers/scripted.js';
import type { ProviderRequest } from '../../src/providers/types.js';
import { RunTools } from '../../src/tools/registry.js';
import { localTransport, remoteTransport, type ModelRequest } from '../../src/run/transport.js';

const request: ModelRequest = {
  provider: 'p',
  model: 'claude-haiku-4-5',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
  tools: [],
  maxTokens: 16,
  keyId: 'p:k1',
  meta: { taskId: 't', attempt: 1, turn: 1 },
};

/** A queue stand-in: records every job and answers with `answer`. */
function fakeQueue(answer: (job: CallJob) => CallOutcome) {
  const jobs: CallJob[] = [];
  const forgotten: string[] = [];
  const remote: Remote = {
    call: async (job) => (jobs.push(job), answer(job)),
    forgetRun: (runId) => void forgotten.push(runId),
    close: async () => {},
    connectionErrors: () => ({}),
  };
  return { remote, jobs, forgotten };
}

const config = { providers: {}, tools: { servers: {}, shareable: [] } } as never;

describe('remoteTransport', () => {
  it('sends a model job with the key by id only, and dates the send from the worker\'s measure of the call', async () => {
    const q = fakeQueue(() => ({ ok: true, model: { content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, cacheWriteTokens: 0, cacheReadTokens: 0 } }, callMs: 400 }));
    const out = await remoteTransport(q.remote, 'run1', config).model(request, { signal: new AbortController().signal, now: () => 10_000, onText: () => {} });
    expect(q.jobs).toHaveLength(1);
    expect(q.jobs[0]).toMatchObject({ kind: 'model', runId: 'run1', keyId: 'p:k1', provider: 'p', maxTokens: 16 });
    expect(JSON.stringify(q.jobs[0])).not.toContain('"key"');
    // Late by a margin, never early: the server counted it by its own clock.
    expect(out.sentAt).toBe(10_000 - 400 + 100);
  });

  it('rejects a failed model job as the provider error it carries; a failed tool job with the tool\'s own words', async () => {
    const q = fakeQueue((job) => ({ ok: false, error: { code: job.kind === 'model' ? 'rate_limited' : 'internal', retryable: true, message: `${job.kind} said no` } }));
    const t = remoteTransport(q.remote, 'run1', config);
    await expect(t.model(request, { signal: new AbortController().signal, now: () => 0 })).rejects.toMatchObject({ code: 'rate_limited', message: 'model said no' });
    await expect(t.tool('search', { q: 1 }, new AbortController().signal)).rejects.toThrow('tool said no');
    await expect(t.batch('search', [{ q: 1 }], new AbortController().signal)).rejects.toThrow('batch said no');
  });

  it('carries an idempotency key only when there is one, and forgets the run at its end', async () => {
    const q = fakeQueue((job) => (job.kind === 'batch' ? { ok: true, results: [{ content: 'r', isError: false }] } : { ok: true, text: 'done' }));
    const t = remoteTransport(q.remote, 'run1', config);
    expect(await t.tool('write', { a: 1 }, new AbortController().signal, 'idem-1')).toBe('done');
    expect(await t.tool('read', { a: 1 }, new AbortController().signal)).toBe('done');
    expect(await t.batch('read', [{ a: 1 }], new AbortController().signal)).toEqual([{ content: 'r', isError: false }] satisfies ToolResult[]);
    expect(q.jobs.map((j) => (j.kind === 'tool' ? j.idempotencyKey : j.kind))).toEqual(['idem-1', undefined, 'batch']);
    expect('idempotencyKey' in q.jobs[1]!).toBe(false);
    t.end();
    expect(q.forgotten).toEqual(['run1']);
  });
});

describe('localTransport', () => {
  it('gives the adapter the key\'s secret from the keyring, and passes streaming and response start only when asked', async () => {
    const seen: ProviderRequest[] = [];
    const adapter = createScriptedProvider({ reply: (req) => (seen.push(req), 'hello') });
    const keyring = new Keyring();
    const [keyId] = keyring.addProvider('p', ['sk-test-0123456789'], {});
    const plan = parsePlan({ providers: { p: { type: 'sim' } }, models: { m: { provider: 'p', model: 'claude-haiku-4-5' } }, tasks: [{ id: 't', model: 'm', prompt: 'hi', tools: ['echo'] }] }, { tools: ['echo'] });
    const tools = await RunTools.open(plan, [{ name: 'echo', handler: async (args: unknown) => `echo ${JSON.stringify(args)}` }], {});
    try {
      const t = localTransport(new Map([['p', adapter]]), keyring, tools);
      let started = 0;
      const out = await t.model({ ...request, keyId: keyId! }, { signal: new AbortController().signal, now: () => 0, onResponseStart: () => void started++ });
      expect(out.content).toEqual([{ type: 'text', text: 'hello' }]);
      expect(seen[0]!.key.secret).toBe('sk-test-0123456789');
      expect('keyId' in seen[0]!).toBe(false);
      expect('onText' in seen[0]!).toBe(false);
      expect(started).toBe(1);
      expect(await t.tool('echo', { a: 1 }, new AbortController().signal)).toBe('echo {"a":1}');
      t.end();
    } finally {
      await tools.close();
    }
  });
});
