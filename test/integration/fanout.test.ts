/**
 * Cache-aware fan-out over HTTP against the simulated provider (Anthropic protocol, whose cache
 * commits a prefix when the response that wrote it starts). Tasks sharing a long system prompt
 * become ready together: one goes first, the rest wait for its response to start and then read
 * the cache. Without fan-out they all write it.
 */
import { describe, expect, it } from 'vitest';
import { createSwarm, type RunEvent } from '../../src/index.js';
import { minCacheTokensOf } from '../../src/models.js';

// ~3,000 tokens of shared brief (the simulator counts about 4 characters a token).
const brief = Array.from({ length: 600 }, (_, i) => `fact${i} holds;`).join(' ');

const plan = (fanOut?: boolean) => ({
  providers: { sim: { type: 'sim', sim: { ttftMs: 40 }, ...(fanOut === undefined ? {} : { cacheFanOut: fanOut }) } },
  models: { m: { provider: 'sim', model: 'sim-model', price: { input: 3, output: 15 } } },
  defaults: { maxInFlight: 10 },
  tasks: [
    { id: 'research', model: 'm', prompt: 'gather [[sim:reply the shared brief]]' },
    ...Array.from({ length: 6 }, (_, i) => ({ id: `w${i}`, model: 'm', deps: ['research'], system: `${brief}\n{{research}}`, prompt: `worker ${i}` })),
  ],
});

async function run(fanOut?: boolean, given: unknown = plan(fanOut)) {
  const swarm = createSwarm({ seed: 2 });
  const r = swarm.run(given);
  const events: RunEvent[] = [];
  r.events.on('*', (_t: string, e: RunEvent) => events.push(e));
  const result = await r.result;
  await swarm.close();
  const workers = Object.values(result.tasks).filter((t) => t.id.startsWith('w'));
  const sum = (f: (u: (typeof workers)[number]['usage']) => number) => workers.reduce((s, t) => s + f(t.usage), 0);
  return { result, events, workers, writes: sum((u) => u.cacheWriteTokens), reads: sum((u) => u.cacheReadTokens) };
}

