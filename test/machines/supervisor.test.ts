import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assign, createActor, setup, SimulatedClock } from 'xstate';
import type { AgentInput, agentMachine } from '../../machines/agent/index.js';
import type { AttemptReport, ErrorInfo, RunEvent } from '../../machines/protocol.js';
import { ZERO_USAGE } from '../../machines/protocol.js';
import type { SupervisedTask } from '../../machines/tasks/types.js';
import { supervisorMachine, type SupervisorInput } from '../../machines/supervisor/machine.js';
import { groupMachine } from '../../machines/supervisor/group.machine.js';

/** The agents' group with a stand-in agent in it (the supervisor spawns groups, groups spawn agents). */
const groupWith = (agent: unknown) => groupMachine.provide({ actors: { agent: agent as typeof agentMachine } });

type Outcome = 'ok' | 'retryable' | 'fatal' | 'crash';

/**
 * A stand-in agent: after `delay` ms of simulated time it ends as its script says. It checks
 * nothing itself; the supervisor's behaviour is what the tests observe.
 */
function fakeAgent(script: (input: AgentInput) => { outcome: Outcome; delayMs: number; ignoresCancel?: boolean }): typeof agentMachine {
  const machine = setup({
    types: {} as {
      input: AgentInput;
      context: { input: AgentInput; outcome: Outcome; delayMs: number; ignoresCancel?: boolean; error?: ErrorInfo; status?: AttemptReport['status'] };
    },
    delays: { work: ({ context }) => context.delayMs },
    actions: {
      crash: () => {
        throw new Error('agent bug');
      },
    },
  }).createMachine({
    context: ({ input }) => ({ input, ...script(input) }),
    // Active from its spawn, as the agent is (no START).
    initial: 'working',
    states: {
      working: {
        after: {
          work: [
            { guard: ({ context }) => context.outcome === 'ok', target: 'done' },
            { guard: ({ context }) => context.outcome === 'crash', actions: 'crash' },
            {
              target: 'failed',
              actions: assign({
                error: ({ context }) => ({ code: 'server_error' as const, message: 'boom', retryable: context.outcome === 'retryable' }),
              }),
            },
          ],
        },
        // ignoresCancel: an agent whose report is already on its way when the CANCEL arrives.
        on: { CANCEL: { guard: ({ context }) => !context.ignoresCancel, target: 'cancelled' } },
      },
      done: { type: 'final', entry: assign({ status: 'completed' as const }) },
      failed: { type: 'final', entry: assign({ status: 'failed' as const }) },
      cancelled: { type: 'final', entry: assign({ status: 'cancelled' as const }) },
    },
    output: ({ context }): AttemptReport => {
      const status = context.status ?? 'failed';
      return {
        taskId: context.input.taskId,
        attempt: context.input.attempt,
        status,
        ...(status === 'completed' ? { output: `out:${context.input.taskId}` } : {}),
        ...(context.error ? { error: context.error } : {}),
        usage: ZERO_USAGE,
        requests: 1,
        retries: 0,
        turns: 1,
        messages: [],
      };
    },
  });
  // The supervisor only needs an actor that takes AgentInput and outputs an AttemptReport.
  return machine as unknown as typeof agentMachine;
}

/** The agents in flight: the children of the supervisor's group actors. */
function agentsOf(actor: { getSnapshot(): { children: Record<string, { getSnapshot(): unknown } | undefined> } }): string[] {
  const out: string[] = [];
  for (const [id, group] of Object.entries(actor.getSnapshot().children)) {
    if (!id.startsWith('group:') || !group) continue;
    const children = (group.getSnapshot() as { children: Record<string, unknown> }).children;
    for (const agent of Object.keys(children)) out.push(`${id}/${agent}`);
  }
  return out;
}

function task(id: string, deps: string[] = [], extra: Partial<SupervisedTask> = {}): SupervisedTask {
  return {
    id,
    deps,
    priority: 0,
    rank: 1,
    modelName: 'fast',
    provider: 'p',
    model: 'm',
    maxTokens: 100,
    prompt: `do ${id}`,
    tools: [],
    maxTurns: 4,
    maxRetries: 2,
    timeoutMs: 60_000,
    ...extra,
  };
}

function inputFor(tasks: SupervisedTask[], extra: Partial<SupervisorInput> = {}): SupervisorInput {
  return {
    runId: 'r1',
    tasks,
    providers: [{ name: 'p', keys: [{ keyId: 'p:k1', limits: {} }] }],
    routes: [{ route: 'p/m' }],
    toolBus: { tools: [] },
    maxInFlight: 3,
    onFailure: 'continue',
    backoff: { baseMs: 10, maxMs: 100 },
    seed: 1,
    ...extra,
  };
}

