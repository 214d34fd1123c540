import { getShortestPaths } from '@xstate/graph';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createEmptyActor, createMachine, SimulatedClock } from 'xstate';
import type { AnyActorRef } from 'xstate';
import { breakerMachine, initialBreakerContext } from '../../machines/breaker.machine.js';
import type { BreakerContext, BreakerInput, BreakerOptions } from '../../machines/breaker.machine.js';
import type { BreakerEvent, BreakerReply, BreakerVerdict, RunEvent } from '../../machines/protocol.js';

const ROUTE = 'anthropic/claude-test';

/** A running breaker on a SimulatedClock, with what it said and whom it let through. */
function harness(input: Partial<BreakerInput> = {}, onReply?: (reply: BreakerReply) => void) {
  const clock = new SimulatedClock();
  const reports: Array<RunEvent & { at: number }> = [];
  const replies: BreakerReply[] = [];
  const agent = createActor(
    createMachine({
      on: {
        '*': {
          actions: ({ event }) => {
            replies.push(event as BreakerReply);
            onReply?.(event as BreakerReply);
          },
        },
      },
    }),
  ).start();
  const machine = breakerMachine.provide({
    actions: { report: (_, event: RunEvent) => void reports.push({ ...event, at: clock.now() }) },
  });
  const breaker = createActor(machine, { clock, input: { route: ROUTE, ...input } }).start();
  return {
    clock,
    breaker,
    agent,
    reports,
    replies,
    state: () => breaker.getSnapshot().value,
    admit: (requestId: string) => breaker.send({ type: 'BREAKER.ADMIT', requestId, replyTo: agent }),
    report: (requestId: string, verdict: BreakerVerdict) => breaker.send({ type: 'BREAKER.REPORT', requestId, verdict }),
    withdraw: (requestId: string) => breaker.send({ type: 'BREAKER.WITHDRAW', requestId }),
    admittedIds: () => replies.map((r) => r.requestId),
  };
}

/** Opens a fresh breaker with `threshold` failures from admitted requests f0, f1, ... */
function openWith(h: ReturnType<typeof harness>, threshold: number) {
  for (let i = 0; i < threshold; i++) h.admit(`f${i}`);
  for (let i = 0; i < threshold; i++) h.report(`f${i}`, 'failure');
}

/**
 * What tells breaker states apart for the graph walk. Failures past the threshold are alike (the
 * count grows with each failed probe, which would make the graph infinite).
 */
function shape(s: { value: unknown; context: BreakerContext }): string {
  return JSON.stringify([s.value, Math.min(s.context.failures, 3), s.context.cooldownMs, s.context.probe, s.context.waiters.map((w) => w.requestId)]);
}

