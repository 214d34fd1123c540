/** A key actor under a minimal parent that logs what the key tells it, on a SimulatedClock (key tests). */
import { createActor, setup, SimulatedClock, spawnChild } from 'xstate';
import type { ActorRefFrom } from 'xstate';
import { keyMachine } from '../../machines/key.machine.js';
import type { KeyInput, KeyReply } from '../../machines/key.machine.js';
import type { KeyLimits, KeyState, LeaseOutcome, LeaseReply, LeaseRequest, RunEvent, Usage } from '../../machines/protocol.js';
import { advanceClock } from './clock.js';

export const request = (inputTokens = 10, outputTokens = 10): LeaseRequest => ({ requestId: 'r', priority: 0, inputTokens, outputTokens });
export const usage = (inputTokens: number, outputTokens: number): Usage => ({ inputTokens, outputTokens, cacheWriteTokens: 0, cacheReadTokens: 0 });

/** Key `k1` with these limits, under a parent that records every reply (with its time) and every run event. */
export function harness(limits: KeyLimits, probation?: boolean, more: Partial<KeyInput> = {}) {
  const clock = new SimulatedClock();
  const replies: Array<{ at: number; reply: KeyReply | LeaseReply }> = [];
  const reports: Array<RunEvent & { at: number }> = [];
  const key = keyMachine.provide({ actions: { report: (_, e: RunEvent) => void reports.push({ ...e, at: clock.now() }) } });
  const parent = createActor(
    setup({ actors: { key } }).createMachine({
      entry: spawnChild('key', { id: 'key', input: { ...(probation === undefined ? { keyId: 'k1', limits } : { keyId: 'k1', limits, probation }), ...more } }),
      on: { '*': { actions: ({ event }) => void replies.push({ at: clock.now(), reply: event as KeyReply | LeaseReply }) } },
    }),
    { clock },
  ).start();
  const ref = parent.getSnapshot().children.key as ActorRefFrom<typeof keyMachine>;
  const state = (): KeyState => {
    const snap = ref.getSnapshot();
    return (typeof snap.value === 'string' ? snap.value : Object.keys(snap.value)[0]) as KeyState;
  };
  return {
    clock,
    replies,
    reports,
    ref,
    state,
    grant: (leaseId: string, req = request()) => ref.send({ type: 'KEY.GRANT', leaseId, request: req, replyTo: parent }),
    release: (leaseId: string, outcome: LeaseOutcome) => ref.send({ type: 'KEY.RELEASE', leaseId, outcome }),
    at: (ms: number) => advanceClock(clock, ms),
    last: () => replies[replies.length - 1]?.reply,
    answers: () => replies.filter((r) => r.reply.type !== 'KEY.STATE').map((r) => r.reply),
  };
}
