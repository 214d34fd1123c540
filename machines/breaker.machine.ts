/**
 * The circuit breaker of one route (provider + model): `closed` lets every call through,
 * `open` holds them while the route cools down, `halfOpen` lets exactly one probe through and
 * decides from its outcome. Its provider's pool is its front desk (breakerDesk.ts): the breaker
 * tells the pool BREAKER.STATE when it becomes or stops being `clear` (closed, no failure
 * counted), and while it is clear the pool lets the route's lease requests through itself and
 * keeps the outcomes that cannot change it (a success or a neutral). Otherwise the pool hands a
 * request over with BREAKER.ADMIT (nobody polls) and passes every outcome on as BREAKER.REPORT.
 * An ADMIT may carry the message it lets through (`then`: the lease request, back to the pool),
 * so a closed breaker passes it on at once; one with `unlessOpen` is refused, not held, while
 * open (its agent has a fallback to go to). BREAKER.PEEK asks whether the route is open.
 *
 * Only server-side failures (5xx, 529, timeout, reset) count against the route; agents report
 * 4xx, 429 and cancellations as `neutral`, which never opens the breaker.
 */
import { assign, enqueueActions, sendTo, setup } from 'xstate';
import type { AnyActorRef } from 'xstate';
import type { BreakerEvent, BreakerNews, BreakerReply, BreakerVerdict, RunEvent } from './protocol.js';

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/**
 * A breaker's settings, the same for every route of a swarm (`createSwarm({ breaker })`). The one
 * type for them: src/ and the supervisor's input use it too.
 */
export interface BreakerOptions {
  /** Consecutive failures that open the breaker. Default 5. */
  failureThreshold?: number;
  /** Cooldown of the first open period, in ms. Default 10 000. */
  cooldownMs?: number;
  /** The cooldown never grows past this, in ms. Default 300 000. */
  maxCooldownMs?: number;
  /** Each failed probe multiplies the cooldown by this. Default 2. */
  cooldownFactor?: number;
}

/** What the spawner gives a breaker (systemId `breaker:<provider>/<model>`). */
export interface BreakerInput extends BreakerOptions {
  /** The route this breaker guards, `<provider>/<model>`. */
  route: string;
}