describe('breakerMachine: graph', () => {
  it('reaches closed, open and halfOpen by shortest paths', () => {
    const replyTo = createEmptyActor() as AnyActorRef;
    const events: BreakerEvent[] = [];
    for (const requestId of ['r1', 'r2']) {
      events.push({ type: 'BREAKER.ADMIT', requestId, replyTo }, { type: 'BREAKER.WITHDRAW', requestId });
      for (const verdict of ['success', 'failure', 'neutral'] as const) events.push({ type: 'BREAKER.REPORT', requestId, verdict });
    }
    const cooldownElapsed = { type: 'xstate.after.cooldown.breaker.open' } as unknown as BreakerEvent;
    const paths = getShortestPaths(breakerMachine, {
      input: { route: ROUTE, failureThreshold: 2, cooldownMs: 100, maxCooldownMs: 400 },
      events: [...events, cooldownElapsed],
      serializeState: shape,
    });
    const byValue = new Map<string, number>();
    for (const p of paths) {
      const value = String(p.state.value);
      const length = p.steps.filter((s) => (s.event.type as string) !== 'xstate.init').length;
      byValue.set(value, Math.min(byValue.get(value) ?? Infinity, length));
    }
    expect([...byValue.keys()].sort()).toEqual(['closed', 'halfOpen', 'open']);
    expect(byValue.get('closed')).toBe(0);
    expect(byValue.get('open')).toBe(2); // two failures at threshold 2
    expect(byValue.get('halfOpen')).toBe(3); // ... then the cooldown
    // The cooldown is capped: 100 -> 200 -> 400 -> 400.
    const cooldowns = new Set(paths.map((p) => p.state.context.cooldownMs));
    expect([...cooldowns].sort((a, b) => a - b)).toEqual([100, 200, 400]);
  });

  it('replays every shortest path on a live actor, with the clock standing in for the delay', () => {
    const replyTo = createEmptyActor() as AnyActorRef;
    const input = { route: ROUTE, failureThreshold: 2, cooldownMs: 100, maxCooldownMs: 400 };
    const paths = getShortestPaths(breakerMachine, {
      input,
      events: [
        { type: 'BREAKER.ADMIT', requestId: 'r1', replyTo },
        { type: 'BREAKER.REPORT', requestId: 'r1', verdict: 'failure' },
        { type: 'BREAKER.REPORT', requestId: 'r1', verdict: 'success' },
        { type: 'xstate.after.cooldown.breaker.open' } as unknown as BreakerEvent,
      ],
      serializeState: shape,
    });
    for (const path of paths) {
      const clock = new SimulatedClock();
      const actor = createActor(breakerMachine, { clock, input }).start();
      for (const { event } of path.steps) {
        if ((event.type as string) === 'xstate.init') continue;
        if (event.type.startsWith('xstate.after.')) clock.increment(actor.getSnapshot().context.cooldownMs);
        else actor.send(event);
      }
      expect(shape(actor.getSnapshot())).toEqual(shape(path.state));
    }
  });
});

describe('breakerMachine: closed', () => {
  it('admits at once, not as a probe', () => {
    const h = harness();
    h.admit('a');
    expect(h.replies).toEqual([{ type: 'BREAKER.ADMITTED', requestId: 'a', probe: false }]);
    expect(h.state()).toBe('closed');
  });

  it('opens after exactly failureThreshold consecutive failures and reports it', () => {
    const h = harness({ failureThreshold: 3, cooldownMs: 1000 });
    for (const id of ['a', 'b', 'c']) h.admit(id);
    h.report('a', 'failure');
    h.report('b', 'failure');
    expect(h.state()).toBe('closed');
    h.report('c', 'failure');
    expect(h.state()).toBe('open');
    expect(h.reports).toEqual([{ type: 'breaker:open', route: ROUTE, cooldownMs: 1000, failures: 3, at: 0 }]);
  });

  it('resets the failure count on success and ignores neutral reports', () => {
    const h = harness({ failureThreshold: 2 });
    for (const id of ['a', 'b', 'c', 'd', 'e']) h.admit(id);
    h.report('a', 'failure');
    h.report('b', 'success');
    h.report('c', 'failure');
    h.report('d', 'neutral');
    expect(h.state()).toBe('closed');
    expect(h.breaker.getSnapshot().context.failures).toBe(1);
    h.report('e', 'failure');
    expect(h.state()).toBe('open');
  });

  it('uses the documented defaults', () => {
    const c = initialBreakerContext({ route: ROUTE });
    expect([c.failureThreshold, c.cooldownMs, c.maxCooldownMs, c.cooldownFactor]).toEqual([5, 10_000, 300_000, 2]);
  });

  it('rejects options that cannot work, naming the option', () => {
    expect(() => initialBreakerContext({ route: ROUTE, failureThreshold: 0 })).toThrow(/failureThreshold/);
    expect(() => initialBreakerContext({ route: ROUTE, cooldownMs: -1 })).toThrow(/cooldownMs/);
    expect(() => initialBreakerContext({ route: ROUTE, cooldownMs: 500, maxCooldownMs: 100 })).toThrow(/maxCooldownMs/);
    expect(() => initialBreakerContext({ route: ROUTE, cooldownFactor: 0.5 })).toThrow(/cooldownFactor/);
    expect(initialBreakerContext({ route: ROUTE, cooldownMs: 600_000 }).maxCooldownMs).toBe(600_000);
  });
});

/** An actor that keeps what it is sent (the pool a lease request passes the breaker for). */
function recorder() {
  const got: { type: string; requestId?: string }[] = [];
  const ref = createActor(createMachine({ on: { '*': { actions: ({ event }) => void got.push(event) } } })).start();
  return { ref, got };
}

