import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createMachine, transition } from 'xstate';
import { LedgerBook, ledgerMachine } from '../../machines/ledger.machine.js';
import type { LedgerBalance, LedgerBudgets } from '../../machines/ledger.machine.js';
import type { LedgerReply, RunEvent } from '../../machines/protocol.js';

/** A ledger with one agent stand-in that logs every reply, and the run events it reports. */
function harness(budgets: LedgerBudgets) {
  const replies: LedgerReply[] = [];
  const reports: RunEvent[] = [];
  const agent = createActor(createMachine({ on: { '*': { actions: ({ event }) => void replies.push(event as LedgerReply) } } })).start();
  /** What the ledger told its `notify` (the supervisor in a run), after how many agent replies. */
  const news: { type: string; afterReplies: number }[] = [];
  const notify = createActor(createMachine({ on: { '*': { actions: ({ event }) => void news.push({ type: event.type, afterReplies: replies.length }) } } })).start();
  const machine = ledgerMachine.provide({ actions: { report: (_, e: RunEvent) => void reports.push(e) } });
  const ledger = createActor(machine, { input: { budgets, notify } }).start();
  const book = () => ledger.getSnapshot().context.book;
  /** The replies `send` caused. */
  const repliesOf = (send: () => void) => {
    const before = replies.length;
    send();
    return replies.slice(before);
  };
  const sendReserve = (reservationId: string, taskId: string, model: string, amountUsd: number) =>
    repliesOf(() => ledger.send({ type: 'LEDGER.RESERVE', reservationId, taskId, model, amountUsd, replyTo: agent }));
  return {
    ledger,
    replies,
    reports,
    news,
    book,
    runDenied: () => ledger.getSnapshot().context.runDenied,
    /** The ids of the requests waiting for room, head first. */
    waiting: () => ledger.getSnapshot().context.book.waiting.map((w) => w.reservationId),
    sendReserve,
    /** Sends a reservation that must be answered at once, and returns that one reply. */
    reserve: (reservationId: string, taskId: string, model: string, amountUsd: number) => {
      const answered = sendReserve(reservationId, taskId, model, amountUsd);
      expect(answered.map((r) => r.reservationId)).toEqual([reservationId]);
      return answered[0]!;
    },
    /** Sends a reservation that must wait: no reply, and it joins the end of the queue. */
    wait: (reservationId: string, taskId: string, model: string, amountUsd: number) => {
      expect(sendReserve(reservationId, taskId, model, amountUsd)).toEqual([]);
      expect(ledger.getSnapshot().context.book.waiting.at(-1)?.reservationId).toBe(reservationId);
    },
    /** Settles, and returns the replies to waiting requests it caused, in order. */
    settle: (reservationId: string, actualUsd: number) => repliesOf(() => ledger.send({ type: 'LEDGER.SETTLE', reservationId, actualUsd })),
    /** Releases (a reservation or a waiting request), and returns the replies it caused. */
    release: (reservationId: string) => repliesOf(() => ledger.send({ type: 'LEDGER.RELEASE', reservationId })),
  };
}

const denialOf = (reply: LedgerReply) => {
  if (reply.type !== 'LEDGER.DENIED') throw new Error(`expected a denial, got ${reply.type}`);
  return reply.error;
};

/** Replies as `[id, type]` pairs, easy to compare in order. */
const answers = (replies: LedgerReply[]) => replies.map((r) => [r.reservationId, r.type]);

