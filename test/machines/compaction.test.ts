/**
 * Context budgets: an agent whose next request would not fit compacts first (a summary from the
 * compaction model, or a marked truncation), a provider's context-overflow error compacts and
 * retries once, and a task that cannot fit fails with a clear error.
 */
import { describe, expect, it } from 'vitest';
import { canCompact, compact, SUMMARY_SYSTEM, tailStart } from '../../machines/compaction.js';
import type { Message, ModelCallInput } from '../../machines/protocol.js';
import { estimateRequestTokens } from '../../machines/tokens.js';
import { agentInput, createAgentHarness, modelError, textReply, toolReply } from '../helpers/harness.js';

const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] });
const asst = (id: string): Message => ({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'search', input: {} }] });
const result = (id: string, text: string): Message => ({ role: 'user', content: [{ type: 'tool_result', toolUseId: id, content: text }] });

describe('compaction (pure)', () => {
  const convo = [user('brief'), asst('1'), result('1', 'r1'), asst('2'), result('2', 'r2'), asst('3'), result('3', 'r3')];

  it('keeps the brief and a tail that starts with an assistant message', () => {
    expect(tailStart(convo, 4)).toBe(3);
    const { messages, removed } = compact(convo, 4, null);
    expect(removed).toBe(2);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(messages[0]!.content.at(-1)).toEqual({ type: 'text', text: '[2 earlier messages were removed to fit the context window]' });
  });

  it('puts a summary in the brief, and replaces an earlier note rather than stacking it', () => {
    const once = compact(convo, 4, 'S1').messages;
    const twice = compact([...once, asst('4'), result('4', 'r4')], 2, 'S2').messages;
    const notes = twice[0]!.content.filter((b) => b.type === 'text' && b.text.startsWith('['));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ text: expect.stringContaining('S2') });
  });

  it('has nothing to compact when only the brief and the tail are left', () => {
    expect(canCompact([user('brief'), asst('1'), result('1', 'x')], 4)).toBe(false);
  });
});

/** A model that calls `search` on each of its first `turns` turns, then answers. */
const toolLoop = (turns: number) => (call: ModelCallInput) =>
  call.system === SUMMARY_SYSTEM
    ? textReply('SUMMARY-OF-THE-MIDDLE')
    : call.turn >= turns
      ? textReply('final answer')
      : toolReply([{ id: `c${call.turn}`, name: 'search', input: { q: call.turn } }]);

describe('agent context budget', () => {
  const bigResult = 'x'.repeat(2000); // ~500 tokens per tool result

  it('truncates (marked) before a request would pass the budget; every request fits', async () => {
    const h = createAgentHarness({ model: toolLoop(8), executeTool: async () => bigResult });
    const budget = 1600;
    h.start(agentInput({ tools: ['search'], maxTurns: 20, inputBudget: budget }));
    await h.advance(0);
    expect(h.output('agent:t1:1')).toMatchObject({ status: 'completed', output: 'final answer' });
    for (const c of h.calls) expect(estimateRequestTokens(c.input.system, c.input.messages)).toBeLessThanOrEqual(budget);
    const compactions = h.reportsOf('task:compacted');
    expect(compactions.length).toBeGreaterThan(0);
    expect(compactions.every((c) => c.mode === 'truncation' && c.tokensAfter < c.tokensBefore)).toBe(true);
  });

  it('with a compaction model, asks it for a summary and continues on the summary', async () => {
    const h = createAgentHarness({ model: toolLoop(8), executeTool: async () => bigResult });
    h.start(agentInput({ tools: ['search'], maxTurns: 20, inputBudget: 1600, compaction: { provider: 'p', model: 'm', maxTokens: 200 } }));
    await h.advance(0);
    expect(h.output('agent:t1:1')).toMatchObject({ status: 'completed' });
    const summaries = h.calls.filter((c) => c.input.system === SUMMARY_SYSTEM);
    expect(summaries.length).toBeGreaterThan(0);
    expect(summaries[0]!.input.tools).toEqual([]);
    const after = h.calls[h.calls.indexOf(summaries[0]!) + 1]!;
    expect(JSON.stringify(after.input.messages[0])).toContain('SUMMARY-OF-THE-MIDDLE');
    expect(h.reportsOf('task:compacted')[0]).toMatchObject({ mode: 'summary' });
    // A summary is not a turn: the task still took its 8 tool turns plus the answer.
    expect(h.calls.filter((c) => c.input.system !== SUMMARY_SYSTEM)).toHaveLength(9);
  });

  it('a provider context-overflow error compacts and retries once; a second one fails the task', async () => {
    let overflows = 0;
    const h = createAgentHarness({
      model: (call) => {
        if (call.messages.length > 5 && overflows < 1) {
          overflows++;
          return modelError('context_overflow', { retryable: false });
        }
        return toolLoop(4)(call);
      },
    });
    h.start(agentInput({ tools: ['search'], maxTurns: 10 }));
    await h.advance(0);
    expect(h.output('agent:t1:1')).toMatchObject({ status: 'completed' });
    expect(h.reportsOf('task:compacted')).toHaveLength(1);

    const h2 = createAgentHarness({ model: (call) => (call.messages.length > 3 ? modelError('context_overflow', { retryable: false }) : toolLoop(9)(call)) });
    h2.start(agentInput({ tools: ['search'], maxTurns: 10 }));
    await h2.advance(0);
    expect(h2.output('agent:t1:1')).toMatchObject({ status: 'failed', error: { code: 'context_overflow' } });
  });

  it('fails with context_overflow when the brief alone does not fit', async () => {
    const h = createAgentHarness({ model: () => textReply('never') });
    h.start(agentInput({ prompt: 'y'.repeat(4000), inputBudget: 100 }));
    await h.advance(0);
    expect(h.calls).toHaveLength(0);
    expect(h.output('agent:t1:1')).toMatchObject({ status: 'failed', error: { code: 'context_overflow' } });
  });
});
