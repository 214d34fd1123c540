import { describe, expect, it } from 'vitest';
import type { ContentBlock } from '../../machines/protocol.js';
import { addUsage, ZERO_USAGE } from '../../machines/protocol.js';
import { backoffDelay } from '../../machines/random.js';
import { leaseTokensOf, requestTokensOf, type AgentContext } from '../../machines/agent/context.js';
import {
  agentInput,
  createAgentHarness,
  modelError,
  textReply,
  toolReply,
  usage,
  type AgentHarness,
} from '../helpers/harness.js';

// ---------------------------------------------------------------------------------------------
// Behaviour against the real pool, keys, breaker and bus
// ---------------------------------------------------------------------------------------------

/** Runs until every started agent has reported (bounded: a hang fails the test instead of looping). */
async function runUntilSettled(h: AgentHarness, ids: string[], maxMs = 120_000): Promise<void> {
  await h.advance(0);
  for (let t = 0; t < maxMs && ids.some((id) => h.output(id) === undefined); t += 1_000) await h.advance(1_000);
}

describe('agentMachine: a model call', () => {
  it('completes with the reply text on a plain reply, and gives the key back', async () => {
    const h = createAgentHarness({ model: () => textReply('Hello.', usage(12, 3, 4)) });
    const id = h.start(agentInput());
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'completed', output: 'Hello.', usage: usage(12, 3, 4), requests: 1, retries: 0, turns: 1 });
    expect(h.calls[0].input).toMatchObject({ taskId: 't1', attempt: 1, turn: 0, keyId: 'A', messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }] });
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
    expect(h.breaker().context.failures).toBe(0);
    expect(h.reports.map((e) => e.type).filter((t) => t.startsWith('model:'))).toEqual(['model:request', 'model:response']);
  });

  it('sends every tool call to the bus and returns the results in the model order, errors flagged, then runs the next turn', async () => {
    const pending = new Map<string, { resolve: (s: string) => void; reject: (e: Error) => void }>();
    const h = createAgentHarness({
      model: (_, n) => (n === 0 ? toolReply([{ id: 'u1', name: 'search', input: { q: 'a' } }, { id: 'u2', name: 'fail' }], usage(10, 5)) : textReply('Found it.', usage(30, 7))),
      executeTool: (call) => new Promise((resolve, reject) => void pending.set(call.name, { resolve, reject })),
    });
    const id = h.start(agentInput({ tools: ['search', 'fail'] }));
    await h.advance(0);
    expect(h.toolCalls).toEqual([{ name: 'search', args: { q: 'a' }, taskId: 't1', callId: expect.any(String) }, { name: 'fail', args: {}, taskId: 't1', callId: expect.any(String) }]);
    expect(h.agent(id).value).toEqual({ active: { tools: 'calling' } });
    // The second call answers first: the order of the results is still the model's.
    pending.get('fail')!.reject(new Error('disk on fire'));
    await h.settle();
    expect(h.agent(id).value).toEqual({ active: { tools: 'calling' } });
    pending.get('search')!.resolve('a is 1');
    await h.advance(0);
    expect(h.calls).toHaveLength(2);
    const results = h.calls[1].input.messages.at(-1)!;
    expect(results).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', toolUseId: 'u1', content: 'a is 1' },
        { type: 'tool_result', toolUseId: 'u2', content: 'disk on fire', isError: true },
      ],
    });
    expect(h.calls[1].input.turn).toBe(1);
    expect(h.output(id)).toMatchObject({ status: 'completed', output: 'Found it.', usage: addUsage(usage(10, 5), usage(30, 7)), requests: 2, turns: 2 });
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
  });

  it('answers a call to a tool the task may not use with an error result, without reaching the bus', async () => {
    const h = createAgentHarness({
      model: (_, n) => (n === 0 ? toolReply([{ id: 'u1', name: 'search' }, { id: 'u2', name: 'rm', input: { path: '/' } }]) : textReply('ok')),
    });
    const id = h.start(agentInput({ tools: ['search'] }));
    await h.advance(0);
    expect(h.toolCalls.map((c) => c.name)).toEqual(['search']);
    expect(h.reportsOf('tool:called').map((e) => e.name)).toEqual(['search']);
    const [ok, refused] = h.calls[1].input.messages.at(-1)!.content as Extract<ContentBlock, { type: 'tool_result' }>[];
    expect(ok).toEqual({ type: 'tool_result', toolUseId: 'u1', content: 'search ok' });
    expect(refused).toMatchObject({ type: 'tool_result', toolUseId: 'u2', isError: true });
    expect(refused.content).toContain('"rm" is not available');
    expect(h.output(id)?.status).toBe('completed');
  });

  it('fails with max_turns after exactly maxTurns model calls, keeping the transcript', async () => {
    const h = createAgentHarness({ model: (_, n) => toolReply([{ id: `u${n}`, name: 'search' }]) });
    const id = h.start(agentInput({ tools: ['search'], maxTurns: 3 }));
    await h.advance(0);
    const report = h.output(id)!;
    expect(h.calls).toHaveLength(3);
    expect(report).toMatchObject({ status: 'failed', error: { code: 'max_turns', retryable: false }, requests: 3, turns: 3 });
    // prompt, then (assistant tool_use, user tool_result) per turn
    expect(report.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(report.messages[5].content).toContainEqual({ type: 'tool_use', id: 'u2', name: 'search', input: {} });
    expect(report.messages[6].content).toEqual([{ type: 'tool_result', toolUseId: 'u2', content: 'search ok' }]);
    expect(report.usage).toEqual([1, 2, 3].reduce((u) => addUsage(u, usage(10, 5)), ZERO_USAGE));
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
  });
});