describe('ledgerMachine: budgets', () => {
  it('grants what fits now, holds what would fit once reservations close until one is released, and denies what never fits', () => {
    const h = harness({ runUsd: 1 });
    expect(h.reserve('r1', 't1', 'sonnet', 0.6).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r2', 't2', 'sonnet', 0.4).type).toBe('LEDGER.RESERVED');
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: 1 });
    // 0.01 fits the budget, not next to $1 held: it waits, and waiting is no denial.
    h.wait('r3', 't3', 'sonnet', 0.01);
    expect(h.runDenied()).toBe(false);
    expect(h.reports).toEqual([]);
    expect(answers(h.release('r2'))).toEqual([['r3', 'LEDGER.RESERVED']]);
    expect(h.waiting()).toEqual([]);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: 0.61 });
    h.settle('r1', 0.5);
    h.settle('r3', 0.01);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.51, reservedUsd: 0 });
    expect(h.reserve('r4', 't3', 'sonnet', 0.49).type).toBe('LEDGER.RESERVED');
    h.settle('r4', 0.49);
    expect(denialOf(h.reserve('r5', 't3', 'sonnet', 0.000001))).toMatchObject({ code: 'budget_exceeded', retryable: false });
    expect(h.runDenied()).toBe(true);
  });

  it("denies by a task's budget what that task can never afford, without touching other tasks or the run flag", () => {
    const h = harness({ runUsd: 10, perTaskUsd: { a: 0.5 } });
    expect(h.reserve('a1', 'a', 'sonnet', 0.4).type).toBe('LEDGER.RESERVED');
    const error = denialOf(h.reserve('a2', 'a', 'sonnet', 0.6));
    expect(error.message).toContain('task "a" budget exceeded');
    expect(h.reserve('b1', 'b', 'sonnet', 0.2).type).toBe('LEDGER.RESERVED');
    expect(h.runDenied()).toBe(false);
    expect(h.book().task('a')).toEqual({ limitUsd: 0.5, spentUsd: 0, reservedUsd: 0.4 });
    expect(h.book().task('b')).toEqual({ spentUsd: 0, reservedUsd: 0.2 });
    expect(h.reports).toEqual([{ type: 'budget:denied', taskId: 'a', model: 'sonnet', amountUsd: 0.6, budget: 'task', limitUsd: 0.5, spentUsd: 0, reservedUsd: 0.4 }]);
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

  it('names the run budget first when several can never fit, and reports the numbers', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 0.1 }, perModelUsd: { m: 0.1 } });
    h.reserve('r1', 'x', 'y', 0.9);
    h.settle('r1', 0.9);
    denialOf(h.reserve('r2', 't', 'm', 0.2));
    expect(h.reports).toEqual([{ type: 'budget:denied', taskId: 't', model: 'm', amountUsd: 0.2, budget: 'run', limitUsd: 1, spentUsd: 0.9, reservedUsd: 0 }]);
    expect(h.runDenied()).toBe(true);
  });

  // FAILS with the current machine (a bug): the denial names the first budget short of room now
  // (the run's, full of reservations) instead of the one that can never fit (the task's), so a task
  // over its own budget marks the whole run as over budget, and the message says to raise the
  // wrong budget. Fix: in LedgerBook.reserve(), deny by the first budget where spent + amount >
  // limit when there is one, and only otherwise by the first where spent + reserved + amount > limit.
  it('names the budget that can never fit, not one that only lacks room now, and leaves the run flag alone', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 0.1 } });
    h.reserve('r1', 'x', 'm', 0.95);
    const error = denialOf(h.reserve('r2', 't', 'm', 0.2)); // run: later (0.2 <= 1 < 0.95 + 0.2); task: never (0.2 > 0.1)
    expect(h.reports).toEqual([{ type: 'budget:denied', taskId: 't', model: 'm', amountUsd: 0.2, budget: 'task', limitUsd: 0.1, spentUsd: 0, reservedUsd: 0 }]);
    expect(error.message).toContain('task "t" budget exceeded');
    expect(h.runDenied()).toBe(false);
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

