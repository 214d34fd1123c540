/**
 * The circuit breaker of one route (provider + model): `closed` lets every call through,
 * `open` holds them while the route cools down, `halfOpen` lets exactly one probe through and
 * decides from its outcome. Agents ask with BREAKER.ADMIT and wait for BREAKER.ADMITTED (nobody
 * polls), then tell the breaker how the call went with BREAKER.REPORT.
 *
 * Only server-side failures (5xx, 529, timeout, reset) count against the route; agents report
 * 4xx, 429 and cancellations as `neutral`, which never opens the breaker.
 */
import { assign, enqueueActions, sendTo, setup } from 'xstate';
import type { AnyActorRef } from 'xstate';
import type { BreakerEvent, BreakerReply, BreakerVerdict, RunEvent } from './protocol.js';

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/** What the spawner gives a breaker (systemId `breaker:<provider>/<model>`). */
export interface BreakerInput {
  /** The route this breaker guards, `<provider>/<model>`. */
  route: string;
  /** Consecutive failures that open the breaker. Default 5. */
  failureThreshold?: number;
  /** Cooldown of the first open period, in ms. Default 10 000. */
  cooldownMs?: number;
  /** The cooldown never grows past this, in ms. Default 300 000. */
  maxCooldownMs?: number;
  /** Each failed probe multiplies the cooldown by this. Default 2. */
  cooldownFactor?: number;
}

/** A request held until the breaker lets it through. */
export interface BreakerWaiter {
  requestId: string;
  replyTo: AnyActorRef;
}

export interface BreakerContext {
  route: string;
  failureThreshold: number;
  baseCooldownMs: number;
  maxCooldownMs: number;
  cooldownFactor: number;
  /** Consecutive failures: a success resets it, a neutral report leaves it alone. */
  failures: number;
  /** Length of the current (or next) open period. */
  cooldownMs: number;
  /**
   * Requests held while open or half-open, oldest first. It only ever holds the agents in flight
   * on this route, so copying it on ADMIT/WITHDRAW stays cheap.
   */
  waiters: BreakerWaiter[];
  /** The one request let through as a probe while half-open, until it reports or withdraws. */
  probe: string | null;
}

/** The defaults from docs/architecture.md: open after 5 failures, half-open after 10 s (growing). */
export const BREAKER_DEFAULTS = Object.freeze({
  failureThreshold: 5,
  cooldownMs: 10_000,
  maxCooldownMs: 300_000,
  cooldownFactor: 2,
});

/**
 * The breaker's starting context, with defaults filled in.
 *
 * @throws RangeError naming the option when a value cannot work (a threshold below 1, a negative
 * cooldown, a cap below the first cooldown, a factor below 1).
 * @example
 * initialBreakerContext({ route: 'anthropic/claude-sonnet-4-5', failureThreshold: 3 }).cooldownMs // 10000
 */
export function initialBreakerContext(input: BreakerInput): BreakerContext {
  const failureThreshold = input.failureThreshold ?? BREAKER_DEFAULTS.failureThreshold;
  const cooldownMs = input.cooldownMs ?? BREAKER_DEFAULTS.cooldownMs;
  const maxCooldownMs = input.maxCooldownMs ?? Math.max(BREAKER_DEFAULTS.maxCooldownMs, cooldownMs);
  const cooldownFactor = input.cooldownFactor ?? BREAKER_DEFAULTS.cooldownFactor;
  const where = `breaker ${input.route}`;
  if (!Number.isInteger(failureThreshold) || failureThreshold < 1) {
    throw new RangeError(`${where}: failureThreshold must be an integer >= 1, got ${failureThreshold}`);
  }
  if (!Number.isFinite(cooldownMs) || cooldownMs < 0) {
    throw new RangeError(`${where}: cooldownMs must be a finite number >= 0, got ${cooldownMs}`);
  }
  if (!Number.isFinite(maxCooldownMs) || maxCooldownMs < cooldownMs) {
    throw new RangeError(`${where}: maxCooldownMs must be finite and >= cooldownMs (${cooldownMs}), got ${maxCooldownMs}`);
  }
  if (!Number.isFinite(cooldownFactor) || cooldownFactor < 1) {
    throw new RangeError(`${where}: cooldownFactor must be a finite number >= 1, got ${cooldownFactor}`);
  }
  return {
    route: input.route,
    failureThreshold,
    baseCooldownMs: cooldownMs,
    maxCooldownMs,
    cooldownFactor,
    failures: 0,
    cooldownMs,
    waiters: [],
    probe: null,
  };
}