describe('agentMachine: errors and retries', () => {
  it('backs off a retryable server error no sooner than its Retry-After, then retries', async () => {
    const h = createAgentHarness({ model: (_, n) => (n === 0 ? modelError('server_error', { status: 503, retryAfterMs: 5_000 }) : textReply('ok')) });
    const id = h.start(agentInput({ backoff: { baseMs: 100, maxMs: 1_000 } }));
    await h.advance(0);
    expect(h.agent(id).value).toEqual({ active: 'backoff' });
    expect(h.breaker().context.failures).toBe(1); // a 5xx counts against the route
    await h.advance(4_999);
    expect(h.calls).toHaveLength(1);
    await h.advance(1);
    expect(h.calls.map((c) => c.at)).toEqual([0, 5_000]);
    expect(h.output(id)).toMatchObject({ status: 'completed', retries: 1, requests: 2 });
    const [retry] = h.reportsOf('task:retry');
    expect(retry).toMatchObject({ taskId: 't1', retry: 1, error: { code: 'server_error' } });
    expect(retry.delayMs).toBeGreaterThanOrEqual(5_000);
    expect(h.breaker().context.failures).toBe(0); // the success reset it
  });

  it('leaves a 429 Retry-After to the key: the key backs off and the call goes to the other key at once, using no retry', async () => {
    const h = createAgentHarness({
      keys: [{ keyId: 'A', limits: {} }, { keyId: 'B', limits: {} }],
      model: (_, n) => (n === 0 ? modelError('rate_limited', { status: 429, retryAfterMs: 30_000 }) : textReply('ok')),
    });
    const id = h.start(agentInput({ backoff: { baseMs: 100, maxMs: 1_000 } }));
    await h.advance(1_000);
    const [first, second] = h.calls;
    expect(second.input.keyId).not.toBe(first.input.keyId);
    expect(h.reportsOf('task:retry')).toEqual([]); // a wait, not a retry
    expect(second.at).toBe(0);
    expect(h.key(first.input.keyId)!.value).toBe('backoff');
    expect(h.reportsOf('key:backoff')).toEqual([{ type: 'key:backoff', keyId: first.input.keyId, retryAfterMs: 30_000, at: 0 }]);
    expect(h.output(id)).toMatchObject({ status: 'completed', retries: 0 });
    expect(h.breaker().context.failures).toBe(0); // a 429 says nothing about the route
  });

  it('waits out any number of 429s without using its retries (maxRetries 0), on one key', async () => {
    const h = createAgentHarness({
      // Past maxRateLimitedMs of nothing but 429s the key would be set aside: an hour here.
      keys: [{ keyId: 'A', limits: {}, maxRateLimitedMs: 3_600_000 }],
      model: (_, n) => (n < 6 ? modelError('rate_limited', { status: 429, retryAfterMs: 1_000 }) : textReply('ok')),
    });
    const id = h.start(agentInput({ retries: 0, timeoutMs: 3_600_000 }));
    await h.advance(600_000); // each 429 also cuts the key's rate (it knows no limit): the waits grow
    expect(h.calls).toHaveLength(7);
    // Never sooner than the Retry-After after each 429.
    for (let i = 1; i < h.calls.length; i++) expect(h.calls[i]!.at - h.calls[i - 1]!.at).toBeGreaterThanOrEqual(1_000);
    expect(h.output(id)).toMatchObject({ status: 'completed', retries: 0 });
  });

  it('fails with rate_limited after maxRateLimitWaits 429s, saying so', async () => {
    const h = createAgentHarness({
      keys: [{ keyId: 'A', limits: {} }],
      model: () => modelError('rate_limited', { status: 429, retryAfterMs: 1_000 }),
    });
    const id = h.start(agentInput({ retries: 4, maxRateLimitWaits: 2 }));
    await h.advance(60_000);
    expect(h.calls).toHaveLength(3);
    expect(h.output(id)).toMatchObject({ status: 'failed', error: { code: 'rate_limited', retryable: false } });
    expect(h.output(id)?.error?.message).toMatch(/rate limited 3 times, more than maxRateLimitWaits \(2\)/);
  });

  it('fails at once when every key backs off past its deadline (a Retry-After of 2^31 ms or more does not fire early)', async () => {
    const h = createAgentHarness({
      keys: [{ keyId: 'A', limits: {} }],
      model: () => modelError('rate_limited', { status: 429, retryAfterMs: 1_000_000_000_000 }),
    });
    const id = h.start(agentInput({ timeoutMs: 60_000 }));
    await h.advance(10);
    expect(h.calls).toHaveLength(1);
    expect(h.output(id)).toMatchObject({ status: 'failed', error: { code: 'rate_limited', retryable: false } });
    expect(h.output(id)?.error?.message).toMatch(/rate limited \(429\) until after this attempt's deadline/);
  });

  it('an attempt deadline of 2^31 ms or more is held, not fired after 1 ms', async () => {
    const h = createAgentHarness({ keys: [{ keyId: 'A', limits: {} }], model: () => 'hang' });
    const id = h.start(agentInput({ timeoutMs: 3_000_000_000 }));
    await h.advance(10_000);
    expect(h.calls).toHaveLength(1);
    expect(h.output(id)).toBeUndefined(); // still waiting for its reply, not failed with task_timeout
  });

  it('never counts a 429 against the route: 429s in a row leave a breaker with threshold 1 closed', async () => {
    // The test above ends with a success, which resets the count: look while the 429s land.
    const h = createAgentHarness({
      keys: [{ keyId: 'A', limits: {} }, { keyId: 'B', limits: {} }],
      breaker: { failureThreshold: 1 },
      model: (_, n) => (n < 2 ? modelError('rate_limited', { status: 429, retryAfterMs: 1_000 }) : textReply('ok')),
    });
    const id = h.start(agentInput({ retries: 3 }));
    await h.settle();
    expect(h.calls).toHaveLength(2); // the 429 on A sends the call to B at once, which 429s too
    expect(h.breaker().context.failures).toBe(0);
    expect(h.breaker().value).toBe('closed');
    await h.advance(5_000);
    expect(h.calls).toHaveLength(3);
    expect(h.reportsOf('breaker:open')).toEqual([]);
    expect(h.output(id)).toMatchObject({ status: 'completed', retries: 0 });
  });

  it('revokes key A on a 401 and retries on key B at once', async () => {
    const h = createAgentHarness({
      keys: [{ keyId: 'A', limits: {} }, { keyId: 'B', limits: {} }],
      model: (call) => (call.keyId === 'A' ? modelError('auth', { status: 401 }) : textReply('ok')),
    });
    const id = h.start(agentInput());
    await h.advance(0);
    expect(h.calls.map((c) => [c.input.keyId, c.at])).toEqual([['A', 0], ['B', 0]]);
    expect(h.reportsOf('key:revoked')).toEqual([{ type: 'key:revoked', keyId: 'A', at: 0 }]);
    expect(h.reportsOf('task:retry')).toMatchObject([{ delayMs: 0, error: { code: 'auth' } }]);
    expect(h.output(id)).toMatchObject({ status: 'completed', retries: 1 });
  });

  it('fails with no_keys at once when a 401 revokes the only key, without waiting for its deadline', async () => {
    const h = createAgentHarness({ model: () => modelError('auth', { status: 401 }) });
    const id = h.start(agentInput({ retries: 4 }));
    await h.advance(0);
    expect(h.calls).toHaveLength(1);
    expect(h.output(id)).toMatchObject({ status: 'failed', error: { code: 'no_keys', retryable: false }, requests: 1, retries: 1 });
  });

  it('fails at once on a fatal error, and the breaker never counts it, even across ten agents', async () => {
    const h = createAgentHarness({ model: () => modelError('bad_request', { status: 400 }) });
    const ids = Array.from({ length: 10 }, (_, i) => h.start(agentInput({ taskId: `t${i}` })));
    await h.advance(0);
    for (const id of ids) expect(h.output(id)).toMatchObject({ status: 'failed', error: { code: 'bad_request', retryable: false }, requests: 1, retries: 0 });
    expect(h.calls).toHaveLength(10);
    expect(h.reportsOf('task:retry')).toEqual([]);
    expect(h.breaker()).toMatchObject({ value: 'closed', context: { failures: 0 } });
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
  });

  it('fails after 1 + retries calls when a retryable error never stops, keeping its code', async () => {
    const h = createAgentHarness({ model: () => modelError('server_error', { status: 500 }) });
    const id = h.start(agentInput({ retries: 2 }));
    await runUntilSettled(h, [id]);
    expect(h.calls).toHaveLength(3);
    expect(h.output(id)).toMatchObject({ status: 'failed', error: { code: 'server_error', retryable: true }, requests: 3, retries: 2 });
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
  });

  it('says, on its last error, that the retries are spent: the provider\'s "retried with backoff" was written before anyone knew', async () => {
    const said = 'p/m, key A: the connection failed (ECONNRESET: socket hang up): the call is retried with backoff.';
    const h = createAgentHarness({ model: () => modelError('network', { message: said }) });
    const id = h.start(agentInput({ retries: 1 }));
    await runUntilSettled(h, [id]);
    expect(h.calls).toHaveLength(2);
    // Each call's own error is what the provider said; the retry in between did happen.
    expect(h.reports.filter((e) => e.type === 'model:error').map((e) => (e as { error: { message: string } }).error.message)).toEqual([said, said]);
    expect(h.output(id)!.error).toMatchObject({
      code: 'network',
      message: 'p/m, key A: the connection failed (ECONNRESET: socket hang up): the call is not retried: the task\'s retries are spent.',
    });
    // A retryable error whose text says nothing of retries gets the same ending.
    const h2 = createAgentHarness({ model: () => modelError('server_error', { status: 500, message: 'p/m: HTTP 500: boom' }) });
    const id2 = h2.start(agentInput({ retries: 0 }));
    await runUntilSettled(h2, [id2]);
    expect(h2.output(id2)!.error!.message).toBe('p/m: HTTP 500: boom; the task\'s retries are spent, so it is not retried.');
    // A fatal error keeps its own words.
    const h3 = createAgentHarness({ model: () => modelError('bad_request', { status: 400, message: 'p/m: HTTP 400: bad field. This is not retried.' }) });
    const id3 = h3.start(agentInput({ retries: 2 }));
    await runUntilSettled(h3, [id3]);
    expect(h3.output(id3)!.error!.message).toBe('p/m: HTTP 400: bad field. This is not retried.');
  });

  it('fails with task_timeout at exactly its deadline, aborting the call and giving the lease back', async () => {
    const h = createAgentHarness({ keys: [{ keyId: 'A', limits: { concurrency: 1 } }], model: () => 'hang' });
    const id = h.start(agentInput({ timeoutMs: 30_000 }));
    await h.advance(29_999);
    expect(h.agent(id).value).toEqual({ active: 'running' });
    expect(h.calls[0].signal.aborted).toBe(false);
    await h.advance(1);
    expect(h.output(id)).toMatchObject({ status: 'failed', error: { code: 'task_timeout', retryable: true } });
    expect(h.calls[0].signal.aborted).toBe(true);
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
    // The only key's only slot is free again: the next agent gets it.
    h.start(agentInput({ taskId: 't2' }));
    await h.advance(0);
    expect(h.callsOf('t2')).toMatchObject([{ input: { keyId: 'A' }, at: 30_000 }]);
  });
});

describe('agentMachine: cancellation', () => {
  it('aborts the call when the agent is stopped mid-call (its run stopped), not only when it leaves running', async () => {
    const h = createAgentHarness({ model: () => 'hang' });
    const id = h.start(agentInput());
    await h.advance(0);
    expect(h.agent(id).value).toEqual({ active: 'running' });
    expect(h.calls[0].signal.aborted).toBe(false);
    // No transition leaves `running` here: the actor itself goes away.
    h.root.stop();
    await h.settle();
    expect(h.calls[0].signal.aborted).toBe(true);
  });

  it('drops the reply of a call it stopped waiting for: a cancelled agent stays cancelled, and its late reply is not reported', async () => {
    let answer: (reply: ReturnType<typeof textReply>) => void = () => {};
    const late = new Promise<ReturnType<typeof textReply>>((resolve) => (answer = resolve));
    const h = createAgentHarness({ model: () => late });
    const id = h.start(agentInput());
    await h.advance(0);
    h.cancel(id, 'not needed');
    await h.settle();
    expect(h.calls[0].signal.aborted).toBe(true);
    answer(textReply('too late'));
    await h.settle();
    expect(h.output(id)).toMatchObject({ status: 'cancelled', requests: 1 });
    expect(h.reportsOf('model:response')).toEqual([]);
    expect(h.crashes.size).toBe(0);
  });

  it('withdraws its queued lease request when cancelled while waiting, so the next agent is served', async () => {
    const h = createAgentHarness({ keys: [{ keyId: 'A', limits: { concurrency: 1 } }], model: () => 'hang' });
    const holder = h.start(agentInput({ taskId: 'holder' }));
    const waiter = h.start(agentInput({ taskId: 'waiter' }));
    await h.advance(0);
    expect(h.agent(waiter).value).toEqual({ active: { waiting: 'lease' } });
    expect(h.pool().context.book.byRequest.has('waiter#1.1')).toBe(true);
    h.cancel(waiter, 'not needed');
    await h.settle();
    expect(h.output(waiter)).toMatchObject({ status: 'cancelled', error: { code: 'cancelled', message: 'not needed' }, requests: 0 });
    expect(h.pool().context.book.byRequest.has('waiter#1.1')).toBe(false);
    const later = h.start(agentInput({ taskId: 'later' }));
    await h.advance(0);
    h.cancel(holder);
    await h.advance(0);
    expect(h.calls.map((c) => c.input.taskId)).toEqual(['holder', 'later']);
    expect(h.agent(later).value).toEqual({ active: 'running' });
  });

  it('a cancel of one agent ends that one alone: cancelled with its reason, its call aborted; the others keep going and complete', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const h = createAgentHarness({ model: (call) => (call.taskId === 'b' ? gate.then(() => textReply('b done')) : 'hang') });
    const a = h.start(agentInput({ taskId: 'a' }));
    const b = h.start(agentInput({ taskId: 'b' }));
    const c = h.start(agentInput({ taskId: 'c' }));
    await h.advance(0);
    expect(h.calls.map((x) => x.input.taskId)).toEqual(['a', 'b', 'c']);
    h.cancel(a, 'not needed');
    await h.settle();
    expect(h.output(a)).toMatchObject({ status: 'cancelled', error: { code: 'cancelled', message: 'not needed', retryable: false }, requests: 1 });
    expect(h.callsOf('a')[0]!.signal.aborted).toBe(true);
    // The others: calls still live, still running.
    expect(h.callsOf('b')[0]!.signal.aborted).toBe(false);
    expect(h.callsOf('c')[0]!.signal.aborted).toBe(false);
    expect(h.output(b)).toBeUndefined();
    expect(h.output(c)).toBeUndefined();
    release();
    await h.settle();
    expect(h.output(b)).toMatchObject({ status: 'completed', output: 'b done' });
    expect(h.output(c)).toBeUndefined();
    // a's lease went back; b's too; c still holds one.
    expect(h.leasesOut()).toEqual({ pool: 1, A: 1 });
  });

  it('withdraws from the breaker when cancelled while the route is open', async () => {
    const h = createAgentHarness({
      breaker: { failureThreshold: 1, cooldownMs: 10_000 },
      model: (call) => (call.taskId === 'sick' ? modelError('server_error', { status: 500 }) : textReply('ok')),
    });
    h.start(agentInput({ taskId: 'sick', retries: 0 }));
    await h.advance(0);
    expect(h.breaker().value).toBe('open');
    const id = h.start(agentInput({ taskId: 'held' }));
    await h.advance(0);
    // Its lease request waits at the breaker (it never reached the pool).
    expect(h.agent(id).value).toEqual({ active: { waiting: 'lease' } });
    expect(h.breaker().context.waiters.map((w) => w.requestId)).toEqual(['held#1.1']);
    expect(h.pool().context.book.byRequest.has('held#1.1')).toBe(false);
    h.cancel(id);
    await h.settle();
    expect(h.output(id)?.status).toBe('cancelled');
    expect(h.breaker().context.waiters).toEqual([]);
  });

  it('aborts the call and gives back the lease and the breaker probe slot when cancelled while running', async () => {
    const h = createAgentHarness({
      breaker: { failureThreshold: 1, cooldownMs: 1_000 },
      model: (call) => (call.taskId === 'sick' ? modelError('server_error', { status: 500 }) : 'hang'),
    });
    h.start(agentInput({ taskId: 'sick', retries: 0 }));
    await h.advance(0);
    expect(h.breaker().value).toBe('open');
    await h.advance(1_000);
    expect(h.breaker().value).toBe('halfOpen');
    const probe = h.start(agentInput({ taskId: 'probe' }));
    const next = h.start(agentInput({ taskId: 'next' }));
    await h.advance(0);
    expect(h.agent(probe).context.held.lease).not.toBeNull();
    expect(h.breaker().context.probe).toBe('probe#1.1');
    expect(h.agent(next).value).toEqual({ active: { waiting: 'lease' } });
    const call = h.callsOf('probe')[0];

    h.cancel(probe);
    await h.advance(0);
    expect(h.output(probe)?.status).toBe('cancelled');
    expect(call.signal.aborted).toBe(true);
    expect(h.key('A')!.context.leases).not.toHaveProperty(call.input.leaseId);
    // The slot went to the next agent, which now holds the only lease out.
    expect(h.breaker().context.probe).toBe('next#1.1');
    expect(h.agent(next).value).toEqual({ active: 'running' });
    expect(h.leasesOut()).toEqual({ pool: 1, A: 1 });
  });
});

