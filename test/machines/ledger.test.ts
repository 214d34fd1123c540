import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createMachine } from 'xstate';
import { LedgerBook, ledgerMachine } from '../../machines/ledger.machine.js';
import type { LedgerBudgets } from '../../machines/ledger.machine.js';
import type { LedgerReply, RunEvent } from '../../machines/protocol.js';

/** A ledger with one agent stand-in that logs every reply, and the run events it reports. */
function harness(budgets: LedgerBudgets) {
  const replies: LedgerReply[] = [];
  const reports: RunEvent[] = [];
  const agent = createActor(createMachine({ on: { '*': { actions: ({ event }) => void replies.push(event as LedgerReply) } } })).start();
  const machine = ledgerMachine.provide({ actions: { report: (_, e: RunEvent) => void reports.push(e) } });
  const ledger = createActor(machine, { input: { budgets } }).start();
  const book = () => ledger.getSnapshot().context.book;
  return {
    ledger,
    replies,
    reports,
    book,
    runDenied: () => ledger.getSnapshot().context.runDenied,
    /** Sends a reservation and returns the one reply it got. */
    reserve: (reservationId: string, taskId: string, model: string, amountUsd: number) => {
      const before = replies.length;
      ledger.send({ type: 'LEDGER.RESERVE', reservationId, taskId, model, amountUsd, replyTo: agent });
      expect(replies.length).toBe(before + 1);
      const reply = replies[before]!;
      expect(reply.reservationId).toBe(reservationId);
      return reply;
    },
    settle: (reservationId: string, actualUsd: number) => ledger.send({ type: 'LEDGER.SETTLE', reservationId, actualUsd }),
    release: (reservationId: string) => ledger.send({ type: 'LEDGER.RELEASE', reservationId }),
  };
}

const denialOf = (reply: LedgerReply) => {
  if (reply.type !== 'LEDGER.DENIED') throw new Error(`expected a denial, got ${reply.type}`);
  return reply.error;
};

describe('ledgerMachine: budgets', () => {
  it('grants within the run budget, counting outstanding reservations, and denies past it', () => {
    const h = harness({ runUsd: 1 });
    expect(h.reserve('r1', 't1', 'sonnet', 0.6).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r2', 't2', 'sonnet', 0.4).type).toBe('LEDGER.RESERVED');
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: 1 });
    expect(denialOf(h.reserve('r3', 't3', 'sonnet', 0.01))).toMatchObject({ code: 'budget_exceeded', retryable: false });
    expect(h.runDenied()).toBe(true);
    h.release('r2');
    h.settle('r1', 0.5);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.5, reservedUsd: 0 });
    expect(h.reserve('r4', 't3', 'sonnet', 0.5).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r5', 't3', 'sonnet', 0.000001).type).toBe('LEDGER.DENIED');
  });

  it("denies by a task's budget without touching other tasks or the run flag", () => {
    const h = harness({ runUsd: 10, perTaskUsd: { a: 0.5 } });
    expect(h.reserve('a1', 'a', 'sonnet', 0.4).type).toBe('LEDGER.RESERVED');
    const error = denialOf(h.reserve('a2', 'a', 'sonnet', 0.2));
    expect(error.message).toContain('task "a" budget exceeded');
    expect(h.reserve('b1', 'b', 'sonnet', 0.2).type).toBe('LEDGER.RESERVED');
    expect(h.runDenied()).toBe(false);
    expect(h.book().task('a')).toEqual({ limitUsd: 0.5, spentUsd: 0, reservedUsd: 0.4 });
    expect(h.book().task('b')).toEqual({ spentUsd: 0, reservedUsd: 0.2 });
    expect(h.reports).toEqual([{ type: 'budget:denied', taskId: 'a', model: 'sonnet', amountUsd: 0.2, budget: 'task', limitUsd: 0.5, spentUsd: 0, reservedUsd: 0.4 }]);
  });

  it("denies by a model's budget, shared by every task on that model", () => {
    const h = harness({ perModelUsd: { opus: 1 } });
    expect(h.reserve('r1', 't1', 'opus', 0.7).type).toBe('LEDGER.RESERVED');
    h.settle('r1', 0.7);
    expect(denialOf(h.reserve('r2', 't2', 'opus', 0.31)).message).toContain('model "opus" budget exceeded');
    expect(h.reserve('r3', 't2', 'haiku', 100).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r4', 't3', 'opus', 0.3).type).toBe('LEDGER.RESERVED');
    expect(h.runDenied()).toBe(false);
    expect(h.reports.map((e) => e.type === 'budget:denied' && e.budget)).toEqual(['model']);
  });

  it('names the run budget first when several are exceeded, and reports the numbers', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 0.1 }, perModelUsd: { m: 0.1 } });
    h.reserve('r1', 'x', 'y', 0.9);
    denialOf(h.reserve('r2', 't', 'm', 0.2));
    expect(h.reports).toEqual([{ type: 'budget:denied', taskId: 't', model: 'm', amountUsd: 0.2, budget: 'run', limitUsd: 1, spentUsd: 0, reservedUsd: 0.9 }]);
    expect(h.runDenied()).toBe(true);
  });

  it('tracks spend without a cap when no budget applies', () => {
    const h = harness({});
    expect(h.reserve('r1', 't', 'm', 1e6).type).toBe('LEDGER.RESERVED');
    h.settle('r1', 12.5);
    expect(h.book().run()).toEqual({ spentUsd: 12.5, reservedUsd: 0 });
    expect(h.book().model('m')).toEqual({ spentUsd: 12.5, reservedUsd: 0 });
  });

  it('fits amounts that add up exactly to the budget (no floating-point drift)', () => {
    const h = harness({ runUsd: 0.3 });
    expect(0.1 + 0.2).toBeGreaterThan(0.3); // what a float ledger would get wrong
    expect(h.reserve('r1', 't', 'm', 0.1).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r2', 't', 'm', 0.2).type).toBe('LEDGER.RESERVED');
    for (let i = 0; i < 10; i++) h.settle('r1', 0.1), h.settle('r2', 0.2);
    expect(h.book().run()).toEqual({ limitUsd: 0.3, spentUsd: 0.3, reservedUsd: 0 });
  });

  it('takes task and model names that are also Object.prototype keys', () => {
    const h = harness({ perTaskUsd: { constructor: 0.1 }, perModelUsd: {} });
    expect(h.reserve('r1', 'toString', '__proto__', 1).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r2', 'constructor', 'hasOwnProperty', 0.2).type).toBe('LEDGER.DENIED');
  });
});