describe('cache-aware fan-out', () => {
  it('sends one task of a shared prefix first and the rest once its response starts: one write, five reads', async () => {
    const { result, events, workers, writes, reads } = await run();
    expect(result.status).toBe('completed');
    const leads = events.filter((e): e is Extract<RunEvent, { type: 'cache:lead' }> => e.type === 'cache:lead');
    expect(leads).toHaveLength(1);
    const release = events.find((e): e is Extract<RunEvent, { type: 'cache:release' }> => e.type === 'cache:release')!;
    expect(release).toMatchObject({ taskId: leads[0]!.taskId, released: 5, warm: true });
    // The held tasks started only after the release.
    const releasedAt = events.indexOf(release);
    const starts = events.filter((e) => e.type === 'task:started' && e.taskId.startsWith('w')).map((e) => events.indexOf(e));
    expect(starts.filter((i) => i > releasedAt)).toHaveLength(5);
    // The leader wrote the shared prefix; the five others read it (each writes only its own short prompt).
    const [leader] = workers.filter((w) => w.id === leads[0]!.taskId);
    expect(leader!.usage.cacheWriteTokens).toBeGreaterThan(2000);
    expect(leader!.usage.cacheReadTokens).toBe(0);
    for (const w of workers.filter((x) => x !== leader)) {
      expect(w.usage.cacheReadTokens).toBeGreaterThan(2000);
      expect(w.usage.cacheWriteTokens).toBeLessThan(50);
    }
    expect(reads).toBeGreaterThan(5 * 2000);
    expect(writes).toBeLessThan(leader!.usage.cacheWriteTokens + 5 * 50);
  });

  it('on by default for Anthropic routes; off, nothing is held back: all six go at once, each writes the prefix or reads an earlier write', async () => {
    // Off, all six are sent at once. On an idle machine they reach the server within the 40 ms
    // before the first response starts, so each writes the prefix; on a loaded one some arrive
    // later and read what an earlier one wrote. What the runtime did is the same either way.
    const off = await run(false);
    expect(off.result.status).toBe('completed');
    expect(off.events.some((e) => e.type === 'cache:lead' || e.type === 'cache:release')).toBe(false);
    const firstResponse = off.events.findIndex((e) => e.type === 'model:response' && e.taskId.startsWith('w'));
    const started = off.events.filter((e) => e.type === 'task:started' && e.taskId.startsWith('w')).map((e) => off.events.indexOf(e));
    expect(started).toHaveLength(6);
    expect(started.every((i) => i < firstResponse)).toBe(true);
    const writers = off.workers.filter((w) => w.usage.cacheWriteTokens > 2000);
    expect(writers.length).toBeGreaterThanOrEqual(1);
    for (const w of off.workers) if (!writers.includes(w)) expect(w.usage.cacheReadTokens, w.id).toBeGreaterThan(2000);

    const on = await run(undefined);
    expect(on.events.some((e) => e.type === 'cache:lead')).toBe(true);
    expect(on.workers.filter((w) => w.usage.cacheWriteTokens > 2000)).toHaveLength(1);
    expect(off.writes).toBeGreaterThanOrEqual(on.writes);
  });

  it('under an input-token limit, a warm group leases its key for what is not read from the cache: the five go out together (reads are free on Anthropic)', async () => {
    // One key, 120,000 input tokens a minute: its bucket holds 2,000, less than one request's
    // whole prompt (~2,400 estimated). Charged whole, the five would go one at a time, each
    // after the one before had answered and its cache read was given back.
    const limits = { itpm: 120_000 };
    const limited = (protocol: 'anthropic' | 'openai') => {
      const p = plan(true);
      return { ...p, providers: { sim: { ...p.providers.sim, keys: ['k1'], limits, sim: { ttftMs: 40, limits, protocol } } } };
    };
    const go = async (protocol: 'anthropic' | 'openai') => {
      const { result, events } = await run(true, limited(protocol));
      const lead = events.find((e): e is Extract<RunEvent, { type: 'cache:lead' }> => e.type === 'cache:lead')!.taskId;
      const follower = (e: RunEvent, type: string) => e.type === type && 'taskId' in e && e.taskId.startsWith('w') && e.taskId !== lead;
      const requests = events.filter((e) => follower(e, 'model:request')).map((e) => events.indexOf(e));
      const firstAnswer = events.findIndex((e) => follower(e, 'model:response'));
      return { result, requests, firstAnswer };
    };
    const anthropic = await go('anthropic');
    expect(anthropic.result.status).toBe('completed');
    expect(anthropic.requests).toHaveLength(5);
    expect(anthropic.requests.every((i) => i < anthropic.firstAnswer)).toBe(true);
    // OpenAI-compatible routes are charged the whole prompt, cached or not (a 10 s test: 5 x 2,400
    // tokens at 2,000 a second, less what answers give back), and still complete.
    const openai = await go('openai');
    expect(openai.result.status).toBe('completed');
    expect(openai.requests.some((i) => i > openai.firstAnswer)).toBe(true);
  }, 60_000);

  it('holds nothing back for a prefix shorter than the model caches (Haiku 4.5: 4,096 tokens)', async () => {
    const swarm = createSwarm({ seed: 2 });
    const r = swarm.run({
      ...plan(),
      models: { m: { provider: 'sim', model: 'claude-haiku-4-5', price: { input: 1, output: 5 } } },
    });
    const events: RunEvent[] = [];
    r.events.on('*', (_t: string, e: RunEvent) => events.push(e));
    const result = await r.result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(events.some((e) => e.type === 'cache:lead')).toBe(false);
    expect(minCacheTokensOf('claude-opus-4-5')).toBe(4096);
    expect(minCacheTokensOf('claude-sonnet-4-5')).toBe(1024);
    expect(minCacheTokensOf('claude-3-5-haiku-latest')).toBe(2048);
  });
});