describe('agentMachine: the route\'s breaker and fallbacks', () => {
  /** Counts reads of an actor's snapshot from now on (the agent must learn other actors' state by event). */
  function countReads(h: AgentHarness, systemId: string) {
    const ref = h.root.system.get(systemId)!;
    const read = ref.getSnapshot.bind(ref);
    const counter = { reads: 0, restore: () => void (ref.getSnapshot = read) };
    ref.getSnapshot = () => {
      counter.reads++;
      return read();
    };
    return counter;
  }

  /** Opens the breaker of `p/<model>` (threshold 1) with one failing call. */
  async function open(h: AgentHarness, model: string) {
    h.start(agentInput({ taskId: `sick-${model}`, model, retries: 0 }));
    await h.advance(0);
    expect(h.breaker(model).value).toBe('open');
  }

  const sickOn = (models: string[]) => (call: { model: string; taskId: string }) =>
    call.taskId.startsWith('sick') || models.includes(call.model) ? modelError('server_error', { status: 500 }) : textReply(`ok from ${call.model}`);

  it('asks the breaker by event, never reading its state: a closed one passes the lease request on, and hears every outcome', async () => {
    const h = createAgentHarness({ breaker: { failureThreshold: 3 }, model: (_, n) => (n === 0 ? modelError('server_error', { status: 500 }) : textReply('ok')) });
    const reads = countReads(h, 'breaker:p/m');
    const id = h.start(agentInput({ backoff: { baseMs: 1, maxMs: 1 } }));
    await h.advance(100);
    expect(h.output(id)).toMatchObject({ status: 'completed', retries: 1 });
    expect(reads.reads).toBe(0);
    reads.restore();
    // The failure was counted, and the success after it reset the count.
    expect(h.breaker().context.failures).toBe(0);
    expect(h.breaker().context.waiters).toEqual([]);
  });

  it('moves a turn off an open route to the first fallback whose breaker is not open, skipping an open one', async () => {
    const h = createAgentHarness({ models: ['f1', 'f2'], breaker: { failureThreshold: 1, cooldownMs: 60_000 }, model: sickOn([]) });
    await open(h, 'm');
    await open(h, 'f1');
    const reads = [countReads(h, 'breaker:p/m'), countReads(h, 'breaker:p/f1'), countReads(h, 'breaker:p/f2')];
    const fallbacks = ['f1', 'f2'].map((model) => ({ provider: 'p', model, maxTokens: 100 }));
    const id = h.start(agentInput({ fallbacks }));
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'completed', output: 'ok from f2', servedBy: 'p/f2' });
    expect(h.reportsOf('task:fallback').map(({ from, to, reason }) => ({ from, to, reason }))).toEqual([{ from: 'p/m', to: 'p/f2', reason: 'breaker open' }]);
    expect(h.callsOf('t1').map((c) => c.input.model)).toEqual(['f2']);
    expect(reads.map((r) => r.reads)).toEqual([0, 0, 0]);
  });

  it('waits on its own route when every fallback is open too, and goes when the route heals', async () => {
    const h = createAgentHarness({ models: ['f1'], breaker: { failureThreshold: 1, cooldownMs: 10_000 }, model: sickOn([]) });
    await open(h, 'm');
    await open(h, 'f1');
    const id = h.start(agentInput({ fallbacks: [{ provider: 'p', model: 'f1', maxTokens: 100 }] }));
    await h.advance(0);
    expect(h.agent(id).value).toEqual({ active: { waiting: 'lease' } });
    expect(h.breaker().context.waiters.map((w) => w.requestId)).toEqual(['t1#1.3']); // refused, peeked, then held
    expect(h.reportsOf('task:fallback')).toEqual([]);
    await h.advance(10_000); // half-open: the held request is the probe, and succeeds
    expect(h.output(id)).toMatchObject({ status: 'completed', output: 'ok from m' });
    expect(h.breaker().value).toBe('closed');
  });
});