describe('ledgerMachine: settle and release', () => {
  it('records an actual cost above the reservation: it is what was spent', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't', 'm', 0.5);
    h.settle('r1', 0.8);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.8, reservedUsd: 0 });
    expect(h.book().counts.overruns).toBe(1);
    expect(h.reserve('r2', 't', 'm', 0.25).type).toBe('LEDGER.DENIED');
  });

  it('ignores a second settle, a release after a settle, and unknown ids', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't', 'm', 0.5);
    h.reserve('r2', 't', 'm', 0.3);
    h.settle('r1', 0.2);
    h.settle('r1', 0.4);
    h.release('r1');
    h.release('r2');
    h.release('r2');
    h.settle('r2', 0.3);
    h.settle('nope', 1);
    h.release('nope');
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.2, reservedUsd: 0 });
    expect(h.book().counts).toEqual({ reserved: 2, denied: 0, settled: 1, released: 1, overruns: 0 });
    expect(h.book().outstanding).toBe(0);
  });

  it('answers a repeated reservation id again without charging it twice', () => {
    const h = harness({ runUsd: 1 });
    expect(h.reserve('r1', 't', 'm', 0.6).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r1', 't', 'm', 0.6).type).toBe('LEDGER.RESERVED');
    expect(h.book().run().reservedUsd).toBe(0.6);
    expect(h.book().counts.reserved).toBe(1);
  });

  it('counts a settlement with a nonsense actual cost as the whole reservation', () => {
    const h = harness({});
    h.reserve('r1', 't', 'm', 0.5);
    h.settle('r1', Number.NaN);
    expect(h.book().run().spentUsd).toBe(0.5);
  });

  it('refuses a nonsense amount as a caller bug, not a budget denial', () => {
    const h = harness({ runUsd: 1 });
    for (const amount of [-1, Number.NaN, Infinity]) expect(denialOf(h.reserve(`r${amount}`, 't', 'm', amount)).code).toBe('internal');
    expect(h.reports).toEqual([]);
    expect(h.runDenied()).toBe(false);
  });
});

