/**
 * The one check of a model's reply (src/providers/replyCheck.ts): what it lets through (as a
 * clean reply) and what it refuses (a malformed response naming the field); and, end to end, that
 * an HTTP adapter's reply goes through it too: a server over loopback that reports a negative
 * or an absurd count fails the task, it does not complete it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm } from '../../src/index.js';
import { ProviderError } from '../../src/providers/errors.js';
import { checkReply, MAX_CALL_TOKENS } from '../../src/providers/replyCheck.js';
import { fixture, SSE, startServer, type TestServer } from './server.js';

const facts = { provider: 'p', model: 'm', keyId: 'p:1234abcd' };
const usage = { inputTokens: 10, outputTokens: 5, cacheWriteTokens: 0, cacheReadTokens: 2 };

function refusal(reply: unknown, maxTokens = 100): ProviderError {
  try {
    checkReply(reply, maxTokens, facts);
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error('the reply was accepted');
}

describe('checkReply', () => {
  it('keeps a reply of the right shape, and only its fields (a provider cannot slip in a verdict)', () => {
    const content = [
      { type: 'text', text: 'hi' },
      { type: 'tool_use', id: 'c1', name: 'lookup', input: { q: 1 } },
    ];
    const out = checkReply({ content, stopReason: 'tool_use', usage: { ...usage, extra: 1 }, rateLimit: { requestsRemaining: 3 }, verdict: { ok: true, text: 'forged' }, sentAt: 5 }, 100, facts);
    expect(out).toEqual({ content, stopReason: 'tool_use', usage, rateLimit: { requestsRemaining: 3 }, sentAt: 5 });
    // Fractional and boundary counts are counts.
    expect(checkReply({ content: [], stopReason: 'end_turn', usage: { ...usage, inputTokens: MAX_CALL_TOKENS - 2, outputTokens: 0.5 } }, 100, facts).usage.inputTokens).toBe(MAX_CALL_TOKENS - 2);
  });

  it.each([
    ['null', null, 'the reply is null, not an object'],
    ['an array', [], 'the reply is an array of 0, not an object'],
    ['content missing', { stopReason: 'end_turn', usage }, 'content is not an array (it is undefined)'],
    ['a tool call without id', { content: [{ type: 'tool_use', name: 'x', input: {} }], stopReason: 'tool_use', usage }, 'content[0].id is missing, not a name'],
    ['a tool call without input', { content: [{ type: 'tool_use', id: 'c', name: 'x' }], stopReason: 'tool_use', usage }, "content[0].input is missing (a tool call's arguments)"],
    ['a tool_result in a reply', { content: [{ type: 'tool_result', toolUseId: 'c', content: 'x' }], stopReason: 'end_turn', usage }, 'content[0].type is "tool_result": a reply holds "text" and "tool_use" blocks'],
    ['too many blocks', { content: Array.from({ length: 1025 }, () => ({ type: 'text', text: '' })), stopReason: 'end_turn', usage }, 'content has 1025 blocks (at most 1024 in one reply)'],
    ['text past the bound', { content: [{ type: 'text', text: 'x'.repeat(64 * 1024 + 64 * 100 + 1) }], stopReason: 'end_turn', usage }, "the reply's text passes 71936 characters (the bound for maxTokens 100)"],
    ['a stop reason that is not a string', { content: [], stopReason: 3, usage }, 'stopReason is 3, not one of'],
    ['usage null', { content: [], stopReason: 'end_turn', usage: null }, 'usage is missing (every reply says what it used)'],
    ['usage a number', { content: [], stopReason: 'end_turn', usage: 12 }, 'usage is 12, not an object'],
    ['a count missing', { content: [], stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0 } }, 'usage.cacheWriteTokens is undefined, not a token count'],
    ['-Infinity', { content: [], stopReason: 'end_turn', usage: { ...usage, outputTokens: Number.NEGATIVE_INFINITY } }, 'usage.outputTokens is -Infinity, not a token count'],
    ['one count over the cap', { content: [], stopReason: 'end_turn', usage: { ...usage, outputTokens: MAX_CALL_TOKENS + 1 } }, 'usage.outputTokens is 10000001, above 10000000'],
    ['input counts summed over the cap', { content: [], stopReason: 'end_turn', usage: { ...usage, inputTokens: 6_000_000, cacheReadTokens: 5_000_000 } }, 'the input counts of usage sum to 11000000, above 10000000'],
    ['a rateLimit that is not an object', { content: [], stopReason: 'end_turn', usage, rateLimit: 'soon' }, 'rateLimit is "soon", not an object'],
    ['a sentAt that is not a time', { content: [], stopReason: 'end_turn', usage, sentAt: Number.NaN }, 'sentAt is NaN, not a time'],
  ])('%s: a malformed response naming it', (_name, reply, says) => {
    const e = refusal(reply);
    expect(e).toMatchObject({ code: 'server_error', retryable: true, provider: 'p', model: 'm', keyId: 'p:1234abcd' });
    expect(e.message).toContain(`p/m, key p:1234abcd: malformed response: ${says}`);
  });
});

describe('an HTTP reply goes through the same check (Anthropic adapter over loopback)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.close());

  async function runAgainst(body: string) {
    server.respond({ status: 200, headers: SSE, body });
    const swarm = createSwarm({ store: false, backoff: { baseMs: 1, maxMs: 1 }, env: { K: 'sk-reply-check-0123456789' } });
    const result = await swarm.run({
      providers: { a: { type: 'anthropic', baseURL: server.url, keys: [{ env: 'K' }] } },
      models: { m: { provider: 'a', model: 'claude-sonnet-4-5', maxTokens: 64, price: { input: 3, output: 15 } } },
      defaults: { maxRetries: 0 },
      budget: { usd: 1 },
      tasks: [{ id: 't', model: 'm', prompt: 'hi' }],
    }).result;
    await swarm.close();
    return result;
  }

  it('a well-formed stream completes', async () => {
    const result = await runAgainst(fixture('anthropic/text.sse'));
    expect(result.status).toBe('completed');
    expect(result.tasks.t!.usage).toEqual({ inputTokens: 25, outputTokens: 15, cacheWriteTokens: 0, cacheReadTokens: 2048 });
  });

  it('a negative input count fails the task as a malformed response', async () => {
    const result = await runAgainst(fixture('anthropic/text.sse').replace('"input_tokens":25', '"input_tokens":-25'));
    expect(result.status).toBe('failed');
    expect(result.tasks.t!.error).toMatchObject({ code: 'server_error' });
    expect(result.tasks.t!.error!.message).toContain('malformed response: usage.inputTokens is -25, below 0');
  });

  it('1e300 output tokens on a $1 budget fails the task, with a finite cost within the budget', async () => {
    const result = await runAgainst(fixture('anthropic/text.sse').replace('"output_tokens":15', '"output_tokens":1e300'));
    expect(result.status).toBe('failed');
    expect(result.tasks.t!.error!.message).toContain('usage.outputTokens is 1e+300, above 10000000');
    expect(result.totals.costUsd).toBeLessThanOrEqual(1);
  });
});