describe('breakerMachine: passing a message on, refusing, answering a peek', () => {
  const lease = (requestId: string) => ({ type: 'LEASE.REQUEST', requestId });

  it('passes an admitted request\'s message on instead of answering: at once when closed, in order once it closes again', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    const pool = recorder();
    const pass = (requestId: string) => h.breaker.send({ type: 'BREAKER.ADMIT', requestId, replyTo: h.agent, then: { to: pool.ref, event: lease(requestId) } });
    pass('a');
    expect(pool.got).toEqual([lease('a')]);
    expect(h.replies).toEqual([]); // the agent waits for its lease, not for the breaker
    h.report('a', 'failure');
    expect(h.state()).toBe('open');
    pass('b');
    pass('c');
    expect(pool.got).toEqual([lease('a')]); // held while open
    h.clock.increment(100);
    expect(pool.got).toEqual([lease('a'), lease('b')]); // b is the probe
    expect(h.breaker.getSnapshot().context.probe).toBe('b');
    h.report('b', 'success');
    expect(pool.got).toEqual([lease('a'), lease('b'), lease('c')]);
    expect(h.replies).toEqual([]);
  });

  it('refuses a request that asked to be refused while open, holds it while half-open, admits it while closed', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    const ask = (requestId: string) => h.breaker.send({ type: 'BREAKER.ADMIT', requestId, replyTo: h.agent, unlessOpen: true });
    ask('a');
    expect(h.replies).toEqual([{ type: 'BREAKER.ADMITTED', requestId: 'a', probe: false }]);
    h.report('a', 'failure');
    ask('b');
    expect(h.replies.at(-1)).toEqual({ type: 'BREAKER.REFUSED', requestId: 'b' });
    expect(h.breaker.getSnapshot().context.waiters).toEqual([]); // refused, not held
    h.clock.increment(100);
    ask('c');
    ask('d');
    expect(h.replies.slice(-1)).toEqual([{ type: 'BREAKER.ADMITTED', requestId: 'c', probe: true }]);
    expect(h.breaker.getSnapshot().context.waiters.map((w) => w.requestId)).toEqual(['d']);
  });

  it('answers a peek with whether it is open, admitting nothing', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    const peek = (requestId: string) => h.breaker.send({ type: 'BREAKER.PEEK', requestId, replyTo: h.agent });
    peek('p1');
    openWith(h, 1);
    peek('p2');
    h.clock.increment(100);
    peek('p3');
    expect(h.replies.filter((r) => r.type === 'BREAKER.STATUS')).toEqual([
      { type: 'BREAKER.STATUS', requestId: 'p1', open: false },
      { type: 'BREAKER.STATUS', requestId: 'p2', open: true },
      { type: 'BREAKER.STATUS', requestId: 'p3', open: false }, // half-open lets a probe through: not open
    ]);
    expect(h.breaker.getSnapshot().context).toMatchObject({ waiters: [], probe: null });
  });

  it('counts nothing new for a success while no failure is counted (the context is not copied)', () => {
    const h = harness();
    h.admit('a');
    const before = h.breaker.getSnapshot().context;
    h.report('a', 'success');
    expect(h.breaker.getSnapshot().context).toBe(before);
  });
});

