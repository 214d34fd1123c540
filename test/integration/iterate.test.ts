/**
 * `for await (const event of run)` and `run.stream()` on real runs against the embedded simulator
 * (real HTTP over loopback): every event from `run:started` to `run:completed`, in the order
 * `run.events` hears them, for an iterator made at once, made after the run ended, or read by
 * nobody until then (the run does not wait for it); `break` releases it; a run that cannot start
 * makes it throw the error `result` rejects with; retry and resume handles iterate too; each
 * event is typed by its `type`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createSwarm, definePlan, MemoryStore, PlanValidationError, type RunEvent, type RunEventStream, type RunHandle, type TimedRunEvent } from '../../src/index.js';

const planOf = (tag: string, extra: Record<string, unknown> = {}) => ({
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 64 } },
  defaults: { maxInFlight: 3 },
  tasks: [
    { id: 'a', model: 'fast', prompt: `first ${tag} [[sim:length 20]]` },
    { id: 'b', model: 'fast', prompt: `second ${tag} [[sim:length 20]]` },
    { id: 'c', model: 'fast', deps: ['a', 'b'], prompt: `third ${tag} [[sim:length 20]]` },
    { id: 'd', model: 'fast', deps: ['a'], prompt: `fourth ${tag} [[sim:length 20]]` },
    { id: 'e', model: 'fast', deps: ['c', 'd'], prompt: `fifth ${tag} [[sim:length 20]]` },
  ],
  ...extra,
});

/** Every event `run.events` hears, subscribed in the same synchronous block as run(). */
function hear(run: RunHandle<unknown>): TimedRunEvent[] {
  const heard: TimedRunEvent[] = [];
  run.events.on('*', (_type, e) => heard.push(e as TimedRunEvent));
  return heard;
}

const completedIds = (events: readonly RunEvent[]) =>
  events
    .filter((e) => e.type === 'task:completed')
    .map((e) => e.taskId)
    .sort();