describe('ledgerMachine: denial message', () => {
  it('names the budget, its limit, spent, reserved and the amount asked, and what to do', () => {
    const h = harness({ perTaskUsd: { 'review/api': 2 } });
    h.reserve('r1', 'review/api', 'sonnet', 1.25);
    h.settle('r1', 0.75);
    h.reserve('r2', 'review/api', 'sonnet', 0.5);
    const error = denialOf(h.reserve('r3', 'review/api', 'sonnet', 0.812345));
    expect(error).toEqual({
      code: 'budget_exceeded',
      retryable: false,
      model: 'sonnet',
      message:
        'task "review/api" budget exceeded: limit $2, spent $0.75, reserved $0.5, asked $0.812345 ' +
        '(the worst case of a call of task "review/api" on model "sonnet"). Raise that budget, or lower the call\'s maxTokens.',
    });
  });

  it('says "run budget" for the run', () => {
    const h = harness({ runUsd: 0 });
    expect(denialOf(h.reserve('r1', 't', 'm', 0.001)).message).toMatch(/^run budget exceeded: limit \$0, spent \$0, reserved \$0, asked \$0\.001 /);
  });
});

describe('ledgerMachine: scale', () => {
  it('keeps 10,000 reservations outstanding and closes them all, each event O(1)', () => {
    const book = new LedgerBook({ runUsd: 10_000 });
    for (let i = 0; i < 10_000; i++) expect(book.reserve(`r${i}`, `t${i % 100}`, `m${i % 3}`, 1).kind).toBe('reserved');
    expect(book.reserve('last', 't0', 'm0', 0.001).kind).toBe('denied');
    for (let i = 0; i < 10_000; i++) i % 2 ? book.release(`r${i}`) : book.settle(`r${i}`, 0.5);
    expect(book.run()).toEqual({ limitUsd: 10_000, spentUsd: 2_500, reservedUsd: 0 });
    expect(book.task('t0')).toEqual({ spentUsd: 50, reservedUsd: 0 });
  });
});

// ---------------------------------------------------------------------------------------------
// Property: concurrent agents never push settled spend over a budget
// ---------------------------------------------------------------------------------------------

const TASKS = ['a', 'b', 'c', 'd'];
const MODELS = ['opus', 'haiku'];
const AGENTS = 6;
/** Amounts are whole micro-dollars, so the reference model below is exact integer arithmetic. */
const micros = (max: number) => fc.integer({ min: 0, max });
const optionalLimit = fc.option(micros(3_000_000), { nil: undefined });

const budgetsArb = fc.record({
  run: optionalLimit,
  tasks: fc.array(optionalLimit, { minLength: TASKS.length, maxLength: TASKS.length }),
  models: fc.array(optionalLimit, { minLength: MODELS.length, maxLength: MODELS.length }),
});

const stepArb = fc.record({
  agent: fc.nat(AGENTS - 1),
  task: fc.nat(TASKS.length - 1),
  model: fc.nat(MODELS.length - 1),
  amount: micros(1_500_000),
  /** actual = floor(amount x fraction / 1000) / 1000 of the reservation: never above it. */
  fraction: fc.nat(1000),
  end: fc.constantFrom('settle', 'release', 'fail'),
  extra: fc.constantFrom('none', 'none', 'settle', 'release', 'unknown'),
});

interface Held {
  id: string;
  amount: number;
  keys: string[];
}

