/**
 * The inflight benchmark's peer (test/bench/inflightPeer.ts) is the yardstick the runtime is held
 * to, so it must make the calls it claims: whole streamed replies, never more in flight than its bound.
 */
import { describe, expect, it } from 'vitest';
import { Pool } from 'undici';
import { peerCall, peerRun } from '../bench/inflightPeer.js';
import { useSims } from './helpers.js';

const sims = useSims();

describe('inflight bench peer', () => {
  it('reads a streamed reply to its end', async () => {
    const sim = await sims({ seed: 1 });
    const pool = new Pool(sim.url);
    try {
      expect(await peerCall(pool, '[[sim:reply hello from the sim]]', 64)).toBe('hello from the sim');
      // A stream cut before message_stop is not a reply.
      await expect(peerCall(pool, '[[sim:error 529]]', 64)).rejects.toThrow(/529/);
    } finally {
      await pool.close();
    }
  });

  it('holds at most maxInFlight calls at the simulator', async () => {
    const sim = await sims({ seed: 1, latency: { ttftMs: 100 } });
    const pool = new Pool(sim.url);
    try {
      await peerRun(pool, 12, 3, (i) => `Task ${i}.`, 16);
    } finally {
      await pool.close();
    }
    expect(sim.stats().requests).toBe(12);
    expect(sim.stats().peakInFlight).toBeLessThanOrEqual(3);
    expect(sim.stats().peakInFlight).toBeGreaterThan(1);
  });
});