describe('breakerMachine: open and halfOpen', () => {
  it('holds requests while open and half-opens exactly when the cooldown ends', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    openWith(h, 1);
    h.admit('w1');
    h.admit('w2');
    h.clock.increment(99);
    expect(h.state()).toBe('open');
    expect(h.admittedIds()).toEqual(['f0']);
    h.clock.increment(1);
    expect(h.state()).toBe('halfOpen');
    expect(h.replies.at(-1)).toEqual({ type: 'BREAKER.ADMITTED', requestId: 'w1', probe: true });
    expect(h.reports.map((r) => [r.type, r.at])).toEqual([
      ['breaker:open', 0],
      ['breaker:halfOpen', 100],
    ]);
  });

  it('lets one probe through at a time while half-open', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    openWith(h, 1);
    h.clock.increment(100);
    h.admit('p');
    h.admit('q');
    expect(h.replies.slice(1)).toEqual([{ type: 'BREAKER.ADMITTED', requestId: 'p', probe: true }]);
    expect(h.breaker.getSnapshot().context.waiters.map((w) => w.requestId)).toEqual(['q']);
  });

  it('closes on a successful probe, resets the cooldown and admits every waiter in order', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    openWith(h, 1);
    for (const id of ['w1', 'w2', 'w3']) h.admit(id);
    h.clock.increment(100);
    h.report('w1', 'success');
    expect(h.state()).toBe('closed');
    expect(h.replies.slice(1)).toEqual([
      { type: 'BREAKER.ADMITTED', requestId: 'w1', probe: true },
      { type: 'BREAKER.ADMITTED', requestId: 'w2', probe: false },
      { type: 'BREAKER.ADMITTED', requestId: 'w3', probe: false },
    ]);
    const { context } = h.breaker.getSnapshot();
    expect([context.failures, context.cooldownMs, context.probe, context.waiters]).toEqual([0, 100, null, []]);
    expect(h.reports.at(-1)).toMatchObject({ type: 'breaker:closed', route: ROUTE });
  });

  it('reopens on a failed probe with the cooldown multiplied, up to the cap', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100, cooldownFactor: 3, maxCooldownMs: 500 });
    openWith(h, 1);
    const cooldowns: number[] = [];
    for (let round = 0; round < 4; round++) {
      cooldowns.push(h.breaker.getSnapshot().context.cooldownMs);
      h.clock.increment(h.breaker.getSnapshot().context.cooldownMs);
      expect(h.state()).toBe('halfOpen');
      h.admit(`p${round}`);
      h.report(`p${round}`, 'failure');
      expect(h.state()).toBe('open');
    }
    expect(cooldowns).toEqual([100, 300, 500, 500]);
    expect(h.reports.filter((r) => r.type === 'breaker:open').map((r) => (r as { failures: number }).failures)).toEqual([1, 2, 3, 4, 5]);
  });

  it('after a neutral probe lets the next waiter probe', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    openWith(h, 1);
    h.admit('w1');
    h.admit('w2');
    h.clock.increment(100);
    h.report('w1', 'neutral');
    expect(h.state()).toBe('halfOpen');
    expect(h.replies.at(-1)).toEqual({ type: 'BREAKER.ADMITTED', requestId: 'w2', probe: true });
  });

  it('frees the probe slot when the probe withdraws, so a cancelled agent cannot wedge it', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    openWith(h, 1);
    h.admit('w1');
    h.admit('w2');
    h.clock.increment(100);
    h.withdraw('w1');
    expect(h.replies.at(-1)).toEqual({ type: 'BREAKER.ADMITTED', requestId: 'w2', probe: true });
    h.withdraw('w2');
    expect(h.breaker.getSnapshot().context.probe).toBeNull();
    h.admit('w3');
    expect(h.replies.at(-1)).toEqual({ type: 'BREAKER.ADMITTED', requestId: 'w3', probe: true });
  });

  it('drops a withdrawn waiter, which is then never admitted', () => {
    const h = harness({ failureThreshold: 1, cooldownMs: 100 });
    openWith(h, 1);
    h.admit('w1');
    h.admit('w2');
    h.withdraw('w1');
    h.clock.increment(100);
    h.report('w2', 'success');
    expect(h.admittedIds()).toEqual(['f0', 'w2']);
  });

  it('ignores reports from calls that are not the probe while open or half-open', () => {
    const h = harness({ failureThreshold: 2, cooldownMs: 100 });
    for (const id of ['a', 'b', 'c', 'd']) h.admit(id);
    h.report('a', 'failure');
    h.report('b', 'failure');
    h.report('c', 'success');
    expect(h.state()).toBe('open');
    h.clock.increment(100);
    h.admit('p');
    h.report('d', 'success');
    h.report('c', 'failure');
    expect(h.state()).toBe('halfOpen');
    expect(h.breaker.getSnapshot().context.probe).toBe('p');
  });
});

// ---------------------------------------------------------------------------------------------
// Properties over random sequences
// ---------------------------------------------------------------------------------------------