interface Observed {
  events: RunEvent[];
  maxInFlight: number;
  startedBeforeDeps: string[];
}

function runWith(input: SupervisorInput, script: Parameters<typeof fakeAgent>[0]) {
  const clock = new SimulatedClock();
  const events: RunEvent[] = [];
  const completed = new Set<string>();
  const observed: Observed = { events, maxInFlight: 0, startedBeforeDeps: [] };
  const deps = new Map(input.tasks.map((t) => [t.id, t.deps]));
  const running = new Set<string>();
  const machine = supervisorMachine.provide({
    actions: {
      report: (_, e: RunEvent) => {
        events.push(e);
        if (e.type === 'task:started') {
          running.add(e.taskId);
          observed.maxInFlight = Math.max(observed.maxInFlight, running.size);
          if (!deps.get(e.taskId)!.every((d) => completed.has(d))) observed.startedBeforeDeps.push(e.taskId);
        }
        if (e.type === 'task:completed') completed.add(e.taskId);
        if (e.type === 'task:completed' || e.type === 'task:failed' || e.type === 'task:cancelled') running.delete(e.taskId);
      },
    },
    actors: { group: groupWith(fakeAgent(script)) },
  });
  const actor = createActor(machine, { input, clock });
  actor.subscribe({ error: () => {} });
  actor.start();
  // Drive simulated time until the run ends (bounded, so a hang fails instead of looping).
  for (let i = 0; i < 100_000 && actor.getSnapshot().status === 'active'; i++) clock.increment(5);
  return { actor, observed, clock };
}