/** A request held until the breaker lets it through. */
export interface BreakerWaiter {
  requestId: string;
  replyTo: AnyActorRef;
  /** What to send on when it is let through, instead of BREAKER.ADMITTED. */
  then?: { to: AnyActorRef; event: { type: string } };
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
function toWaiter(event: Extract<BreakerEvent, { type: 'BREAKER.ADMIT' }>): BreakerWaiter {
  return event.then ? { requestId: event.requestId, replyTo: event.replyTo, then: event.then } : { requestId: event.requestId, replyTo: event.replyTo };
}

/** Whom a let-through request is sent to, and what: its own message passed on, or BREAKER.ADMITTED. */
function letThrough(waiter: BreakerWaiter, probe: boolean): { to: AnyActorRef; event: { type: string } } {
  if (waiter.then) return waiter.then;
  const reply: BreakerReply = { type: 'BREAKER.ADMITTED', requestId: waiter.requestId, probe };
  return { to: waiter.replyTo, event: reply };
}

/** The pool of the route's provider (`<provider>/<model>`): the breaker's front desk. */
const poolIdOf = (route: string) => `pool:${route.slice(0, route.indexOf('/'))}`;

function status(event: { requestId: string }, open: boolean): BreakerReply {
  return { type: 'BREAKER.STATUS', requestId: event.requestId, open };
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
/** Before a failure is counted: the first one ends `clear` (later ones change nothing the pool is told). */
const firstFailureNews = { type: 'tellPool', params: ({ context }: { context: BreakerContext }) => ({ clear: false, quiet: context.failures > 0 }) } as const;

export const breakerMachine = setup({
  types: {
    input: {} as BreakerInput,
    context: {} as BreakerContext,
    events: {} as BreakerEvent,
  },
  actions: {
    /** Tell the public event stream what happened; src replaces this no-op. */
    report: (_, _event: RunEvent) => {},
    /**
     * News for the pool, when `clear` changes (`quiet`: it does not). `heard` is the pool's `seq`
     * of the report being processed: the pool trusts a `clear` only if it reflects every failure
     * it passed on. No pool (a breaker alone): nobody to tell.
     */
    tellPool: enqueueActions(({ context, event, system, enqueue }, params: { clear: boolean; quiet?: boolean }) => {
      const pool = params.quiet ? undefined : system.get(poolIdOf(context.route));
      if (pool === undefined) return;
      const news: BreakerNews = { type: 'BREAKER.STATE', route: context.route, clear: params.clear, heard: (event as { seq?: number }).seq ?? 0 };
      enqueue.sendTo(pool, news);
    }),
    /**
     * Closed: the request goes at once, its own message passed on or BREAKER.ADMITTED. Read off
     * the event, with no waiter built and no action list: every call of the route takes this path.
     */
    passOn: sendTo(
      ({ event }) => {
        const admit = event as Extract<BreakerEvent, { type: 'BREAKER.ADMIT' }>;
        return admit.then ? admit.then.to : admit.replyTo;
      },
      ({ event }) => {
        const admit = event as Extract<BreakerEvent, { type: 'BREAKER.ADMIT' }>;
        const admitted: BreakerReply = { type: 'BREAKER.ADMITTED', requestId: admit.requestId, probe: false };
        return admit.then ? admit.then.event : admitted;
      },
    ),
    /** Let one request through. */
    admit: enqueueActions(({ enqueue }, params: { waiter: BreakerWaiter; probe: boolean }) => {
      const { to, event } = letThrough(params.waiter, params.probe);
      enqueue.sendTo(to, event);
    }),
    /** Open, and the caller can go elsewhere: say so rather than hold it. */
    refuse: sendTo(
      (_, params: { requestId: string; replyTo: AnyActorRef }) => params.replyTo,
      (_, params: { requestId: string; replyTo: AnyActorRef }): BreakerReply => ({ type: 'BREAKER.REFUSED', requestId: params.requestId }),
    ),
    /** Answer a PEEK: is the route open? */
    tell: sendTo(
      (_, params: { replyTo: AnyActorRef; reply: BreakerReply }) => params.replyTo,
      (_, params: { replyTo: AnyActorRef; reply: BreakerReply }) => params.reply,
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
      const { to, event } = letThrough(next, true);
      enqueue.sendTo(to, event);
    }),
    /** Closed again: everyone held goes, in the order they asked. */
    admitAllWaiters: enqueueActions(({ context, enqueue }) => {
      for (const waiter of context.waiters) {
        const { to, event } = letThrough(waiter, false);
        enqueue.sendTo(to, event);
      }
      enqueue.assign({ waiters: [] });
    }),
  },
  guards: {
    verdictIs: ({ event }, params: { verdict: BreakerVerdict }) => event.type === 'BREAKER.REPORT' && event.verdict === params.verdict,
    /** A success with failures counted: it resets them (one with none counted changes nothing, so copies nothing). */
    successResets: ({ context, event }) => event.type === 'BREAKER.REPORT' && event.verdict === 'success' && context.failures > 0,
    refuses: ({ event }) => event.type === 'BREAKER.ADMIT' && event.unlessOpen === true,
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
  // Clear from the start: the pool may let the route's calls through once it hears it.
  entry: { type: 'tellPool', params: { clear: true } },
  initial: 'closed',
  states: {
    closed: {
      on: {
        'BREAKER.ADMIT': { actions: 'passOn' },
        'BREAKER.PEEK': { actions: { type: 'tell', params: ({ event }) => ({ replyTo: event.replyTo, reply: status(event, false) }) } },
        'BREAKER.REPORT': [
          { guard: 'successResets', actions: ['resetFailures', { type: 'tellPool', params: { clear: true } }] },
          { guard: 'failureOpensBreaker', target: 'open', actions: [firstFailureNews, 'countFailure'] },
          { guard: { type: 'verdictIs', params: { verdict: 'failure' } }, actions: [firstFailureNews, 'countFailure'] },
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
        'BREAKER.ADMIT': [
          { guard: 'refuses', actions: { type: 'refuse', params: ({ event }) => ({ requestId: event.requestId, replyTo: event.replyTo }) } },
          { actions: { type: 'holdWaiter', params: ({ event }) => toWaiter(event) } },
        ],
        'BREAKER.PEEK': { actions: { type: 'tell', params: ({ event }) => ({ replyTo: event.replyTo, reply: status(event, true) }) } },
        'BREAKER.WITHDRAW': {
          actions: { type: 'dropWaiter', params: ({ event }) => ({ requestId: event.requestId }) },
        },
        // BREAKER.REPORT: calls let through before the breaker opened; ignored.
      },
    },
    halfOpen: {
      entry: [{ type: 'report', params: ({ context }) => ({ type: 'breaker:halfOpen', route: context.route }) }, 'admitNextProbe'],
      on: {
        // Half-open is not open: one probe goes, the others wait here for its outcome.
        'BREAKER.PEEK': { actions: { type: 'tell', params: ({ event }) => ({ replyTo: event.replyTo, reply: status(event, false) }) } },
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
              { type: 'tellPool', params: { clear: true } },
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
