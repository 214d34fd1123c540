/**
 * What one task costs in XState's currency, counted with `inspect` on a real run (scripted
 * provider, no journal): the actors it spawns and the events its agent, its group and the
 * supervisor receive. Every event copies a snapshot and every actor is a mailbox, a system
 * registration and a stop, so these counts are what makes a task cheap; they are stated here
 * without timing.
 */
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm } from '../../src/index.js';

const TASKS = 60;

function plan(n: number) {
  const tasks = [];
  for (let i = 0; i < n; i++) tasks.push({ id: `t${i}`, model: 'fast', prompt: `task ${i}`, deps: i >= 10 ? [`t${i - 10}`] : [] });
  return {
    providers: { p: { type: 'sim' as const } },
    models: { fast: { provider: 'p', model: 'instant' } },
    defaults: { maxInFlight: 8 },
    tasks,
  };
}

type Inspected = { type: string; actorRef: { logic?: { id?: string }; src?: unknown }; event?: { type: string }; _transitions?: unknown[] };

async function countRun(n: number, reply: (n: number) => string = () => 'ok') {
  const events = new Map<string, number>();
  const actors = new Map<string, number>();
  /** Transitions taken, by actor kind and the event of their macrostep (eventless ones included). */
  const transitions = new Map<string, number>();
  const kindOf = (e: Inspected) => String(e.actorRef.logic?.id ?? e.actorRef.src ?? '?');
  let calls = 0;
  const swarm = createSwarm({
    providers: { p: createScriptedProvider({ reply: () => reply(calls++) }) },
    store: false,
    inspect: (inspected) => {
      const e = inspected as unknown as Inspected;
      if (e.type === '@xstate.event') {
        const key = `${kindOf(e)} <- ${String(e.event!.type).replace(/[0-9]+/g, 'N')}`;
        events.set(key, (events.get(key) ?? 0) + 1);
      }
      if (e.type === '@xstate.microstep') {
        const key = `${kindOf(e)} <- ${String(e.event!.type).replace(/[0-9]+/g, 'N')}`;
        transitions.set(key, (transitions.get(key) ?? 0) + (e._transitions?.length ?? 0));
      }
      if (e.type === '@xstate.actor') actors.set(kindOf(e), (actors.get(kindOf(e)) ?? 0) + 1);
    },
  });
  const result = await swarm.run(plan(n)).result;
  await swarm.close();
  const received = (kind: string) => [...events].filter(([k]) => k.startsWith(`${kind} <- `)).reduce((sum, [, v]) => sum + v, 0);
  return { result, events, actors, received, transitions };
}

describe('a task in XState events and actors', () => {
  it('spawns one actor per task (its agent: the model call is no actor of its own)', async () => {
    const { result, actors } = await countRun(TASKS);
    expect(result.totals.completed).toBe(TASKS);
    expect(actors.get('agent')).toBe(TASKS);
    // Everything else is per run (the supervisor, its groups, pool, keys, breakers, bus).
    const others = [...actors].filter(([k]) => k !== 'agent').reduce((sum, [, v]) => sum + v, 0);
    expect(others).toBeLessThan(TASKS / 4);
  });

  it("costs its agent, its group and the supervisor at most 6 events: spawn, the agent's init, the lease, the reply, the end (2)", async () => {
    const { events, received } = await countRun(TASKS);
    // The agent: its init, the lease granted, the model's reply (no START: it is active from its spawn).
    expect(received('agent')).toBe(3 * TASKS);
    expect(events.get('agent <- MODEL.REPLY')).toBe(TASKS);
    expect(events.has('agent <- START')).toBe(false);
    // The group: SPAWN and the agent's done event; the supervisor: AGENT.ENDED.
    expect(received('group')).toBeLessThanOrEqual(2 * TASKS + 2);
    expect(received('supervisor')).toBeLessThanOrEqual(TASKS + 2);
  });

  it('costs 10 events per task in all, none of them the breaker\'s: the pool lets a clean route\'s calls through and keeps their successes', async () => {
    const { result, events, received } = await countRun(TASKS);
    expect(result.totals.completed).toBe(TASKS);
    // Per task: SPAWN, init, LEASE.REQUEST, KEY.GRANT, LEASE.GRANTED, MODEL.REPLY, LEASE.RELEASE,
    // KEY.RELEASE, the done event, AGENT.ENDED; the rest is per run (start-up, key and breaker news).
    const total = [...events.values()].reduce((a, b) => a + b, 0);
    expect(total, JSON.stringify(Object.fromEntries(events))).toBeLessThanOrEqual(10 * TASKS + 30);
    // The breaker: its own init, nothing per task (it used to take BREAKER.ADMIT and BREAKER.REPORT).
    expect(received('breaker')).toBe(1);
    expect(events.get('pool <- BREAKER.STATE')).toBe(1);
  });

  it('takes its agent 2 transitions (the lease granted, the reply): no transient step from its spawn to its lease request', async () => {
    const { transitions } = await countRun(TASKS);
    const agent = [...transitions].filter(([k]) => k.startsWith('agent <- '));
    // A call with nothing to check (no hook, no budget, within its input budget) asks for its lease
    // as the agent enters its first state: its init takes no eventless transition.
    expect(transitions.get('agent <- xstate.init') ?? 0).toBe(0);
    expect(agent.reduce((sum, [, v]) => sum + v, 0)).toBe(2 * TASKS);
  });
});
