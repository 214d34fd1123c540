/**
 * Approval tasks end to end against the simulated provider: a branch stops at an approval while
 * the rest of the run goes on; a decision from code continues it at once (an edited output
 * replaces the draft; a rejection with a note sends the draft back); with nothing else to run
 * the run ends `paused`, and a decision written to the journal is applied by a resume in a new
 * swarm (a process restart).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSwarm, NonRetryableError, type FnContext, type RunEvent, type RunHandle } from '../../src/index.js';

type Ev<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

const base = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 5 } } },
};

const plan = {
  ...base,
  tasks: [
    { id: 'draft', model: 'fast', prompt: 'draft a reply [[sim:reply DRAFT]]' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
    { id: 'send', model: 'fast', deps: ['ok', 'draft'], prompt: 'send {{draft}} [[sim:reply SENT]]' },
    { id: 'other', model: 'fast', prompt: 'unrelated [[sim:reply OTHER]]' },
  ],
};

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-approval-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function collect(run: RunHandle<unknown>): RunEvent[] {
  const events: RunEvent[] = [];
  run.events.on('*', (_type: string, e: RunEvent) => events.push(e));
  return events;
}

describe('approval tasks', () => {
  it('waits for a decision from code while the rest runs; an edited output replaces the draft for what follows', async () => {
    const swarm = createSwarm({ seed: 1, store: false });
    try {
      const run = swarm.run(plan, { holdApprovals: true });
      const events = collect(run);
      run.events.on('approval:requested', (e) => {
        expect(e).toMatchObject({ taskId: 'ok', approves: 'draft', prompt: 'Send this reply?', draft: 'DRAFT', round: 1 });
        queueMicrotask(() => run.approve('ok', { approved: true, note: 'fine, shortened', output: 'EDITED' }));
      });
      const result = await run.result;
      expect(result.status).toBe('completed');
      expect(result.tasks.ok).toMatchObject({ status: 'completed', output: { approved: true, note: 'fine, shortened' } });
      expect(result.tasks.draft!.output).toBe('EDITED');
      const decided = events.find((e): e is Ev<'approval:decided'> => e.type === 'approval:decided')!;
      expect(decided).toMatchObject({ taskId: 'ok', approved: true, by: 'code', edited: true, outcome: 'approved' });
      // `send` started only after the decision, and read the edited draft.
      const at = (pred: (e: RunEvent) => boolean) => events.findIndex(pred);
      expect(at((e) => e.type === 'task:started' && e.taskId === 'send')).toBeGreaterThan(at((e) => e.type === 'approval:decided'));
    } finally {
      await swarm.close();
    }
  });

  it('a rejection with a note sends the draft back with the note; after maxRounds a rejection fails the approval', async () => {
    const swarm = createSwarm({ seed: 1, store: false });
    try {
      const run = swarm.run({ ...plan, tasks: plan.tasks.map((t) => (t.id === 'ok' ? { ...t, maxRounds: 2 } : t)) }, { holdApprovals: true });
      const events = collect(run);
      run.events.on('approval:requested', (e) => queueMicrotask(() => run.approve('ok', { approved: false, note: `too long (round ${e.round})` })));
      const result = await run.result;
      const asked = events.filter((e): e is Ev<'approval:requested'> => e.type === 'approval:requested');
      expect(asked.map((e) => e.round)).toEqual([1, 2]);
      const decided = events.filter((e): e is Ev<'approval:decided'> => e.type === 'approval:decided');
      expect(decided.map((e) => e.outcome)).toEqual(['revise', 'rejected']);
      expect(result.tasks.draft!.revisions).toBe(1);
      expect(result.tasks.ok).toMatchObject({ status: 'failed', error: { code: 'rejected' } });
      expect(result.tasks.send!.status).toBe('skipped');
      expect(result.tasks.other!.status).toBe('completed');
      expect(result.status).toBe('partial');
    } finally {
      await swarm.close();
    }
  });

  it('ends the run paused when only the approval waits; a decision in the journal and a resume in a new process finish it', async () => {
    const store = join(dir, 'journal.db');
    const first = createSwarm({ seed: 1, store });
    let runId: string;
    try {
      const run = first.run(plan);
      runId = run.id;
      const result = await run.result;
      expect(result.status).toBe('paused');
      expect(result.tasks.ok!.status).toBe('waiting');
      expect(result.tasks.send!.status).toBe('pending');
      expect(result.tasks.other!.status).toBe('completed');
      expect(() => first.approve(runId, 'other', { approved: true })).toThrow(/task "other" of run .* is not waiting for approval \(it is completed\)/);
      expect(() => first.approve('nope', 'ok', { approved: true })).toThrow(/no run nope in/);
    } finally {
      await first.close();
    }
    // Another process decides, another resumes.
    const decider = createSwarm({ seed: 1, store });
    const before = Date.now();
    decider.approve(runId, 'ok', { approved: true, note: 'ship it' }, 'cli');
    const after = Date.now();
    await decider.close();
    const second = createSwarm({ seed: 1, store });
    try {
      const resumed = second.resume(runId);
      const events = collect(resumed);
      const result = await resumed.result;
      expect(result.status).toBe('completed');
      expect(result.tasks.ok).toMatchObject({ status: 'completed', output: { approved: true, note: 'ship it' } });
      expect(result.tasks.send).toMatchObject({ status: 'completed', output: 'SENT' });
      const decided = events.find((e): e is Ev<'approval:decided'> => e.type === 'approval:decided')!;
      expect(decided).toMatchObject({ by: 'cli', note: 'ship it' });
      // When it was decided, not when the resume applied it.
      expect(decided.decidedAt).toBeGreaterThanOrEqual(before);
      expect(decided.decidedAt).toBeLessThanOrEqual(after);
      // The other branch was not run again.
      expect(events.some((e) => e.type === 'task:started' && e.taskId === 'other')).toBe(false);
    } finally {
      await second.close();
    }
  });

  it('an edited output stays the approved task\'s output in the journal: a retry of what failed after it reads the edit', async () => {
    const store = join(dir, 'journal.db');
    const edited = {
      ...base,
      tasks: [
        { id: 'draft', model: 'fast', prompt: 'draft a reply [[sim:reply DRAFT]]' },
        { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
        { id: 'send', kind: 'fn', fn: 'send', deps: ['ok', 'draft'] },
      ],
    };
    const seen: unknown[] = [];
    const first = createSwarm({ seed: 1, store, functions: { send: () => { throw new NonRetryableError('the mail server is down'); } } });
    let runId: string;
    try {
      const run = first.run(edited, { holdApprovals: true });
      runId = run.id;
      run.events.on('approval:requested', () => queueMicrotask(() => run.approve('ok', { approved: true, output: 'EDITED' })));
      const result = await run.result;
      expect(result.status).toBe('partial');
      expect(result.tasks.draft!.output).toBe('EDITED');
      expect(result.tasks.send!.status).toBe('failed');
    } finally {
      await first.close();
    }
    const second = createSwarm({ seed: 1, store, functions: { send: (ctx) => { seen.push(ctx.deps.draft); return 'sent'; } } });
    try {
      const result = await second.retry(runId).result;
      expect(result.status).toBe('completed');
      expect(seen).toEqual(['EDITED']);
      expect(result.tasks.draft!.output).toBe('EDITED');
      expect(result.tasks.send).toMatchObject({ status: 'completed', output: 'sent' });
    } finally {
      await second.close();
    }
  });

  it('a rejection with a note runs a function step again with the note and its previous value (ctx.revision)', async () => {
    const calls: FnContext[] = [];
    const swarm = createSwarm({
      seed: 1,
      store: false,
      functions: { compose: (ctx) => { calls.push(ctx); return { text: ctx.revision ? `${ctx.revision.findings}: ok` : 'first' }; } },
    });
    try {
      const run = swarm.run(
        { ...base, tasks: [{ id: 'draft', kind: 'fn', fn: 'compose' }, { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Good?', maxRounds: 3 }] },
        { holdApprovals: true },
      );
      run.events.on('approval:requested', (e) => {
        queueMicrotask(() => run.approve('ok', e.round === 1 ? { approved: false, note: 'shorter' } : { approved: true }));
      });
      const result = await run.result;
      expect(result.status).toBe('completed');
      expect(calls.map((c) => c.revision)).toEqual([undefined, { round: 1, maxRounds: 3, findings: 'shorter', previous: { text: 'first' } }]);
      expect(calls.map((c) => c.attempt)).toEqual([1, 2]);
      expect(result.tasks.draft!.output).toEqual({ text: 'shorter: ok' });
    } finally {
      await swarm.close();
    }
  });

  it('ends the wait as rejected when timeoutMs passes', async () => {
    const swarm = createSwarm({ seed: 1, store: false });
    try {
      const run = swarm.run({ ...plan, tasks: plan.tasks.map((t) => (t.id === 'ok' ? { ...t, timeoutMs: 20 } : t)) }, { holdApprovals: true });
      const events = collect(run);
      const result = await run.result;
      expect(result.tasks.ok).toMatchObject({ status: 'failed', error: { code: 'rejected' } });
      expect(events.find((e) => e.type === 'approval:decided')).toMatchObject({ by: 'timeout', outcome: 'rejected' });
    } finally {
      await swarm.close();
    }
  });
});
