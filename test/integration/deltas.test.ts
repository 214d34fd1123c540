/**
 * Opt-in `task:delta` events through real streamed HTTP from the simulator on both wire
 * protocols: the pieces arrive in order, before the task completes, and add up to its output;
 * none without the option, and none in the journal. A reply that is not streamed (a scripted
 * provider) arrives as one piece.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm, MemoryStore, startSim, type RunEvent, type RunResult, type SimServer } from '../../src/index.js';

let sim: SimServer;
beforeAll(async () => {
  sim = await startSim({ seed: 5, latency: { ttftMs: 5, tokensPerSecond: 4000 } });
});
afterAll(() => sim.close());

const env = { DELTA_KEY: 'sk-delta-secret-value' };
const planOf = (protocol: 'anthropic' | 'openai') => ({
  providers: { p: { type: protocol, baseURL: protocol === 'openai' ? `${sim.url}/v1` : sim.url, keys: [{ env: 'DELTA_KEY' }] } },
  models: { m: { provider: 'p', model: protocol === 'openai' ? 'gpt-4.1-mini' : 'claude-haiku-4-5', maxTokens: 200 } },
  defaults: { maxInFlight: 3 },
  tasks: [
    { id: 'one', model: 'm', prompt: `write a paragraph (${protocol}) [[sim:length 80]]` },
    { id: 'two', model: 'm', prompt: `another one (${protocol}) [[sim:length 50]]` },
    { id: 'three', model: 'm', deps: ['one', 'two'], prompt: `join them [[sim:length 60]]` },
  ],
});

async function runWith(plan: unknown, deltas: boolean | undefined, store = new MemoryStore()) {
  const swarm = createSwarm({ env, store, ...(deltas !== undefined ? { deltas } : {}) });
  const run = swarm.run(plan);
  const events: RunEvent[] = [];
  run.events.on('*', (_type, e) => events.push(e as RunEvent));
  const result: RunResult = await run.result;
  await swarm.close();
  return { events, result, store, runId: run.id };
}

describe('task:delta', () => {
  it.each(['anthropic', 'openai'] as const)('%s: streamed pieces arrive in order and add up to each task output', async (protocol) => {
    const { events, result } = await runWith(planOf(protocol), true);
    expect(result.status).toBe('completed');
    for (const id of ['one', 'two', 'three']) {
      const own = events.filter((e) => 'taskId' in e && e.taskId === id);
      const deltas = own.filter((e): e is Extract<RunEvent, { type: 'task:delta' }> => e.type === 'task:delta');
      // Streamed: many pieces, not the whole text once.
      expect(deltas.length, id).toBeGreaterThan(3);
      expect(deltas.map((d) => d.text).join('')).toBe(result.tasks[id]!.output);
      expect(deltas.every((d) => d.attempt === 1 && d.turn === 0)).toBe(true);
      // All of them after the task started and before it completed.
      const types = own.map((e) => e.type);
      const first = types.indexOf('task:delta');
      expect(types.indexOf('task:started')).toBeLessThan(first);
      expect(types.lastIndexOf('task:delta')).toBeLessThan(types.indexOf('task:completed'));
    }
  });

  it('sends none by default, or when a run turns them off; journals none', async () => {
    const off = await runWith(planOf('anthropic'), undefined);
    expect(off.result.status).toBe('completed');
    expect(off.events.some((e) => e.type === 'task:delta')).toBe(false);

    const swarm = createSwarm({ env, store: new MemoryStore(), deltas: true });
    const run = swarm.run(planOf('openai'), { deltas: false });
    let seen = 0;
    run.events.on('task:delta', () => void (seen += 1));
    expect((await run.result).status).toBe('completed');
    await swarm.close();
    expect(seen).toBe(0);

    // With them on, the journal holds what it holds without them: the outputs, whole.
    const on = await runWith(planOf('anthropic'), true);
    const rows = on.store.loadTasks(on.runId);
    expect(rows.map((r) => r.output)).toEqual(['one', 'two', 'three'].map((id) => on.result.tasks[id]!.output));
    expect(JSON.stringify(rows)).not.toContain('task:delta');
  });

  it('a reply that was not streamed arrives as one piece', async () => {
    const plan = { providers: { llm: { type: 'sim' } }, models: { m: { provider: 'llm', model: 'x' } }, tasks: [{ id: 'a', model: 'm', prompt: 'hi' }] };
    const swarm = createSwarm({ store: false, deltas: true, providers: { llm: createScriptedProvider(() => 'the whole answer') } });
    const run = swarm.run(plan);
    const texts: string[] = [];
    run.events.on('task:delta', (e) => void texts.push(e.text));
    await run.result;
    await swarm.close();
    expect(texts).toEqual(['the whole answer']);
  });
});
