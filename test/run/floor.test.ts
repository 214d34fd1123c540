/**
 * The scheduler bench's floor (test/bench/floor.ts) is only a floor while it plays the runtime's
 * messages: the same events per task, by the same kinds of actor, and one spawned actor per task.
 * Counted with `inspect` on both: if the runtime sends a message more or less per task, this
 * fails until the floor is brought in line.
 */
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm } from '../../src/index.js';
import { runFloor } from '../bench/floor.js';

const TASKS = 200;

type Inspected = { type: string; actorRef: { logic?: { id?: string }; src?: unknown }; event?: { type: string } };

/** Per-task counts of `<receiver> <- <event type>` (digits as N), and the actors spawned. */
function counter() {
  const events = new Map<string, number>();
  let spawned = 0;
  const inspect = (inspected: unknown) => {
    const e = inspected as Inspected;
    if (e.type === '@xstate.actor') spawned++;
    if (e.type !== '@xstate.event') return;
    const kind = String(e.actorRef.logic?.id ?? e.actorRef.src ?? '?');
    const key = `${kind} <- ${String(e.event!.type).replace(/[0-9]+/g, 'N')}`;
    events.set(key, (events.get(key) ?? 0) + 1);
  };
  /** Events seen about once per task (start-up events are seen a few times in all). */
  const perTask = () => new Map([...events].filter(([, n]) => n >= TASKS / 2).map(([k, n]) => [k, n / TASKS]));
  return { inspect, perTask, spawned: () => spawned };
}

describe('the scheduler bench floor', () => {
  it('receives the same events per task as a real run, and spawns one actor per task', async () => {
    const real = counter();
    const swarm = createSwarm({ providers: { p: createScriptedProvider({ reply: () => 'ok' }) }, store: false, inspect: real.inspect });
    const tasks = Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}`, model: 'm', prompt: `task ${i}` }));
    const result = await swarm.run({ providers: { p: { type: 'sim' } }, models: { m: { provider: 'p', model: 'instant' } }, defaults: { maxInFlight: 50 }, tasks }).result;
    await swarm.close();
    expect(result.totals.completed).toBe(TASKS);

    const floor = counter();
    await runFloor(TASKS, 50, floor.inspect);

    const expected = [...real.perTask()].sort();
    expect(expected.length).toBeGreaterThanOrEqual(10);
    expect([...floor.perTask()].sort()).toEqual(expected);
    // Per task: the agent; per run: the supervisor and its children (a handful).
    expect(real.spawned() - TASKS).toBeLessThan(20);
    expect(floor.spawned() - TASKS).toBeLessThan(20);
  });
});