describe('ledgerMachine: waiting for room', () => {
  it('grants a waiting request when a settlement below the worst case makes room, with no denial reported', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't1', 'm', 0.8);
    h.wait('r2', 't2', 'm', 0.5);
    expect(answers(h.settle('r1', 0.3))).toEqual([['r2', 'LEDGER.RESERVED']]);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.3, reservedUsd: 0.5 });
    expect(h.book().counts).toMatchObject({ reserved: 2, denied: 0 });
    expect(h.reports).toEqual([]);
    expect(h.runDenied()).toBe(false);
  });

  it('denies a waiting request once the settlement used up the room it waited for, and reports that denial', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't1', 'm', 0.8);
    h.wait('r2', 't2', 'm', 0.5);
    const [reply, ...more] = h.settle('r1', 0.7);
    expect(more).toEqual([]);
    expect(reply!.reservationId).toBe('r2');
    expect(denialOf(reply!)).toMatchObject({ code: 'budget_exceeded', message: expect.stringMatching(/^run budget exceeded: limit \$1, spent \$0\.7, reserved \$0, asked \$0\.5 /) });
    expect(h.reports).toEqual([{ type: 'budget:denied', taskId: 't2', model: 'm', amountUsd: 0.5, budget: 'run', limitUsd: 1, spentUsd: 0.7, reservedUsd: 0 }]);
    expect(h.runDenied()).toBe(true);
    expect(h.waiting()).toEqual([]);
    expect(h.book().outstanding).toBe(0);
  });

  it('answers in arrival order: a small request that would fit now waits behind a big one, whatever its task', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't1', 'm', 0.5);
    h.reserve('r2', 't2', 'm', 0.4);
    h.wait('big', 't3', 'm', 0.6);
    h.wait('small', 't4', 'm', 0.05); // 0.9 + 0.05 fits, but 'big' came first
    // What can never fit is no reason to wait: denied at once, past the queue.
    expect(denialOf(h.reserve('huge', 't5', 'm', 1.5)).code).toBe('budget_exceeded');
    // Releasing r2 is not room enough for the head (0.5 + 0.6 > 1): draining stops there.
    expect(h.release('r2')).toEqual([]);
    expect(h.waiting()).toEqual(['big', 'small']);
    expect(answers(h.settle('r1', 0.3))).toEqual([
      ['big', 'LEDGER.RESERVED'],
      ['small', 'LEDGER.RESERVED'],
    ]);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.3, reservedUsd: 0.65 });
  });

  it('drops a request released while it waits, with no reply, and answers the next in line', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't1', 'm', 0.9);
    h.wait('w1', 't2', 'm', 0.5);
    h.wait('w2', 't3', 'm', 0.05);
    expect(answers(h.release('w1'))).toEqual([['w2', 'LEDGER.RESERVED']]);
    expect(h.waiting()).toEqual([]);
    // Nothing was held for w1, so nothing was released from the book.
    expect(h.book().counts).toMatchObject({ reserved: 2, released: 0 });
    expect(h.book().outstanding).toBe(2);
    h.settle('r1', 0.1);
    h.settle('w2', 0.05);
    h.release('w1');
    expect(h.replies.filter((r) => r.reservationId === 'w1')).toEqual([]);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0.15, reservedUsd: 0 });
  });

  it('sets the run flag only on a denial by the run budget: not while waiting on it, not on a task denial', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 0.3 } });
    h.reserve('r1', 'x', 'm', 0.9);
    h.wait('w1', 'y', 'm', 0.5); // waits on the run budget
    expect(h.runDenied()).toBe(false);
    expect(answers(h.settle('r1', 0.2))).toEqual([['w1', 'LEDGER.RESERVED']]);
    h.settle('w1', 0.1);
    expect(h.reserve('t1', 't', 'm', 0.3).type).toBe('LEDGER.RESERVED');
    h.settle('t1', 0.3);
    expect(denialOf(h.reserve('t2', 't', 'm', 0.05)).message).toContain('task "t" budget exceeded'); // run: 0.6 + 0.05 fits, task: 0.35 > 0.3
    expect(h.runDenied()).toBe(false);
    expect(h.news).toEqual([]);
    expect(denialOf(h.reserve('r2', 'x', 'm', 0.5)).message).toContain('run budget exceeded'); // 0.6 + 0.5 > 1
    expect(h.runDenied()).toBe(true);
    expect(h.reports.map((e) => e.type === 'budget:denied' && e.budget)).toEqual(['task', 'run']);
    // The first run denial is news for the supervisor, once, after the agent's own answer.
    expect(h.news).toEqual([{ type: 'LEDGER.RUN_DENIED', afterReplies: h.replies.length }]);
    expect(denialOf(h.reserve('r3', 'x', 'm', 0.5)).message).toContain('run budget exceeded');
    expect(h.news).toHaveLength(1);
  });

  it('keeps a request waiting only while some reservation is outstanding: the last close answers the whole queue', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 0.5 } });
    h.reserve('r1', 't', 'm', 0.5);
    h.wait('w1', 't', 'm', 0.4);
    h.wait('w2', 'u', 'm', 0.7);
    h.wait('w3', 'u', 'm', 0.1);
    // r1 at its worst case leaves no room for w1 ever; w2 and w3 then fit in turn, or not.
    expect(answers(h.settle('r1', 0.5))).toEqual([
      ['w1', 'LEDGER.DENIED'],
      ['w2', 'LEDGER.DENIED'],
      ['w3', 'LEDGER.RESERVED'],
    ]);
    expect(h.waiting()).toEqual([]);
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

  it('reports a settlement far above its reservation that takes budgets over their limits: budget:overrun per budget, and the run once to notify', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 2 }, perModelUsd: { m: 0.5 } });
    h.reserve('r1', 't', 'm', 0.25);
    h.reserve('r2', 'u', 'm', 0.1);
    // $3 for a call that reserved $0.25: the run ($1), the task ($2) and the model ($0.5) are all over.
    h.settle('r1', 3);
    expect(h.reports).toEqual([
      { type: 'budget:overrun', taskId: 't', model: 'm', reservedUsd: 0.25, actualUsd: 3, budget: 'run', limitUsd: 1, spentUsd: 3 },
      { type: 'budget:overrun', taskId: 't', model: 'm', reservedUsd: 0.25, actualUsd: 3, budget: 'task', limitUsd: 2, spentUsd: 3 },
      { type: 'budget:overrun', taskId: 't', model: 'm', reservedUsd: 0.25, actualUsd: 3, budget: 'model', limitUsd: 0.5, spentUsd: 3 },
    ]);
    expect(h.news).toEqual([{ type: 'LEDGER.RUN_OVERSPENT', afterReplies: h.replies.length }]);
    // Another settlement above its reservation on the overspent run: reported again (what it adds), news not again.
    h.settle('r2', 0.2);
    expect(h.reports.slice(3)).toEqual([
      { type: 'budget:overrun', taskId: 'u', model: 'm', reservedUsd: 0.1, actualUsd: 0.2, budget: 'run', limitUsd: 1, spentUsd: 3.2 },
      { type: 'budget:overrun', taskId: 'u', model: 'm', reservedUsd: 0.1, actualUsd: 0.2, budget: 'model', limitUsd: 0.5, spentUsd: 3.2 },
    ]);
    expect(h.news.map((n) => n.type)).toEqual(['LEDGER.RUN_OVERSPENT']);
  });

  it('says nothing of a settlement at or under its reservation, nor of one above it that stays within every budget', () => {
    const h = harness({ runUsd: 1, perTaskUsd: { t: 1 } });
    h.reserve('r1', 't', 'm', 0.5);
    h.settle('r1', 0.5);
    h.reserve('r2', 't', 'm', 0.1);
    h.settle('r2', 0.4); // above its reservation, but $0.9 of $1
    expect(h.book().counts.overruns).toBe(1);
    expect(h.reports).toEqual([]);
    expect(h.news).toEqual([]);
    // A worst-case settlement (NaN: the whole reservation) never overruns.
    h.reserve('r3', 't', 'm', 0.1);
    h.settle('r3', Number.NaN);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 1, reservedUsd: 0 });
    expect(h.reports).toEqual([]);
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
    expect(h.reserve('r1', 't', 'm', 0.4).type).toBe('LEDGER.RESERVED');
    expect(h.reserve('r1', 't', 'm', 0.4).type).toBe('LEDGER.RESERVED');
    expect(h.book().run().reservedUsd).toBe(0.4);
    expect(h.book().counts.reserved).toBe(1);
  });

  // FAILS with the current machine (a bug): `reserve` asks verdict() before the book sees the id
  // is already outstanding, and 0.6 + 0.6 > 1 says 'later', so the repeat waits. Once r1 settles
  // below its worst case, the drain grants the repeat as a NEW reservation r1 that nobody will
  // settle: its room stays held and the run never gets back to outstanding 0. Fix: in the
  // `reserve` action (and in `drain`), answer at once a request whose id is outstanding (e.g. a
  // LedgerBook.isOpen(id), or verdict() taking the id and saying 'now' for an open one).
  it('answers a repeated id of an outstanding reservation at once, even when its amount would not fit next to itself', () => {
    const h = harness({ runUsd: 1 });
    expect(h.reserve('r1', 't', 'm', 0.6).type).toBe('LEDGER.RESERVED');
    expect(h.sendReserve('r1', 't', 'm', 0.6).map((r) => r.type)).toEqual(['LEDGER.RESERVED']);
    expect(h.waiting()).toEqual([]);
    expect(h.settle('r1', 0.2)).toEqual([]);
    expect(h.book().outstanding).toBe(0);
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

  // FAILS with the current machine (a bug): verdict() says 'now' for a nonsense amount, and
  // anything but 'never' waits behind a non-empty queue, so the caller bug is answered only when
  // the queue drains (and never if its agent gives up first). Fix: verdict() returns 'never' for
  // an amount that is not a finite, non-negative number (reserve() then refuses it as 'invalid').
  it('refuses a nonsense amount at once even while others wait', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't', 'm', 0.6);
    h.wait('w1', 't', 'm', 0.6);
    expect(h.sendReserve('bad', 't', 'm', Number.NaN).map((r) => r.type === 'LEDGER.DENIED' && r.error.code)).toEqual(['internal']);
    expect(h.waiting()).toEqual(['w1']);
  });
});