describe('agentMachine: backoff jitter', () => {
  /** The delays of three retries of an always-500 model, with this seed. */
  async function retryDelays(seed: number) {
    const h = createAgentHarness({ model: () => modelError('server_error', { status: 500 }) });
    const id = h.start(agentInput({ seed, retries: 3, backoff: { baseMs: 1_000, maxMs: 60_000 } }));
    await runUntilSettled(h, [id]);
    const delays = h.reportsOf('task:retry').map((e) => e.delayMs);
    const gaps = h.calls.slice(1).map((c, i) => c.at - h.calls[i].at);
    return { delays, gaps };
  }

  it('is the same for the same seed, differs for another, and is waited exactly', async () => {
    const a = await retryDelays(7);
    const b = await retryDelays(7);
    const c = await retryDelays(8);
    expect(a.delays).toHaveLength(3);
    expect(b.delays).toEqual(a.delays);
    expect(c.delays).not.toEqual(a.delays);
    expect(a.gaps).toEqual(a.delays);
    // Full jitter: retry i waits floor(r_i * 1,000 * 2^i) ms, r_i the seeded PRNG's i-th draw
    // (seed 7: 0.011704..., 0.061958..., 0.976907...), worked out by hand: 11.7, 123.9, 3907.6.
    expect(a.delays).toEqual([11, 123, 3_907]);
  });

  it('is a share of base * 2^retry, capped at maxMs, never below the floor (literal values)', () => {
    const opts = { baseMs: 1_000, maxMs: 60_000 };
    expect([0, 1, 2, 3, 5, 6, 40].map((retry) => backoffDelay(retry, 0.5, opts))).toEqual([500, 1_000, 2_000, 4_000, 16_000, 30_000, 30_000]);
    expect(backoffDelay(2, 0.999_999, opts)).toBe(3_999);
    expect(backoffDelay(0, 0.1, { ...opts, floorMs: 2_500.2 })).toBe(2_501);
    expect(backoffDelay(4, 0.25, { ...opts, floorMs: 0 })).toBe(4_000);
  });
});

