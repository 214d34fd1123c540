/**
 * The scheduler bench's minimal actor-per-agent program (test/bench/minimalSwarm.ts) is a fair
 * baseline only while it does the work of the run it is compared with: every task of the plan
 * done, none before its dependencies, at most maxInFlight agents at once, each task its own agent
 * that asks the key for a grant; and only that: five events and one actor per task.
 */
import { describe, expect, it } from 'vitest';
import { layeredPlan } from '../bench/plans.js';
import { runMinimalSwarm } from '../bench/minimalSwarm.js';

const TASKS = 400;

type Inspected = { type: string; actorRef: { logic?: { id?: string } }; event?: { type: string; task?: number } };

describe('the minimal actor-per-agent program', () => {
  it('runs every task of the layered plan after its dependencies, 50 at a time, with 5 events and one actor per task', async () => {
    const plan = layeredPlan(TASKS);
    const events = new Map<string, number>();
    const order: number[] = [];
    let spawned = 0;
    let live = 0;
    let maxLive = 0;
    const results = await runMinimalSwarm(plan, (inspected) => {
      const e = inspected as Inspected;
      if (e.type === '@xstate.actor' && e.actorRef.logic?.id === 'agent') {
        spawned++;
        maxLive = Math.max(maxLive, ++live);
      }
      if (e.type !== '@xstate.event') return;
      const key = `${e.actorRef.logic?.id} <- ${e.event!.type}`;
      events.set(key, (events.get(key) ?? 0) + 1);
      if (e.event!.type === 'DONE') {
        order.push(e.event!.task!);
        live--;
      }
    });

    expect(results).toEqual(Array.from({ length: TASKS }, () => 'ok'));
    const doneAt = new Map(order.map((task, i) => [task, i]));
    expect(doneAt.size).toBe(TASKS);
    plan.tasks.forEach((t, i) => {
      for (const d of t.deps) expect(doneAt.get(Number(d.slice(1)))!).toBeLessThan(doneAt.get(i)!);
    });
    expect(spawned).toBe(TASKS);
    expect(maxLive).toBe(50);
    expect(Object.fromEntries(events)).toEqual({
      'supervisor <- xstate.init': 1,
      'key <- xstate.init': 1,
      'agent <- xstate.init': TASKS,
      'key <- GRANT': TASKS,
      'agent <- GRANTED': TASKS,
      'agent <- REPLY': TASKS,
      'supervisor <- DONE': TASKS,
    });
  });
});