type Op =
  | { kind: 'admit' }
  | { kind: 'report'; pick: number; verdict: BreakerVerdict }
  | { kind: 'withdraw'; pick: number }
  | { kind: 'advance'; ms: number }
  /** Move the clock to just before (-1) or exactly to (0) the end of the current cooldown. */
  | { kind: 'toCooldownEnd'; offset: -1 | 0 };

function opArb(verdicts: BreakerVerdict[]): fc.Arbitrary<Op> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<Op>({ kind: 'admit' }) },
    {
      weight: 5,
      arbitrary: fc.record({ kind: fc.constant('report' as const), pick: fc.nat(), verdict: fc.constantFrom(...verdicts) }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('withdraw' as const), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 400 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('toCooldownEnd' as const), offset: fc.constantFrom(-1 as const, 0 as const) }) },
  );
}

const configArb = fc
  .record({
    failureThreshold: fc.integer({ min: 1, max: 4 }),
    cooldownMs: fc.integer({ min: 20, max: 200 }),
    cooldownFactor: fc.constantFrom(1, 1.5, 2, 3),
    capMultiple: fc.integer({ min: 1, max: 6 }),
  })
  .map(({ capMultiple, ...c }) => ({ ...c, maxCooldownMs: c.cooldownMs * capMultiple }));

/**
 * Runs `ops` against a breaker, playing the agents' side, and checks the invariants after every
 * step; then drains with successes and checks that nobody is left waiting.
 */
function runScenario(config: Required<BreakerOptions>, ops: Op[]) {
  const waiting = new Set<string>(); // asked, neither admitted nor withdrawn
  const holding = new Set<string>(); // admitted, not yet reported or withdrawn
  const probes = new Set<string>(); // admitted as probe, not yet reported or withdrawn
  const admitted = new Set<string>();
  const withdrawn = new Set<string>();
  const asked: string[] = [];
  const h = harness(config, (reply) => {
    expect(waiting.has(reply.requestId), `admitted ${reply.requestId} which is not waiting`).toBe(true);
    expect(admitted.has(reply.requestId)).toBe(false);
    waiting.delete(reply.requestId);
    admitted.add(reply.requestId);
    holding.add(reply.requestId);
    if (reply.type === 'BREAKER.ADMITTED' && reply.probe) probes.add(reply.requestId);
  });
  let consecutive = 0; // the test's own count of consecutive failures while closed
  let seenReports = 0;
  let lastOpen: { at: number; cooldownMs: number } | undefined;
  let nextId = 0;

  const checkReports = (before: string) => {
    for (const r of h.reports.slice(seenReports)) {
      if (r.type === 'breaker:open') {
        const expected =
          before === 'closed'
            ? config.cooldownMs
            : Math.min(config.maxCooldownMs, (lastOpen?.cooldownMs ?? NaN) * config.cooldownFactor);
        expect(r.cooldownMs).toBe(expected);
        expect(r.cooldownMs).toBeLessThanOrEqual(config.maxCooldownMs);
        lastOpen = { at: r.at, cooldownMs: r.cooldownMs };
      }
      if (r.type === 'breaker:halfOpen') {
        expect(lastOpen).toBeDefined();
        expect(r.at - lastOpen!.at, 'half-opened before the cooldown').toBeGreaterThanOrEqual(lastOpen!.cooldownMs);
      }
    }
    seenReports = h.reports.length;
  };

  const checkState = () => {
    const { value, context } = h.breaker.getSnapshot();
    expect(probes.size).toBeLessThanOrEqual(1);
    if (value === 'halfOpen') expect(context.probe).toBe([...probes][0] ?? null);
    else expect(probes.size).toBe(0);
    if (value === 'closed' || (value === 'halfOpen' && context.probe === null)) expect(waiting.size).toBe(0);
    if (value === 'open') expect(h.clock.now() - lastOpen!.at, 'stayed open past the cooldown').toBeLessThan(lastOpen!.cooldownMs);
    expect(context.waiters.map((w) => w.requestId)).toEqual([...waiting]);
  };

  const step = (op: Op) => {
    const before = String(h.state());
    switch (op.kind) {
      case 'admit': {
        const id = `r${nextId++}`;
        asked.push(id);
        waiting.add(id);
        h.admit(id);
        break;
      }
      case 'report': {
        const candidates = [...holding];
        if (candidates.length === 0) return;
        const id = candidates[op.pick % candidates.length];
        holding.delete(id);
        probes.delete(id);
        if (before === 'closed') {
          if (op.verdict === 'failure') consecutive++;
          if (op.verdict === 'success') consecutive = 0;
        }
        h.report(id, op.verdict);
        if (before === 'closed') {
          expect(h.state(), `after ${consecutive} consecutive failures`).toBe(consecutive >= config.failureThreshold ? 'open' : 'closed');
          if (h.state() === 'open') expect(h.reports.at(-1)).toMatchObject({ type: 'breaker:open', failures: config.failureThreshold });
        }
        break;
      }
      case 'withdraw': {
        const candidates = [...waiting, ...holding];
        if (candidates.length === 0) return;
        const id = candidates[op.pick % candidates.length];
        waiting.delete(id);
        holding.delete(id);
        probes.delete(id);
        withdrawn.add(id);
        h.withdraw(id);
        break;
      }
      case 'advance':
        h.clock.increment(op.ms);
        break;
      case 'toCooldownEnd': {
        if (before !== 'open') return;
        const ms = lastOpen!.at + lastOpen!.cooldownMs + op.offset - h.clock.now();
        if (ms <= 0) return;
        h.clock.increment(ms);
        expect(h.state()).toBe(op.offset === 0 ? 'halfOpen' : 'open');
        break;
      }
    }
    checkReports(before);
    if (h.state() === 'closed' && before !== 'closed') consecutive = 0;
    checkState();
  };

  for (const op of ops) step(op);
  // The agents' calls now all succeed: everyone still waiting must get through.
  for (let round = 0; round < 5 && (waiting.size > 0 || holding.size > 0); round++) {
    for (const id of [...holding]) step({ kind: 'report', pick: [...holding].indexOf(id), verdict: 'success' });
    if (waiting.size > 0) step({ kind: 'advance', ms: config.maxCooldownMs });
  }
  expect(waiting.size).toBe(0);
  for (const id of asked) expect(admitted.has(id) || withdrawn.has(id), `${id} was neither admitted nor withdrawn`).toBe(true);
  return h;
}