describe('agentMachine: missing infrastructure and malformed replies', () => {
  // Found by these tests: the agent used to send to a missing breaker or pool (xstate then sends
  // to `self`) and sat until its deadline. A route with no breaker is now unguarded; a missing
  // pool fails the attempt at once.
  it('runs unguarded, at once, when its route has no breaker', async () => {
    const h = createAgentHarness({ model: () => textReply('ok') });
    const id = h.start(agentInput({ model: 'unrouted', timeoutMs: 5_000 }));
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'completed', requests: 1, output: 'ok' });
    // Its release (with a verdict the pool finds no breaker for) went back to the key.
    expect(h.leasesOut()).toEqual({ pool: 0, A: 0 });
  });

  it('looks up no breaker to ask for a lease: it names the route, and the pool (the front desk) knows the breaker', async () => {
    const h = createAgentHarness({ model: () => textReply('ok') });
    const get = h.root.system.get.bind(h.root.system);
    const lookups: string[] = [];
    h.root.system.get = ((id: string) => (lookups.push(id), get(id))) as typeof h.root.system.get;
    const id = h.start(agentInput());
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'completed', requests: 1 });
    expect(lookups).toContain('pool:p');
    expect(lookups.filter((l) => l.startsWith('breaker:'))).toEqual([]);
  });

  it('fails at once with an internal error when its provider has no pool', async () => {
    const h = createAgentHarness({ model: () => textReply('ok') });
    const id = h.start(agentInput({ provider: 'nowhere', timeoutMs: 5_000 }));
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'failed', requests: 0 });
    expect(h.output(id)!.error).toMatchObject({ code: 'internal', retryable: false });
    expect(h.output(id)!.error!.message).toContain('pool:nowhere');
  });

  // Some OpenAI-compatible servers reuse ids like "call_0": one call and one result per id.
  it('does not wedge in tools when a reply repeats a tool_use id', async () => {
    const h = createAgentHarness({
      model: (_, n) => (n === 0 ? toolReply([{ id: 'call_0', name: 'search' }, { id: 'call_0', name: 'search', input: { q: 2 } }]) : textReply('ok')),
    });
    const id = h.start(agentInput({ tools: ['search'], timeoutMs: 5_000 }));
    await h.advance(0);
    expect(h.calls).toHaveLength(2);
    expect(h.output(id)).toMatchObject({ status: 'completed' });
  });
});