describe('ledgerMachine: property', () => {
  it('never lets settled spend exceed a budget; every reservation closes exactly once; reserved ends at 0', () => {
    fc.assert(
      fc.property(budgetsArb, fc.array(stepArb, { maxLength: 150 }), (limits, steps) => {
        const toUsd = (m: number | undefined) => (m === undefined ? undefined : m / 1e6);
        const budgets: LedgerBudgets = {
          perTaskUsd: Object.fromEntries(TASKS.flatMap((t, i) => (limits.tasks[i] === undefined ? [] : [[t, toUsd(limits.tasks[i])!]]))),
          perModelUsd: Object.fromEntries(MODELS.flatMap((m, i) => (limits.models[i] === undefined ? [] : [[m, toUsd(limits.models[i])!]]))),
        };
        if (limits.run !== undefined) budgets.runUsd = toUsd(limits.run)!;
        const h = harness(budgets);

        // The reference: exact integer micro-dollars per budget key.
        const limit = new Map<string, number>();
        if (limits.run !== undefined) limit.set('run', limits.run);
        TASKS.forEach((t, i) => limits.tasks[i] !== undefined && limit.set(`task:${t}`, limits.tasks[i]!));
        MODELS.forEach((m, i) => limits.models[i] !== undefined && limit.set(`model:${m}`, limits.models[i]!));
        const spent = new Map<string, number>();
        const reserved = new Map<string, number>();
        const add = (map: Map<string, number>, keys: string[], n: number) => keys.forEach((k) => map.set(k, (map.get(k) ?? 0) + n));

        const holding: Array<Held | undefined> = new Array(AGENTS).fill(undefined);
        const closed = new Map<string, number>();
        let granted = 0;
        let seq = 0;

        const close = (held: Held, how: 'settle' | 'release', actual: number) => {
          if (how === 'settle') h.settle(held.id, actual / 1e6), add(spent, held.keys, actual);
          else h.release(held.id);
          add(reserved, held.keys, -held.amount);
          closed.set(held.id, (closed.get(held.id) ?? 0) + 1);
        };

        const check = () => {
          const views: Array<[string, ReturnType<LedgerBook['run']> | undefined]> = [
            ['run', h.book().run()],
            ...TASKS.map((t): [string, ReturnType<LedgerBook['run']> | undefined] => [`task:${t}`, h.book().task(t)]),
            ...MODELS.map((m): [string, ReturnType<LedgerBook['run']> | undefined] => [`model:${m}`, h.book().model(m)]),
          ];
          for (const [key, view] of views) {
            const spentUsd = view?.spentUsd ?? 0;
            if (limit.has(key)) expect(spentUsd, key).toBeLessThanOrEqual(limit.get(key)! / 1e6);
            expect(Math.round(spentUsd * 1e6), key).toBe(spent.get(key) ?? 0);
            expect(Math.round((view?.reservedUsd ?? 0) * 1e6), key).toBe(reserved.get(key) ?? 0);
          }
        };

        for (const step of steps) {
          const held = holding[step.agent];
          if (held === undefined) {
            const task = TASKS[step.task]!;
            const model = MODELS[step.model]!;
            const id = `agent${step.agent}.${seq++}`;
            const keys = ['run', `task:${task}`, `model:${model}`];
            const fits = keys.every((k) => !limit.has(k) || (spent.get(k) ?? 0) + (reserved.get(k) ?? 0) + step.amount <= limit.get(k)!);
            const reply = h.reserve(id, task, model, step.amount / 1e6);
            expect(reply.type).toBe(fits ? 'LEDGER.RESERVED' : 'LEDGER.DENIED');
            if (fits) {
              holding[step.agent] = { id, amount: step.amount, keys };
              add(reserved, keys, step.amount);
              granted++;
            } else expect(denialOf(reply).code).toBe('budget_exceeded');
          } else {
            // 'fail': the agent died before sending the call; the supervisor releases for it.
            const actual = Math.floor((held.amount * step.fraction) / 1000);
            close(held, step.end === 'settle' ? 'settle' : 'release', actual);
            holding[step.agent] = undefined;
            if (step.extra === 'settle') h.settle(held.id, held.amount / 1e6);
            if (step.extra === 'release') h.release(held.id);
            if (step.extra === 'unknown') h.settle(`ghost${seq}`, 1), h.release(`ghost${seq}`);
          }
          check();
        }

        // The run ends: every agent still holding one settles it.
        holding.forEach((held) => held && close(held, 'settle', held.amount));
        check();
        const { counts, outstanding } = { counts: h.book().counts, outstanding: h.book().outstanding };
        expect(outstanding).toBe(0);
        expect(counts.reserved).toBe(granted);
        expect(counts.settled + counts.released).toBe(granted);
        expect([...closed.values()].every((n) => n === 1)).toBe(true);
        expect(closed.size).toBe(granted);
        expect(h.book().run().reservedUsd).toBe(0);
        for (const t of TASKS) expect(h.book().task(t)?.reservedUsd ?? 0).toBe(0);
        for (const m of MODELS) expect(h.book().model(m)?.reservedUsd ?? 0).toBe(0);
        expect(h.replies.length).toBe(seq);
      }),
      { seed: 42, numRuns: 300 },
    );
  });
});
