/** Which runs a prune removes: never one a process holds, one interrupted, or one paused for an approval (a resume continues each). */
import { describe, expect, it } from 'vitest';
import { pickPrunable } from '../../src/store/prune.js';

describe('pickPrunable', () => {
  it('keeps running (interrupted) and paused runs, and those a live process holds', () => {
    const runs = [
      { id: 'held', status: 'running', createdAt: 1 },
      { id: 'dead', status: 'running', createdAt: 1 },
      { id: 'paused', status: 'paused', createdAt: 1 },
      { id: 'done', status: 'completed', createdAt: 1 },
      { id: 'partial', status: 'partial', createdAt: 1 },
    ];
    const picked = pickPrunable(runs, { olderThanMs: 10 }, 100, (id) => id === 'held');
    expect(picked.live).toEqual(['held']);
    expect(picked.interrupted).toEqual(['dead', 'paused']);
    expect(picked.remove.map((r) => r.id)).toEqual(['done', 'partial']);
  });
});
