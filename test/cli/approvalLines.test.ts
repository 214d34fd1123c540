/**
 * The progress lines of approvals (pure): `approval:requested` and `approval:decided` as log
 * lines, and a waiting approval counted as waiting (not queued) in the status line and the frame.
 */
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../machines/protocol.js';
import { formatEventLine, renderFrame, statusLine } from '../../src/cli/format.js';
import { progressState, reduce } from '../../src/cli/progressState.js';

const asked = (round: number): RunEvent => ({ type: 'approval:requested', taskId: 'ok', attempt: round, approves: 'draft', prompt: 'Send this reply?', draft: 'DRAFT', round, maxRounds: 3 });
const decided = (e: Partial<Extract<RunEvent, { type: 'approval:decided' }>>): RunEvent => ({
  type: 'approval:decided', taskId: 'ok', attempt: 1, approves: 'draft', round: 1, approved: true, by: 'cli', decidedAt: 0, outcome: 'approved', ...e,
}) as RunEvent;

describe('approval lines', () => {
  it('says what an approval asks and what was decided', () => {
    expect(formatEventLine(asked(1))).toBe('waiting for approval: ok approves draft — Send this reply?');
    expect(formatEventLine(asked(2))).toBe('waiting for approval: ok approves draft — Send this reply? (round 2 of 3)');
    expect(formatEventLine(decided({}))).toBe('approved ok by cli');
    expect(formatEventLine(decided({ note: 'ship it', edited: true, by: 'ui' }))).toBe('approved ok by ui: ship it (edited output)');
    expect(formatEventLine(decided({ approved: false, note: 'too long', outcome: 'revise' }))).toBe('rejected ok by cli: too long — "draft" goes back for another attempt');
    expect(formatEventLine(decided({ approved: false, note: 'no decision within 20 ms (timeoutMs)', by: 'timeout', outcome: 'rejected' }))).toBe('rejected ok by timeout: no decision within 20 ms (timeoutMs) — the approval fails');
  });

  it('counts a waiting approval as waiting, not queued', () => {
    const state = progressState();
    const events: RunEvent[] = [
      { type: 'run:started', runId: 'r1', tasks: 2, models: {}, keys: {}, deps: { draft: [], ok: ['draft'] } } as unknown as RunEvent,
      { type: 'task:queued', taskId: 'ok' },
      asked(1),
    ];
    for (const [i, e] of events.entries()) reduce(state, { ...e, at: 1000 + i } as never);
    expect(statusLine(state, 1002)).toBe('[0.0s] 0/2 done, 0 in flight, 0 queued, 1 waiting for approval, 0 retries');
    expect(renderFrame(state, 1002, 100)[2]).toBe('now      0 in flight, 0 queued, 1 waiting for approval, 0 retries, 0 requests');
  });
});