describe('iterating a run', () => {
  it('for await over the handle reads every event in order, run:started first, run:completed last, as run.events hears them', async () => {
    const swarm = createSwarm({ store: new MemoryStore() });
    try {
      const run = swarm.run(planOf('order'));
      const heard = hear(run);
      const read: TimedRunEvent[] = [];
      for await (const event of run) read.push(event);
      const result = await run.result;
      expect(result.status).toBe('completed');
      expect(read[0]!.type).toBe('run:started');
      expect(read.at(-1)).toMatchObject({ type: 'run:completed', status: 'completed' });
      expect(completedIds(read)).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(read.every((e) => typeof e.at === 'number')).toBe(true);
      expect(read).toEqual(heard);
      // e runs after c and d: its completion comes after theirs in the stream.
      const at = (type: string, id: string) => read.findIndex((e) => e.type === type && 'taskId' in e && e.taskId === id);
      expect(at('task:started', 'e')).toBeGreaterThan(at('task:completed', 'c'));
      expect(at('task:started', 'e')).toBeGreaterThan(at('task:completed', 'd'));
    } finally {
      await swarm.close();
    }
  });

  it('an iterator made after the run ended, and one nobody read until then, each read every event from the first', async () => {
    const swarm = createSwarm({ store: new MemoryStore() });
    try {
      const run = swarm.run(planOf('late'));
      const heard = hear(run);
      const idle = run.stream();
      // The run ends although `idle` has read nothing: a reader never holds the run up.
      expect((await run.result).status).toBe('completed');
      const late: TimedRunEvent[] = [];
      for await (const event of run) late.push(event);
      const fromIdle: TimedRunEvent[] = [];
      for await (const event of idle) fromIdle.push(event);
      expect(heard.at(-1)!.type).toBe('run:completed');
      expect(late).toEqual(heard);
      expect(fromIdle).toEqual(heard);
    } finally {
      await swarm.close();
    }
  });

  it('two iterators at once each read everything; break releases one and the run goes on', async () => {
    const swarm = createSwarm({ store: new MemoryStore() });
    try {
      const run = swarm.run(planOf('two'));
      const heard = hear(run);
      const first = run.stream();
      let brokeAt: string | undefined;
      const readAll = (async () => {
        const all: TimedRunEvent[] = [];
        for await (const event of run.stream()) all.push(event);
        return all;
      })();
      for await (const event of first) {
        if (event.type === 'task:completed') {
          brokeAt = event.taskId;
          break;
        }
      }
      expect(['a', 'b']).toContain(brokeAt);
      expect(await first.next()).toEqual({ done: true, value: undefined });
      const all = await readAll;
      expect((await run.result).status).toBe('completed');
      expect(completedIds(all)).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(all).toEqual(heard);
    } finally {
      await swarm.close();
    }
  });

  it('a run that cannot start: the iterator reads no event and throws the error result rejects with', async () => {
    const swarm = createSwarm({ store: new MemoryStore() });
    try {
      const missing = join(mkdtempSync(join(tmpdir(), 'swarmstate-iterate-')), 'missing.mjs');
      const run = swarm.run(planOf('refused', { hooks: { module: missing } }));
      const early = run.stream();
      const refusal = await run.result.then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(PlanValidationError);
      expect((refusal as Error).message).toContain('hooks.module');
      for (const it of [early, run.stream()]) {
        const read: TimedRunEvent[] = [];
        const thrown = await (async () => {
          for await (const event of it) read.push(event);
        })().then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(read).toEqual([]);
        expect(thrown).toBe(refusal);
      }
    } finally {
      await swarm.close();
    }
  });

  it('a retry handle iterates its own life; a resume of a finished run yields nothing and ends', async () => {
    const swarm = createSwarm({ store: new MemoryStore() });
    try {
      const plan = planOf('retry', { defaults: { maxInFlight: 3, maxRetries: 0 } });
      plan.tasks[1] = { id: 'b', model: 'fast', prompt: 'second retry [[sim:error 400 1]]' };
      const first = swarm.run(plan);
      const firstRead: TimedRunEvent[] = [];
      for await (const event of first) firstRead.push(event);
      expect(firstRead.at(-1)).toMatchObject({ type: 'run:completed', status: 'partial' });

      const again = swarm.retry(first.id);
      const read: TimedRunEvent[] = [];
      for await (const event of again) read.push(event);
      expect((await again.result).status).toBe('completed');
      expect(read[0]).toMatchObject({ type: 'run:started', resumed: true, retried: 3 });
      expect(read.at(-1)).toMatchObject({ type: 'run:completed', status: 'completed' });
      expect(completedIds(read)).toEqual(['b', 'c', 'e']);

      const finished = swarm.resume(first.id);
      const none: TimedRunEvent[] = [];
      for await (const event of finished) none.push(event);
      expect(none).toEqual([]);
      expect((await finished.result).status).toBe('completed');
    } finally {
      await swarm.close();
    }
  });

  it('each event is typed by its type: narrowing on `type` gives that event its fields', async () => {
    const swarm = createSwarm({ store: new MemoryStore() });
    try {
      const plan = definePlan({
        providers: { sim: { type: 'sim' } },
        models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 64 } },
        tasks: [{ id: 'only', model: 'fast', prompt: 'say it [[sim:reply typed words]]' }],
      });
      const run = swarm.run(plan);
      const outputs: string[] = [];
      let status: string | undefined;
      for await (const event of run) {
        expectTypeOf(event).toEqualTypeOf<TimedRunEvent>();
        expectTypeOf(event.at).toEqualTypeOf<number>();
        if (event.type === 'task:completed') {
          expectTypeOf(event.output).toEqualTypeOf<string>();
          expectTypeOf(event.taskId).toEqualTypeOf<string>();
          outputs.push(event.output);
        }
        if (event.type === 'run:completed') {
          expectTypeOf(event.status).toEqualTypeOf<'completed' | 'partial' | 'failed' | 'cancelled' | 'budget_exceeded' | 'paused'>();
          status = event.status;
        }
        // @ts-expect-error `output` is a field of some events only: narrow on `type` first
        void event.output;
      }
      expectTypeOf(run.stream()).toEqualTypeOf<RunEventStream>();
      expectTypeOf(run.stream()).toExtend<AsyncIterableIterator<TimedRunEvent>>();
      expect(outputs).toEqual(['typed words']);
      expect(status).toBe('completed');
    } finally {
      await swarm.close();
    }
  });
});