describe('breakerMachine: properties', () => {
  it('keeps every invariant over random admit/report/withdraw/clock sequences', () => {
    fc.assert(
      fc.property(configArb, fc.array(opArb(['success', 'failure', 'failure', 'neutral']), { minLength: 30, maxLength: 80 }), (config, ops) => {
        runScenario(config, ops);
      }),
      { seed: 42, numRuns: 400 },
    );
  });

  it('never opens on neutral (4xx-style) and successful reports alone', () => {
    fc.assert(
      fc.property(configArb, fc.array(opArb(['success', 'neutral']), { minLength: 30, maxLength: 80 }), (config, ops) => {
        const h = runScenario(config, ops);
        expect(h.reports.filter((r) => r.type === 'breaker:open')).toEqual([]);
        expect(h.state()).toBe('closed');
      }),
      { seed: 42, numRuns: 200 },
    );
  });

  it('grows the cooldown by the factor on every failed probe and never past the cap', () => {
    fc.assert(
      fc.property(configArb, fc.integer({ min: 1, max: 10 }), (config, failedProbes) => {
        const h = harness(config);
        openWith(h, config.failureThreshold);
        for (let i = 0; i < failedProbes; i++) {
          h.clock.increment(h.breaker.getSnapshot().context.cooldownMs);
          h.admit(`p${i}`);
          h.report(`p${i}`, 'failure');
        }
        const seen = h.reports.filter((r) => r.type === 'breaker:open').map((r) => (r as { cooldownMs: number }).cooldownMs);
        const expected = [config.cooldownMs];
        while (expected.length < failedProbes + 1) {
          expected.push(Math.min(config.maxCooldownMs, expected.at(-1)! * config.cooldownFactor));
        }
        expect(seen).toEqual(expected);
      }),
      { seed: 42, numRuns: 200 },
    );
  });
});