describe('ledgerMachine: denial message', () => {
  it('names the budget, its limit, spent, reserved and the amount asked, and what to do', () => {
    const h = harness({ perTaskUsd: { 'review/api': 2 } });
    h.reserve('r1', 'review/api', 'sonnet', 1.25);
    h.settle('r1', 0.75);
    h.reserve('r2', 'review/api', 'sonnet', 0.5);
    const error = denialOf(h.reserve('r3', 'review/api', 'sonnet', 1.312345)); // 0.75 + 1.312345 > 2: never fits
    expect(error).toEqual({
      code: 'budget_exceeded',
      retryable: false,
      model: 'sonnet',
      message:
        'task "review/api" budget exceeded: limit $2, spent $0.75, reserved $0.5, asked $1.312345 ' +
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

  it('queues 10,000 requests behind one big reservation and grants them all, in order, when it is released', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('big', 't', 'm', 1);
    for (let i = 0; i < 10_000; i++) h.sendReserve(`w${i}`, `t${i % 100}`, 'm', 0.0001);
    expect(h.waiting().length).toBe(10_000);
    const granted = h.release('big');
    expect(granted.length).toBe(10_000);
    expect(granted.every((r, i) => r.type === 'LEDGER.RESERVED' && r.reservationId === `w${i}`)).toBe(true);
    expect(h.book().run()).toEqual({ limitUsd: 1, spentUsd: 0, reservedUsd: 1 });
  });
});

// ---------------------------------------------------------------------------------------------
// Literal cases at the edges of the rule (what a reference could get wrong the same way)
// ---------------------------------------------------------------------------------------------

describe('ledgerMachine: the rule at its edges, as literal cases', () => {
  /** Each case: budgets, then steps, and the replies each step must cause (in order). */
  const cases: { name: string; budgets: LedgerBudgets; steps: [op: string, ...args: (string | number)[]][]; replies: string[][] }[] = [
    {
      name: 'spent + reserved + amount exactly the limit: granted; a micro-dollar more: waits',
      budgets: { runUsd: 1 },
      steps: [['reserve', 'r1', 't', 'm', 0.4], ['reserve', 'r2', 't', 'm', 0.6], ['reserve', 'r3', 't', 'm', 0.000001]],
      replies: [['r1 RESERVED'], ['r2 RESERVED'], []],
    },
    {
      name: 'spent + amount exactly the limit: it waits for room (it can fit); a micro-dollar more: refused at once',
      budgets: { runUsd: 1 },
      steps: [['reserve', 'r1', 't', 'm', 0.5], ['settle', 'r1', 0.5], ['reserve', 'r2', 't', 'm', 0.3], ['reserve', 'r3', 't', 'm', 0.5], ['reserve', 'r4', 't', 'm', 0.500001], ['release', 'r2']],
      replies: [['r1 RESERVED'], [], ['r2 RESERVED'], [], ['r4 DENIED run'], ['r3 RESERVED']],
    },
    {
      name: 'FIFO: a request that fits now waits behind an earlier one that waits; both answered in order when room comes',
      budgets: { runUsd: 1 },
      steps: [['reserve', 'big', 'a', 'm', 0.9], ['reserve', 'mid', 'b', 'm', 0.5], ['reserve', 'tiny', 'c', 'm', 0.05], ['settle', 'big', 0.1]],
      replies: [['big RESERVED'], [], [], ['mid RESERVED', 'tiny RESERVED']],
    },
    {
      name: 'a waiting head that can no longer fit after a settlement is refused, and the next is answered after it',
      budgets: { runUsd: 1 },
      steps: [['reserve', 'a1', 'a', 'm', 0.8], ['reserve', 'b1', 'b', 'm', 0.5], ['reserve', 'c1', 'c', 'm', 0.1], ['settle', 'a1', 0.8]],
      replies: [['a1 RESERVED'], [], [], ['b1 DENIED run', 'c1 RESERVED']],
    },
    {
      name: 'the task budget binds alone; the model budget binds across tasks; no cap means no limit',
      budgets: { perTaskUsd: { t: 0.3 }, perModelUsd: { m: 0.5 } },
      steps: [['reserve', 'x1', 't', 'm', 0.3], ['settle', 'x1', 0.3], ['reserve', 'x2', 't', 'other', 0.000001], ['reserve', 'y1', 'u', 'm', 0.2], ['settle', 'y1', 0.2], ['reserve', 'y2', 'u', 'm', 0.000001], ['reserve', 'z1', 'u', 'other', 1000]],
      replies: [['x1 RESERVED'], [], ['x2 DENIED task'], ['y1 RESERVED'], [], ['y2 DENIED model'], ['z1 RESERVED']],
    },
    {
      name: 'a settlement at NaN counts the whole reservation; one below it frees the difference',
      budgets: { runUsd: 1 },
      steps: [['reserve', 'r1', 't', 'm', 0.6], ['settle', 'r1', Number.NaN], ['reserve', 'r2', 't', 'm', 0.4], ['reserve', 'r3', 't', 'm', 0.1], ['settle', 'r2', 0.3]],
      replies: [['r1 RESERVED'], [], ['r2 RESERVED'], [], ['r3 RESERVED']],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const h = harness(c.budgets);
      const got = c.steps.map(([op, ...args]) => {
        const replies =
          op === 'reserve'
            ? h.sendReserve(args[0] as string, args[1] as string, args[2] as string, args[3] as number)
            : op === 'settle'
              ? h.settle(args[0] as string, args[1] as number)
              : h.release(args[0] as string);
        return replies.map((r) => (r.type === 'LEDGER.RESERVED' ? `${r.reservationId} RESERVED` : `${r.reservationId} DENIED ${/^(run|task|model)/.exec(r.error.message)?.[1] ?? r.error.code}`));
      });
      expect(got).toEqual(c.replies);
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Property: concurrent agents never push settled spend over a budget, and waiting ends
// ---------------------------------------------------------------------------------------------

const TASKS = ['a', 'b', 'c', 'd'];
const MODELS = ['opus', 'haiku'];
const AGENTS = 6;
/** Amounts are whole micro-dollars, so the reference model below is exact integer arithmetic. */
const micros = (max: number) => fc.integer({ min: 0, max });
/** Tight limits run out within a few calls; loose ones leave many reservations outstanding, so requests wait. */
const optionalLimit = fc.option(fc.oneof(micros(3_000_000), micros(30_000_000)), { nil: undefined });

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
  /** What a holding agent does; a waiting agent gives up ('fail': released by the supervisor) or keeps waiting. */
  end: fc.constantFrom('settle', 'release', 'fail'),
  extra: fc.constantFrom('none', 'none', 'settle', 'release', 'unknown'),
});

/** One request in the reference's history: who asked, what for, against which budgets, and where it is now. */
interface Entry {
  id: string;
  agent: number;
  task: string;
  model: string;
  /** Micro-dollars. */
  amount: number;
  /** The budget keys it counts against: `run`, `task:<id>`, `model:<name>`. */
  keys: string[];
  state: 'waiting' | 'held' | 'settled' | 'released' | 'denied' | 'withdrawn';
  /** What it cost, once settled. */
  actual?: number;
  /** Once refused: the budget that could never fit it, and that budget's spent and reserved then. */
  denial?: { key: string; spent: number; reserved: number };
}

/**
 * The ledger as docs/architecture.md (Budgets) states it, with no bookkeeping of its own: every
 * request is kept in arrival order with its state, and each sum is taken afresh over that list.
 * - settled spend of a budget: what its settled requests cost; reserved: what its held ones hold;
 * - a request fits now when, for every budget with a limit, spent + reserved + amount <= limit;
 *   it can never fit when, for some budget, spent + amount > limit;
 * - on arrival: never fits -> refused; fits now and nobody waits -> granted; else it waits;
 * - after a settlement or release, the oldest waiting request is answered (refused if it can
 *   never fit, granted if it fits now) and so on, until one still only lacks room.
 */
class ReferenceLedger {
  readonly history: Entry[] = [];
  constructor(readonly limits: ReadonlyMap<string, number>) {}

  private sum(key: string, state: Entry['state'], of: (e: Entry) => number): number {
    return this.history.filter((e) => e.state === state && e.keys.includes(key)).reduce((total, e) => total + of(e), 0);
  }
  spent(key: string): number {
    return this.sum(key, 'settled', (e) => e.actual!);
  }
  reserved(key: string): number {
    return this.sum(key, 'held', (e) => e.amount);
  }
  /** The first budget (run, task, model) the request can never fit, if any. */
  neverFits(e: Entry): string | undefined {
    return e.keys.find((k) => this.limits.has(k) && this.spent(k) + e.amount > this.limits.get(k)!);
  }
  fitsNow(e: Entry): boolean {
    return e.keys.every((k) => !this.limits.has(k) || this.spent(k) + this.reserved(k) + e.amount <= this.limits.get(k)!);
  }
  waiting(): Entry[] {
    return this.history.filter((e) => e.state === 'waiting');
  }
  /** What the ledger must answer, in order, for `e` arriving, and every answer it causes. */
  arrive(e: Entry): Entry[] {
    const nobodyWaits = this.waiting().length === 0;
    this.history.push(e);
    if (this.neverFits(e) !== undefined) this.deny(e);
    else if (nobodyWaits && this.fitsNow(e)) e.state = 'held';
    else return [];
    return [e];
  }
  private deny(e: Entry): void {
    const key = this.neverFits(e)!;
    e.denial = { key, spent: this.spent(key), reserved: this.reserved(key) };
    e.state = 'denied';
  }
  close(e: Entry, how: 'settle' | 'release', actual: number): Entry[] {
    if (how === 'settle') {
      e.state = 'settled';
      e.actual = actual;
    } else e.state = 'released';
    return this.answerWaiting();
  }
  withdraw(e: Entry): Entry[] {
    e.state = 'withdrawn';
    return this.answerWaiting();
  }
  private answerWaiting(): Entry[] {
    const answered: Entry[] = [];
    for (let head = this.waiting()[0]; head; head = this.waiting()[0]) {
      if (this.neverFits(head) !== undefined) this.deny(head);
      else if (this.fitsNow(head)) head.state = 'held';
      else break;
      answered.push(head);
    }
    return answered;
  }
}

describe('ledgerMachine: property', () => {
  it('answers as the stated rule does (a reference that sums its history afresh); never lets settled spend exceed a budget; every reservation closes once; nothing waits once agents settle', () => {
    const seen = { granted: 0, denied: 0, waited: 0, grantedAfterWaiting: 0, deniedAfterWaiting: 0 };
    // size 'medium': fast-check's default ('small') makes runs of a handful of steps, too short for queues to form.
    fc.assert(
      fc.property(budgetsArb, fc.array(stepArb, { minLength: 40, maxLength: 150, size: 'medium' }), (limits, steps) => {
        const usd = (m: number) => m / 1e6;
        const budgets: LedgerBudgets = {
          perTaskUsd: Object.fromEntries(TASKS.flatMap((t, i) => (limits.tasks[i] === undefined ? [] : [[t, usd(limits.tasks[i]!)]]))),
          perModelUsd: Object.fromEntries(MODELS.flatMap((m, i) => (limits.models[i] === undefined ? [] : [[m, usd(limits.models[i]!)]]))),
        };
        if (limits.run !== undefined) budgets.runUsd = usd(limits.run);
        const h = harness(budgets);

        const limit = new Map<string, number>();
        if (limits.run !== undefined) limit.set('run', limits.run);
        TASKS.forEach((t, i) => limits.tasks[i] !== undefined && limit.set(`task:${t}`, limits.tasks[i]!));
        MODELS.forEach((m, i) => limits.models[i] !== undefined && limit.set(`model:${m}`, limits.models[i]!));
        const ref = new ReferenceLedger(limit);
        const held = (agent: number) => ref.history.find((e) => e.agent === agent && (e.state === 'held' || e.state === 'waiting'));
        const expected: { reservationId: string; type: LedgerReply['type']; report?: RunEvent }[] = [];
        const closed = new Map<string, number>();
        let seq = 0;
        let seen2 = 0;

        /** The replies (and budget:denied reports) the reference's answers must be, in order. */
        const expect$ = (answered: Entry[]) => {
          for (const e of answered) {
            if (e.state === 'held') {
              expected.push({ reservationId: e.id, type: 'LEDGER.RESERVED' });
              seen.granted++;
            } else {
              // Named by the first budget whose settled spend leaves it no room, with that budget's numbers then.
              const { key: k, spent, reserved } = e.denial!;
              const budget = k === 'run' ? 'run' : k.startsWith('task:') ? 'task' : 'model';
              const report: RunEvent = { type: 'budget:denied', taskId: e.task, model: e.model, amountUsd: usd(e.amount), budget, limitUsd: usd(limit.get(k)!), spentUsd: usd(spent), reservedUsd: usd(reserved) };
              expected.push({ reservationId: e.id, type: 'LEDGER.DENIED', report });
              seen.denied++;
            }
          }
        };
        const close = (e: Entry, how: 'settle' | 'release', actual: number) => {
          if (how === 'settle') h.settle(e.id, usd(actual));
          else h.release(e.id);
          closed.set(e.id, (closed.get(e.id) ?? 0) + 1);
          const before = ref.waiting().length;
          const answered = ref.close(e, how, actual);
          expect$(answered);
          if (before > 0) {
            seen.grantedAfterWaiting += answered.filter((a) => a.state === 'held').length;
            seen.deniedAfterWaiting += answered.filter((a) => a.state === 'denied').length;
          }
        };

        const check = () => {
          const got = h.replies.slice(seen2).map((r) => ({ reservationId: r.reservationId, type: r.type, code: r.type === 'LEDGER.DENIED' ? r.error.code : undefined }));
          const want = expected.slice(seen2).map((e) => ({ reservationId: e.reservationId, type: e.type, code: e.type === 'LEDGER.DENIED' ? 'budget_exceeded' : undefined }));
          expect(got).toEqual(want);
          seen2 = h.replies.length;
          expect(h.reports).toEqual(expected.flatMap((e) => (e.report ? [e.report] : [])));
          // The run flag: some request was refused by the run budget.
          expect(h.runDenied()).toBe(expected.some((e) => e.report?.type === 'budget:denied' && e.report.budget === 'run'));
          expect(h.waiting()).toEqual(ref.waiting().map((e) => e.id));
          const views: Array<[string, ReturnType<LedgerBook['run']> | undefined]> = [
            ['run', h.book().run()],
            ...TASKS.map((t): [string, ReturnType<LedgerBook['run']> | undefined] => [`task:${t}`, h.book().task(t)]),
            ...MODELS.map((m): [string, ReturnType<LedgerBook['run']> | undefined] => [`model:${m}`, h.book().model(m)]),
          ];
          for (const [key, view] of views) {
            const spentUsd = view?.spentUsd ?? 0;
            if (limit.has(key)) expect(spentUsd, key).toBeLessThanOrEqual(usd(limit.get(key)!));
            expect(Math.round(spentUsd * 1e6), key).toBe(ref.spent(key));
            expect(Math.round((view?.reservedUsd ?? 0) * 1e6), key).toBe(ref.reserved(key));
          }
        };

        for (const step of steps) {
          const mine = held(step.agent);
          if (!mine) {
            const task = TASKS[step.task]!;
            const model = MODELS[step.model]!;
            const e: Entry = { id: `agent${step.agent}.${seq++}`, agent: step.agent, task, model, amount: step.amount, keys: ['run', `task:${task}`, `model:${model}`], state: 'waiting' };
            h.sendReserve(e.id, task, model, usd(e.amount));
            expect$(ref.arrive(e));
            if (e.state === 'waiting') seen.waited++;
          } else if (mine.state === 'waiting') {
            if (step.end === 'fail') {
              // The agent died while it waited: the supervisor releases for it, and no answer comes.
              h.release(mine.id);
              expect$(ref.withdraw(mine));
            } else if (step.extra === 'unknown') h.settle(`ghost${seq}`, 1), h.release(`ghost${seq}`); // drains, changes nothing
          } else {
            // 'fail': the agent died before sending the call; the supervisor releases for it.
            close(mine, step.end === 'settle' ? 'settle' : 'release', Math.floor((mine.amount * step.fraction) / 1000));
            if (step.extra === 'settle') h.settle(mine.id, usd(mine.amount));
            if (step.extra === 'release') h.release(mine.id);
            if (step.extra === 'unknown') h.settle(`ghost${seq}`, 1), h.release(`ghost${seq}`);
          }
          check();
        }

        // The run ends: every agent holding a reservation settles it at its worst case, and the
        // waiting ones are answered as that frees room (and settle in turn if granted).
        for (let e = ref.history.find((x) => x.state === 'held'); e; e = ref.history.find((x) => x.state === 'held')) {
          close(e, 'settle', e.amount);
          check();
        }
        // Nothing waits forever: with nothing outstanding, every head was granted or refused.
        expect(ref.waiting()).toEqual([]);
        expect(h.waiting()).toEqual([]);

        const granted = ref.history.filter((e) => e.state === 'settled' || e.state === 'released').length;
        const { counts, outstanding } = { counts: h.book().counts, outstanding: h.book().outstanding };
        expect(outstanding).toBe(0);
        expect(counts.reserved).toBe(granted);
        expect(counts.denied).toBe(ref.history.filter((e) => e.state === 'denied').length);
        expect(counts.settled + counts.released).toBe(granted);
        expect([...closed.values()].every((n) => n === 1)).toBe(true);
        expect(closed.size).toBe(granted);
        expect(h.book().run().reservedUsd).toBe(0);
        for (const t of TASKS) expect(h.book().task(t)?.reservedUsd ?? 0).toBe(0);
        for (const m of MODELS) expect(h.book().model(m)?.reservedUsd ?? 0).toBe(0);
        // At most one reply per request: exactly one, unless withdrawn while it waited.
        const replyCount = new Map<string, number>();
        for (const r of h.replies) replyCount.set(r.reservationId, (replyCount.get(r.reservationId) ?? 0) + 1);
        for (const e of ref.history) expect(replyCount.get(e.id) ?? 0, e.id).toBe(e.state === 'withdrawn' ? 0 : 1);
        expect(h.replies.length).toBe(ref.history.filter((e) => e.state !== 'withdrawn').length);
      }),
      { seed: 42, numRuns: 200 },
    );
    // The runs reached the interesting branches, each many times.
    // (seed 42: 4002 granted, 9358 denied, 1114 waited, 633 granted and 100 denied after waiting)
    expect(seen.granted).toBeGreaterThan(2000);
    expect(seen.denied).toBeGreaterThan(2000);
    expect(seen.waited).toBeGreaterThan(500);
    expect(seen.grantedAfterWaiting).toBeGreaterThan(300);
    expect(seen.deniedAfterWaiting).toBeGreaterThan(50);
  });
});

// ---------------------------------------------------------------------------------------------
// Purity, and the balance the ledger announces
// ---------------------------------------------------------------------------------------------

describe('ledgerMachine: context changes only in assign; the balance leaves by action', () => {
  const agent = () => createActor(createMachine({})).start();

  it('leaves the snapshot a transition is computed from as it was: its own fields are replaced, not changed in place', () => {
    const h = harness({ runUsd: 1 });
    h.reserve('r1', 't1', 'm', 0.6);
    const before = h.ledger.getSnapshot();
    const { runDenied, outbox } = before.context;
    // Denied by the run budget: the next snapshot says so; the one it came from must not (the
    // book is held by reference on purpose, so only the context's own fields can be compared).
    const [next] = transition(ledgerMachine, before, { type: 'LEDGER.RESERVE', reservationId: 'r2', taskId: 't2', model: 'm', amountUsd: 2, replyTo: agent() });
    expect(before.context.runDenied).toBe(runDenied);
    expect(before.context.runDenied).toBe(false);
    expect(next.context.runDenied).toBe(true);
    // The agent's answer, then the news for `notify` (this harness's ledger has one).
    expect(next.context.outbox.map((a) => a.reply?.type)).toEqual(['LEDGER.DENIED', 'LEDGER.RUN_DENIED']);
    expect(next.context).not.toBe(before.context);
    expect(before.context.outbox).toBe(outbox);
    expect(before.context.outbox.map((a) => a.reply?.type)).toEqual(['LEDGER.RESERVED']);
  });

  it('announces the run budget left through its balance action: at start (a resumed run\'s spend counted) and after every event', () => {
    const balances: number[] = [];
    const machine = ledgerMachine.provide({ actions: { balance: (_, b: LedgerBalance) => void balances.push(b.budgetLeftUsd) } });
    const ledger = createActor(machine, { input: { budgets: { runUsd: 1, spent: { runUsd: 0.25, byTask: {}, byModel: {} } } } }).start();
    const replyTo = agent();
    ledger.send({ type: 'LEDGER.RESERVE', reservationId: 'r1', taskId: 't', model: 'm', amountUsd: 0.5, replyTo });
    ledger.send({ type: 'LEDGER.RESERVE', reservationId: 'r2', taskId: 't', model: 'm', amountUsd: 0.5, replyTo }); // waits
    ledger.send({ type: 'LEDGER.SETTLE', reservationId: 'r1', actualUsd: 0.1 }); // r2 granted
    ledger.send({ type: 'LEDGER.RELEASE', reservationId: 'r2' });
    expect(balances.map((b) => Math.round(b * 1e6) / 1e6)).toEqual([0.75, 0.25, 0.25, 0.15, 0.65]);
    // What a hook is told is what the book holds.
    expect(balances.at(-1)).toBe(ledger.getSnapshot().context.book.runLeft());
  });

  it('announces nothing without a run budget (a task budget alone has no run balance)', () => {
    const balances: number[] = [];
    const machine = ledgerMachine.provide({ actions: { balance: (_, b: LedgerBalance) => void balances.push(b.budgetLeftUsd) } });
    const ledger = createActor(machine, { input: { budgets: { perTaskUsd: { t: 1 } } } }).start();
    ledger.send({ type: 'LEDGER.RESERVE', reservationId: 'r1', taskId: 't', model: 'm', amountUsd: 0.5, replyTo: agent() });
    expect(balances).toEqual([]);
  });
});