describe('leaseTokensOf: what a call charges its key for input', () => {
  const system = 'brief '.repeat(2_000); // 12,000 characters: ~3,000 tokens
  const ctx = (over: Record<string, unknown> = {}, input: Record<string, unknown> = {}) =>
    ({ input: { system, cachedTokens: 3_000, ...input }, call: 'turn', routeIndex: 0, messages: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }], ...over }) as unknown as AgentContext;
  it('a turn of a warm group on its own route: the prompt less its cached prefix; anything else: the whole prompt', () => {
    const whole = requestTokensOf(ctx());
    expect(whole).toBeGreaterThan(3_000);
    expect(leaseTokensOf(ctx())).toBe(whole - 3_000);
    expect(leaseTokensOf(ctx({}, { cachedTokens: undefined }))).toBe(whole);
    // A fallback route (another provider's cache), a summary or a judge (another prefix): whole.
    expect(leaseTokensOf(ctx({ routeIndex: 1 }))).toBe(whole);
    expect(leaseTokensOf(ctx({ override: { target: { provider: 'q', model: 'm', maxTokens: 10 } } }))).toBe(whole);
    expect(leaseTokensOf(ctx({ call: 'summary' }))).toBe(requestTokensOf(ctx({ call: 'summary' })));
    expect(leaseTokensOf(ctx({ call: 'judge', input: { system, cachedTokens: 3_000, judge: { prompt: 'p', threshold: 1 } } }))).toBe(requestTokensOf(ctx({ call: 'judge', input: { system, judge: { prompt: 'p', threshold: 1 } } })));
    // Never below zero, whatever the estimate said.
    expect(leaseTokensOf(ctx({}, { cachedTokens: 1e9 }))).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// What a failed call is charged: its worst case when it may have reached the server
// ---------------------------------------------------------------------------------------------

describe('agentMachine: a failed call is charged its worst case when it may have reached the server', () => {
  // The example of docs/architecture.md (Budgets): 26 bytes of prompt + 8 + 16 = a bound of 50
  // tokens, (50 x 1.25 + 256 x 100) / 10^6 = $0.0256625 reserved.
  const WORST = 0.0256625;
  const priced = (overrides: Parameters<typeof agentInput>[0] = {}) =>
    agentInput({ prompt: 'Task 3. [[sim:length 200]]', maxTokens: 256, price: { input: 1, output: 100 }, modelName: 'pricey', budgeted: true, retries: 0, ...overrides });

  async function failOnce(error: ReturnType<typeof modelError>, input = priced()) {
    const h = createAgentHarness({ model: () => error, budgets: { runUsd: 1 } });
    const id = h.start(input);
    await runUntilSettled(h, [id]);
    return { h, out: h.output(id)!, ledger: input.budgeted ? h.ledger() : undefined, errors: h.reportsOf('model:error') };
  }

  it.each([
    ['a timeout (headers or body)', modelError('timeout')],
    ['a reset or a cut stream (network, after the connection was made)', modelError('network')],
    ['an error event in a 200 stream (overloaded without a status)', modelError('overloaded')],
    ['a malformed 200 reply (server_error without a status)', modelError('server_error')],
  ])('%s: settled at the reservation in the ledger, and in the cost the attempt shows', async (_name, error) => {
    const { out, ledger, errors } = await failOnce(error);
    expect(ledger!.run).toEqual({ limitUsd: 1, spentUsd: WORST, reservedUsd: 0 });
    expect(ledger!.counts).toMatchObject({ reserved: 1, settled: 1, released: 0 });
    expect(out.costUsd).toBe(WORST);
    expect(out.calls).toEqual([expect.objectContaining({ ok: false, costUsd: WORST })]);
    // The event says so, for the journal (a resumed budget) and every view of the cost.
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ costUsd: WORST, modelName: 'pricey' });
  });

  it.each([
    ['a connection refused before anything was sent (unsent)', modelError('network', { unsent: true })],
    ['a connect timeout (unsent)', modelError('timeout', { unsent: true })],
    ['a 5xx status', modelError('server_error', { status: 503 })],
    ['a 529', modelError('overloaded', { status: 529 })],
    ['a 400', modelError('bad_request', { status: 400 })],
    ['a 429', modelError('rate_limited', { status: 429 })],
  ])('%s: released, nothing charged', async (_name, error) => {
    const input = priced({ maxRateLimitWaits: 0 });
    const { out, ledger, errors } = await failOnce(error, input);
    expect(ledger!.run).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: 0 });
    expect(ledger!.counts).toMatchObject({ reserved: 1, settled: 0, released: 1 });
    expect(out.costUsd).toBe(0);
    expect(errors[0]).not.toHaveProperty('costUsd');
  });

  it('a run without a budget shows the same worst case for a call that may have been billed (and nothing for one that was not)', async () => {
    const timedOut = await failOnce(modelError('timeout'), priced({ budgeted: false }));
    expect(timedOut.out.costUsd).toBe(WORST);
    expect(timedOut.errors[0]).toMatchObject({ costUsd: WORST, modelName: 'pricey' });
    const refused = await failOnce(modelError('network', { unsent: true }), priced({ budgeted: false }));
    expect(refused.out.costUsd).toBe(0);
    // Unpriced: nothing is made up.
    const unpriced = await failOnce(modelError('timeout'), agentInput({ retries: 0 }));
    expect(unpriced.out.costUsd).toBeUndefined();
    expect(unpriced.out.unpricedCalls).toBe(1);
  });

  it('each retry that may have been billed is charged again: two timeouts and a reply cost two worst cases and the reply', async () => {
    const h = createAgentHarness({ model: (_c, n) => (n < 2 ? modelError('timeout') : textReply('ok', usage(10, 200))), budgets: { runUsd: 1 } });
    const id = h.start(priced({ retries: 2 }));
    await runUntilSettled(h, [id]);
    // 2 x 0.0256625 + (10 x 1 + 200 x 100) / 10^6 = 0.051325 + 0.02001
    expect(h.ledger().run).toEqual({ limitUsd: 1, spentUsd: 0.071335, reservedUsd: 0 });
    expect(h.output(id)!.status).toBe('completed');
    // Summed in floating point by the attempt (the result rounds to 1e-8).
    expect(h.output(id)!.costUsd).toBeCloseTo(0.071335, 12);
  });

  it('a call aborted in flight (cancelled, or past its deadline) is charged its worst case; one still waiting for its lease is not', async () => {
    const h = createAgentHarness({ model: () => 'hang', budgets: { runUsd: 1 } });
    const id = h.start(priced());
    await h.advance(0);
    expect(h.callsOf('t1')).toHaveLength(1);
    h.cancel(id, 'stop');
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'cancelled', costUsd: WORST });
    expect(h.ledger().run).toEqual({ limitUsd: 1, spentUsd: WORST, reservedUsd: 0 });

    const late = createAgentHarness({ model: () => 'hang', budgets: { runUsd: 1 } });
    const timedOut = late.start(priced({ timeoutMs: 5_000 }));
    await runUntilSettled(late, [timedOut]);
    expect(late.output(timedOut)).toMatchObject({ status: 'failed', error: { code: 'task_timeout' }, costUsd: WORST });
    expect(late.ledger().run).toEqual({ limitUsd: 1, spentUsd: WORST, reservedUsd: 0 });

    // One key with a concurrency of 1, held by a hanging call: the second agent waits for its lease, holding a reservation.
    const queued = createAgentHarness({ keys: [{ keyId: 'A', limits: { concurrency: 1 } }], model: () => 'hang', budgets: { runUsd: 1 } });
    queued.start(priced({ taskId: 'first' }));
    const second = queued.start(priced({ taskId: 'second' }));
    await queued.advance(0);
    expect(queued.callsOf('second')).toHaveLength(0);
    queued.cancel(second);
    await queued.advance(0);
    expect(queued.output(second)).toMatchObject({ status: 'cancelled', costUsd: 0 });
    expect(queued.ledger().run).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: WORST });
  });
});
