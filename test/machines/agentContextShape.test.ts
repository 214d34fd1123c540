import { describe, expect, it } from 'vitest';
import { agentInput, createAgentHarness, textReply, toolReply, usage } from '../helpers/harness.js';

/**
 * XState's assign builds each new context with Object.assign({}, context, patch). V8 keeps such a
 * copy a fast object up to 19 own properties; from 20 on it makes it a dictionary-mode object, and
 * every assign (and every read) of the agent, several per task, gets many times slower. So the
 * agent's context keeps its top-level fields few (counts, spend and held are sub-objects).
 */
const V8_FAST_ASSIGN_KEYS = 19;

describe('agentMachine: the shape of its context', () => {
  it(`keeps at most ${V8_FAST_ASSIGN_KEYS} top-level fields, mid-call and once done`, async () => {
    let answer: ((text: string) => void) | undefined;
    const h = createAgentHarness({
      model: (_, n) =>
        n === 0 ? toolReply([{ id: 'u1', name: 'search' }], usage(10, 5)) : new Promise((resolve) => (answer = (text) => resolve(textReply(text, usage(20, 4))))),
      executeTool: async () => 'found',
    });
    const id = h.start(agentInput({ tools: ['search'] }));
    await h.advance(0);
    // The second call is out: the lease requests, grants, settlement and tool results were assigned.
    expect(h.agent(id).value).toEqual({ active: 'running' });
    expect(h.calls).toHaveLength(2);
    const mid = h.agent(id).context;
    expect(Object.keys(mid).length).toBeLessThanOrEqual(V8_FAST_ASSIGN_KEYS);
    expect(mid.counts.turn).toBe(1);
    expect(mid.held.lease).not.toBeNull();
    answer!('Done.');
    await h.advance(0);
    expect(h.output(id)).toMatchObject({ status: 'completed', output: 'Done.', turns: 2, requests: 2 });
    expect(Object.keys(h.agent(id).context).length).toBeLessThanOrEqual(V8_FAST_ASSIGN_KEYS);
  });
});