describe('supervisor', () => {
  it('runs a diamond in dependency order and passes outputs downstream', () => {
    const tasks = [task('a'), task('b', ['a']), task('c', ['a']), task('d', ['b', 'c'], { prompt: 'join {{b}} and {{c}}' })];
    const prompts = new Map<string, string>();
    const { actor, observed } = runWith(inputFor(tasks), (input) => {
      prompts.set(input.taskId, input.prompt);
      return { outcome: 'ok', delayMs: 10 };
    });
    const out = actor.getSnapshot().output!;
    expect(out.status).toBe('completed');
    expect(Object.values(out.tasks).map((t) => t.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    expect(prompts.get('d')).toBe('join out:b and out:c');
    expect(observed.startedBeforeDeps).toEqual([]);
  });

  it('orders ready tasks by priority, then critical path, then FIFO', () => {
    const tasks = [
      task('low', [], { priority: 0, rank: 1 }),
      task('long', [], { priority: 0, rank: 5 }),
      task('urgent', [], { priority: 9, rank: 1 }),
      task('fifo1', [], { priority: 0, rank: 1 }),
    ];
    const { observed } = runWith(inputFor(tasks, { maxInFlight: 1 }), () => ({ outcome: 'ok', delayMs: 1 }));
    const order = observed.events.filter((e) => e.type === 'task:started').map((e) => (e as { taskId: string }).taskId);
    expect(order).toEqual(['urgent', 'long', 'low', 'fifo1']);
  });

  it('holds each model to its own cap beside maxInFlight, keeping the queue order', () => {
    const tasks = [
      ...Array.from({ length: 6 }, (_, i) => task(`big${i}`, [], { modelName: 'big', priority: 1 })),
      ...Array.from({ length: 6 }, (_, i) => task(`small${i}`, [], { modelName: 'small' })),
    ];
    const running = new Map<string, number>();
    let maxBig = 0;
    const machine = supervisorMachine.provide({
      actions: {
        report: (_, e: RunEvent) => {
          const model = e.type === 'task:started' ? e.model : undefined;
          if (model) running.set(model, (running.get(model) ?? 0) + 1);
          if (e.type === 'task:started' && e.model === 'big') maxBig = Math.max(maxBig, running.get('big')!);
          if (e.type === 'task:completed') {
            const m = e.taskId.startsWith('big') ? 'big' : 'small';
            running.set(m, running.get(m)! - 1);
          }
        },
      },
      actors: { group: groupWith(fakeAgent(() => ({ outcome: 'ok', delayMs: 10 }))) },
    });
    const clock = new SimulatedClock();
    const actor = createActor(machine, { input: inputFor(tasks, { maxInFlight: 4, modelMaxInFlight: { big: 2 } }), clock }).start();
    // Right away: 2 big (its cap, although big tasks come first) and 2 small fill the 4 slots.
    expect(agentsOf(actor).length).toBe(4);
    for (let i = 0; i < 100 && actor.getSnapshot().status === 'active'; i++) clock.increment(5);
    expect(actor.getSnapshot().output!.status).toBe('completed');
    expect(maxBig).toBe(2);
  });

  it('retries a retryable failure as a new attempt, up to maxRetries', () => {
    const attempts: number[] = [];
    const { actor } = runWith(inputFor([task('a', [], { maxRetries: 2 })]), (input) => {
      attempts.push(input.attempt);
      return { outcome: 'retryable', delayMs: 1 };
    });
    const out = actor.getSnapshot().output!;
    expect(attempts).toEqual([1, 2, 3]);
    expect(out.tasks.a!.status).toBe('failed');
    expect(out.tasks.a!.attempts).toBe(3);
  });

  it('under continue, skips only the dependents of a failed task and ends partial', () => {
    const tasks = [task('a'), task('b', ['a']), task('c', ['b']), task('x')];
    const { actor } = runWith(inputFor(tasks), (input) => ({ outcome: input.taskId === 'a' ? 'fatal' : 'ok', delayMs: 1 }));
    const out = actor.getSnapshot().output!;
    expect(out.status).toBe('partial');
    expect(out.tasks.a!.status).toBe('failed');
    expect(out.tasks.b!.status).toBe('skipped');
    expect(out.tasks.c!.status).toBe('skipped');
    expect(out.tasks.x!.status).toBe('completed');
    expect(out.tasks.x!.output).toBe('out:x');
  });

  it('under fail-fast, cancels the rest and keeps what completed', () => {
    const tasks = [task('ok1'), task('bad'), task('slow'), task('later', ['ok1'])];
    const { actor } = runWith(inputFor(tasks, { onFailure: 'fail-fast', maxInFlight: 3 }), (input) => ({
      outcome: input.taskId === 'bad' ? 'fatal' : 'ok',
      delayMs: input.taskId === 'ok1' ? 1 : input.taskId === 'bad' ? 5 : 1000,
    }));
    const out = actor.getSnapshot().output!;
    expect(out.status).toBe('failed');
    expect(out.tasks.ok1!.status).toBe('completed');
    expect(out.tasks.bad!.status).toBe('failed');
    expect(out.tasks.slow!.status).toBe('cancelled');
    expect(['cancelled', 'completed']).toContain(out.tasks.later!.status);
  });

  it('under fail-fast, starts nothing after the failure, even with a free slot', () => {
    const tasks = [task('a', [], { priority: 1 }), task('c')];
    const { actor, observed } = runWith(inputFor(tasks, { onFailure: 'fail-fast', maxInFlight: 1 }), () => ({ outcome: 'fatal', delayMs: 1 }));
    const started = observed.events.filter((e) => e.type === 'task:started').map((e) => (e as { taskId: string }).taskId);
    expect(started).toEqual(['a']);
    expect(actor.getSnapshot().output!.tasks.c!.status).toBe('cancelled');
  });

  it('retries nothing once the run is stopping: a retryable failure that lands while it drains is final', () => {
    const tasks = [task('bad', [], { maxRetries: 0 }), task('flaky', [], { maxRetries: 3 })];
    const attempts: string[] = [];
    const { actor, observed } = runWith(inputFor(tasks, { onFailure: 'fail-fast', maxInFlight: 2 }), (input) => {
      attempts.push(`${input.taskId}#${input.attempt}`);
      return input.taskId === 'bad' ? { outcome: 'fatal', delayMs: 1 } : { outcome: 'retryable', delayMs: 50, ignoresCancel: true };
    });
    const out = actor.getSnapshot().output!;
    expect(out.status).toBe('failed');
    expect(attempts).toEqual(['bad#1', 'flaky#1']);
    expect(out.tasks.flaky).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'server_error' } });
    const flakyFailures = observed.events.filter((e) => e.type === 'task:failed' && e.taskId === 'flaky');
    expect(flakyFailures).toMatchObject([{ willRetry: false }]);
    expect(observed.events.some((e) => e.type === 'task:retry')).toBe(false);
  });

  // A pool, breaker, the bus or the ledger failing is a bug in swarmstate: the run must stop, not
  // go on without it (agents would wait for a lease, an admission or a tool result forever).
  it.each(['pool:p', 'breaker:p/m', 'toolBus', 'ledger'])('stops the run as failed when %s crashes, cancelling what is in flight', (id) => {
    const crashesAfter = (ms: number) =>
      setup({ actions: { crash: () => { throw new Error(`${id} bug`); } } }).createMachine({ after: { [ms]: { actions: 'crash' } } });
    const infra = id.split(':')[0]!;
    const machine = supervisorMachine.provide({
      actions: { report: (_, e: RunEvent) => void events.push(e) },
      actors: { group: groupWith(fakeAgent(() => ({ outcome: 'ok', delayMs: 1000 }))), [infra]: crashesAfter(10) as never },
    });
    const events: RunEvent[] = [];
    const clock = new SimulatedClock();
    const actor = createActor(machine, { input: inputFor([task('a'), task('b', ['a'])], { budgets: { runUsd: 1 } }), clock });
    actor.subscribe({ error: () => {} });
    actor.start();
    clock.increment(10);
    const snap = actor.getSnapshot();
    expect(snap.status).toBe('done');
    expect(snap.output!.status).toBe('failed');
    expect(snap.output!.tasks.a!.status).toBe('cancelled');
    expect(snap.output!.tasks.b!.status).toBe('cancelled');
    expect(events).toContainEqual({ type: 'run:cancelled', reason: `${id} crashed: ${id} bug` });
  });

  it('fills {{dep}} in the system prompt too', () => {
    const tasks = [task('a'), task('b', ['a'], { system: 'You know {{a}}.', prompt: 'go' })];
    const systems = new Map<string, string | undefined>();
    runWith(inputFor(tasks), (input) => {
      systems.set(input.taskId, input.system);
      return { outcome: 'ok', delayMs: 1 };
    });
    expect(systems.get('b')).toBe('You know out:a.');
  });

  it('treats a crashed agent as a failed attempt and stays active', () => {
    const tasks = [task('a', [], { maxRetries: 0 }), task('b')];
    const { actor } = runWith(inputFor(tasks), (input) => ({ outcome: input.taskId === 'a' ? 'crash' : 'ok', delayMs: 1 }));
    const snap = actor.getSnapshot();
    expect(snap.status).toBe('done');
    expect(snap.output!.tasks.a!.status).toBe('failed');
    expect(snap.output!.tasks.a!.error!.message).toMatch(/agent crashed: agent bug/);
    expect(snap.output!.tasks.b!.status).toBe('completed');
  });

  it('hands back what a crashed agent held (its lease, its reservation) and keeps what it had done', () => {
    const received: { to: string; type: string }[] = [];
    const recorder = (to: string) =>
      setup({}).createMachine({ on: { '*': { actions: ({ event }) => void received.push({ to, type: event.type }) } } });
    // An agent that crashes while holding a lease and a reservation (its context says so).
    const crashing = setup({
      types: {} as { input: AgentInput },
      actions: { crash: () => { throw new Error('agent bug'); } },
    }).createMachine({
      context: ({ input }) => ({
        input, call: 'turn', routeIndex: 0, override: null, messages: [],
        held: { pending: null, lease: { leaseId: 'L1', keyId: 'p:k1' }, reservation: 'R1', reroute: null },
        spend: { usage: { inputTokens: 7, outputTokens: 3, cacheWriteTokens: 0, cacheReadTokens: 0 }, costUsd: 0, unpricedCalls: 0, calls: [], callStartedAt: 0 },
        counts: { requests: 1, retries: 0, turn: 0, rateLimitWaits: 0, overloads: 0, seq: 1 },
      }),
      // It crashes as soon as it runs (the agent is active from its spawn).
      entry: 'crash',
    }) as unknown as typeof agentMachine;
    const machine = supervisorMachine.provide({
      actors: { group: groupWith(crashing), pool: recorder('pool') as never, ledger: recorder('ledger') as never },
    });
    const actor = createActor(machine, { input: inputFor([task('a', [], { maxRetries: 0 })], { budgets: { runUsd: 1 } }), clock: new SimulatedClock() }).start();
    const out = actor.getSnapshot().output!;
    expect(out.tasks.a).toMatchObject({ status: 'failed', requests: 1, usage: { inputTokens: 7, outputTokens: 3 } });
    expect(received).toEqual(expect.arrayContaining([
      { to: 'pool', type: 'LEASE.RELEASE' },
      { to: 'ledger', type: 'LEDGER.SETTLE' }, // the call was sent: its worst case counts
    ]));
  });

  it('cancels on request: queued tasks cancelled, in-flight agents cancelled, run ends cancelled', () => {
    const clock = new SimulatedClock();
    const machine = supervisorMachine.provide({ actors: { group: groupWith(fakeAgent(() => ({ outcome: 'ok', delayMs: 1000 }))) } });
    const actor = createActor(machine, { input: inputFor([task('a'), task('b'), task('c'), task('d'), task('e', ['a'])], { maxInFlight: 2 }), clock }).start();
    clock.increment(10);
    actor.send({ type: 'CANCEL', reason: 'test' });
    const out = actor.getSnapshot().output!;
    expect(actor.getSnapshot().status).toBe('done');
    expect(out.status).toBe('cancelled');
    expect(Object.values(out.tasks).every((t) => t.status === 'cancelled')).toBe(true);
  });

  it('keeps only in-flight agents alive, in a bounded number of groups of bounded size', () => {
    const clock = new SimulatedClock();
    const machine = supervisorMachine.provide({ actors: { group: groupWith(fakeAgent(() => ({ outcome: 'ok', delayMs: 10 }))) } });
    const tasks = Array.from({ length: 50 }, (_, i) => task(`t${i}`));
    const actor = createActor(machine, { input: inputFor(tasks, { maxInFlight: 7, agentsPerGroup: 3 }), clock }).start();
    let maxAgents = 0;
    let maxPerGroup = 0;
    const groups = new Set<string>();
    while (actor.getSnapshot().status === 'active') {
      maxAgents = Math.max(maxAgents, agentsOf(actor).length);
      for (const [id, group] of Object.entries(actor.getSnapshot().children)) {
        if (!id.startsWith('group:')) continue;
        groups.add(id);
        maxPerGroup = Math.max(maxPerGroup, Object.keys((group!.getSnapshot() as { children: object }).children).length);
      }
      // No agent is a direct child of the supervisor.
      expect(Object.keys(actor.getSnapshot().children).filter((id) => id.startsWith('agent:'))).toEqual([]);
      clock.increment(5);
    }
    expect(maxAgents).toBe(7);
    expect(maxPerGroup).toBe(3);
    expect([...groups].sort()).toEqual(['group:0', 'group:1', 'group:2']); // ceil(7 / 3), reused for 50 tasks
    expect(agentsOf(actor)).toEqual([]);
    expect(actor.getSnapshot().output!.status).toBe('completed');
  });

  it('property: deps respected, maxInFlight never exceeded, one final status per task, always ends', () => {
    const dagArb = fc
      .integer({ min: 1, max: 25 })
      .chain((n) =>
        fc.tuple(
          fc.constant(n),
          fc.array(fc.array(fc.nat(), { maxLength: 3 }), { minLength: n, maxLength: n }),
          fc.array(fc.constantFrom<Outcome>('ok', 'ok', 'ok', 'retryable', 'fatal', 'crash'), { minLength: 60, maxLength: 60 }),
          fc.integer({ min: 1, max: 6 }),
          fc.constantFrom<'continue' | 'fail-fast'>('continue', 'fail-fast'),
        ),
      );
    fc.assert(
      fc.property(dagArb, ([n, rawDeps, outcomes, maxInFlight, onFailure]) => {
        // Deps only point backwards: acyclic by construction.
        const tasks = Array.from({ length: n }, (_, i) =>
          task(`t${i}`, i === 0 ? [] : [...new Set(rawDeps[i]!.map((d) => `t${d % i}`))], { maxRetries: 1 }),
        );
        let call = 0;
        const { actor, observed } = runWith(inputFor(tasks, { maxInFlight, onFailure }), () => ({
          outcome: outcomes[call++ % outcomes.length]!,
          delayMs: 1 + (call % 7),
        }));
        const snap = actor.getSnapshot();
        expect(snap.status).toBe('done');
        expect(observed.startedBeforeDeps).toEqual([]);
        expect(observed.maxInFlight).toBeLessThanOrEqual(maxInFlight);
        const out = snap.output!;
        expect(Object.keys(out.tasks).sort()).toEqual(tasks.map((t) => t.id).sort());
        const finals = observed.events.filter((e) => ['task:completed', 'task:skipped', 'task:cancelled'].includes(e.type) || (e.type === 'task:failed' && !e.willRetry));
        const perTask = new Map<string, number>();
        for (const e of finals) perTask.set((e as { taskId: string }).taskId, (perTask.get((e as { taskId: string }).taskId) ?? 0) + 1);
        for (const t of tasks) expect(perTask.get(t.id) ?? 0, `final events of ${t.id}`).toBe(1);
        const total = out.totals.completed + out.totals.failed + out.totals.skipped + out.totals.cancelled;
        expect(total).toBe(n);
      }),
      { seed: 42, numRuns: 150 },
    );
  });
});