/** The waiter an ADMIT stands for (without the event's `type`). */
function toWaiter(event: { requestId: string; replyTo: AnyActorRef }): BreakerWaiter {
  return { requestId: event.requestId, replyTo: event.replyTo };
}

function admitted(waiter: BreakerWaiter, probe: boolean): BreakerReply {
  return { type: 'BREAKER.ADMITTED', requestId: waiter.requestId, probe };
}

// ---------------------------------------------------------------------------------------------
// The machine
// ---------------------------------------------------------------------------------------------

/**
 * One breaker per route. Spawn it with a systemId `breaker:<route>`; agents send it
 * {@link BreakerEvent}s and get {@link BreakerReply}s on their `replyTo`.
 *
 * @example
 * const breaker = createActor(breakerMachine, { input: { route: 'openai/gpt-5' } }).start();
 * breaker.send({ type: 'BREAKER.ADMIT', requestId: 'r1', replyTo: agentRef });
 * // agentRef receives { type: 'BREAKER.ADMITTED', requestId: 'r1', probe: false }
 * breaker.send({ type: 'BREAKER.REPORT', requestId: 'r1', verdict: 'success' });
 */
export const breakerMachine = setup({
  types: {
    input: {} as BreakerInput,
    context: {} as BreakerContext,
    events: {} as BreakerEvent,
  },
  actions: {
    /** Tell the public event stream what happened; src replaces this no-op. */
    report: (_, _event: RunEvent) => {},
    /** Let one request through. */
    admit: sendTo(
      (_, params: { waiter: BreakerWaiter; probe: boolean }) => params.waiter.replyTo,
      (_, params: { waiter: BreakerWaiter; probe: boolean }) => admitted(params.waiter, params.probe),
    ),
    /** Hold a request; a repeated ADMIT for the same request keeps its place in the line. */
    holdWaiter: assign({
      waiters: ({ context }, waiter: BreakerWaiter) =>
        context.waiters.some((w) => w.requestId === waiter.requestId) ? context.waiters : [...context.waiters, waiter],
    }),
    dropWaiter: assign({
      waiters: ({ context }, params: { requestId: string }) => context.waiters.filter((w) => w.requestId !== params.requestId),
    }),
    countFailure: assign({ failures: ({ context }) => context.failures + 1 }),
    resetFailures: assign({ failures: 0 }),
    claimProbeSlot: assign({ probe: (_, params: { requestId: string }) => params.requestId }),
    freeProbeSlot: assign({ probe: null }),
    /** The probe failed: the route is still sick, so wait longer next time (up to the cap). */
    reopen: assign({
      failures: ({ context }) => context.failures + 1,
      cooldownMs: ({ context }) => Math.min(context.maxCooldownMs, context.cooldownMs * context.cooldownFactor),
      probe: null,
    }),
    /** The probe succeeded: forget the trouble, cooldown back to its base. */
    heal: assign(({ context }) => ({ failures: 0, cooldownMs: context.baseCooldownMs, probe: null })),
    /** Half-open with a free probe slot: the oldest waiter becomes the probe. */
    admitNextProbe: enqueueActions(({ context, enqueue }) => {
      const [next, ...rest] = context.waiters;
      if (context.probe !== null || next === undefined) return;
      enqueue.assign({ probe: next.requestId, waiters: rest });
      enqueue.sendTo(next.replyTo, admitted(next, true));
    }),
    /** Closed again: everyone held goes, in the order they asked. */
    admitAllWaiters: enqueueActions(({ context, enqueue }) => {
      for (const waiter of context.waiters) enqueue.sendTo(waiter.replyTo, admitted(waiter, false));
      enqueue.assign({ waiters: [] });
    }),
  },
  guards: {
    verdictIs: ({ event }, params: { verdict: BreakerVerdict }) => event.type === 'BREAKER.REPORT' && event.verdict === params.verdict,
    failureOpensBreaker: ({ context, event }) =>
      event.type === 'BREAKER.REPORT' && event.verdict === 'failure' && context.failures + 1 >= context.failureThreshold,
    /** Only the probe's outcome says anything while half-open; older calls' reports are stale. */
    probeReported: ({ context, event }, params: { verdict: BreakerVerdict }) =>
      event.type === 'BREAKER.REPORT' && event.requestId === context.probe && event.verdict === params.verdict,
    isProbe: ({ context, event }) => event.requestId === context.probe,
    probeSlotFree: ({ context }) => context.probe === null,
  },
  delays: {
    cooldown: ({ context }) => context.cooldownMs,
  },
}).createMachine({
  id: 'breaker',
  context: ({ input }) => initialBreakerContext(input),
  initial: 'closed',
  states: {
    closed: {
      on: {
        'BREAKER.ADMIT': {
          actions: { type: 'admit', params: ({ event }) => ({ waiter: toWaiter(event), probe: false }) },
        },
        'BREAKER.REPORT': [
          { guard: { type: 'verdictIs', params: { verdict: 'success' } }, actions: 'resetFailures' },
          { guard: 'failureOpensBreaker', target: 'open', actions: 'countFailure' },
          { guard: { type: 'verdictIs', params: { verdict: 'failure' } }, actions: 'countFailure' },
          // neutral: says nothing about the route
        ],
        // BREAKER.WITHDRAW: nobody waits while closed; nothing to do.
      },
    },
    open: {
      entry: {
        type: 'report',
        params: ({ context }) => ({
          type: 'breaker:open',
          route: context.route,
          cooldownMs: context.cooldownMs,
          failures: context.failures,
        }),
      },
      after: { cooldown: 'halfOpen' },
      on: {
        'BREAKER.ADMIT': {
          actions: { type: 'holdWaiter', params: ({ event }) => toWaiter(event) },
        },
        'BREAKER.WITHDRAW': {
          actions: { type: 'dropWaiter', params: ({ event }) => ({ requestId: event.requestId }) },
        },
        // BREAKER.REPORT: calls let through before the breaker opened; ignored.
      },
    },
    halfOpen: {
      entry: [{ type: 'report', params: ({ context }) => ({ type: 'breaker:halfOpen', route: context.route }) }, 'admitNextProbe'],
      on: {
        'BREAKER.ADMIT': [
          {
            guard: 'probeSlotFree',
            actions: [
              { type: 'claimProbeSlot', params: ({ event }) => ({ requestId: event.requestId }) },
              { type: 'admit', params: ({ event }) => ({ waiter: toWaiter(event), probe: true }) },
            ],
          },
          {
            actions: { type: 'holdWaiter', params: ({ event }) => toWaiter(event) },
          },
        ],
        'BREAKER.REPORT': [
          {
            guard: { type: 'probeReported', params: { verdict: 'success' } },
            target: 'closed',
            actions: [
              'heal',
              'admitAllWaiters',
              { type: 'report', params: ({ context }) => ({ type: 'breaker:closed', route: context.route }) },
            ],
          },
          { guard: { type: 'probeReported', params: { verdict: 'failure' } }, target: 'open', actions: 'reopen' },
          // A neutral probe (429, 4xx, cancelled) proves nothing: let the next one try.
          { guard: { type: 'probeReported', params: { verdict: 'neutral' } }, actions: ['freeProbeSlot', 'admitNextProbe'] },
        ],
        'BREAKER.WITHDRAW': [
          // A cancelled probe must not wedge the breaker.
          { guard: 'isProbe', actions: ['freeProbeSlot', 'admitNextProbe'] },
          { actions: { type: 'dropWaiter', params: ({ event }) => ({ requestId: event.requestId }) } },
        ],
      },
    },
  },
});
