/**
 * Live inspection of a run in the Stately inspector (`swarmstate run --inspect [ws-url]`).
 *
 * Every actor of the run (supervisor, agents, pools, keys, breakers, the tool bus, and the
 * promise actors of model and tool calls) reports its creation, the events it receives and its
 * snapshots; `@statelyai/inspect` turns them into the inspector's messages and this module sends
 * them over one WebSocket to a relay, which forwards them to the inspector in a browser:
 *
 *   node -e "import('@statelyai/inspect/server').then((m) => m.createInspectorServer())"
 *
 * starts that relay on ws://localhost:8080 and opens http://localhost:8080 in the browser: a page
 * that embeds https://stately.ai/inspect and passes it what arrives. Open it before the run: the
 * relay replays only its last 200 messages to a page that connects late.
 *
 * Two things differ from the package's own `createWebSocketInspector`, both for a CLI that must
 * end when its run ends:
 * - the socket is ours (undici's WebSocket): `stop()` sends what is queued, closes and resolves;
 *   the package's adapter reconnects every 5 s forever once a connection fails, even after
 *   `stop()`, which keeps the process alive;
 * - snapshots and events are cut to a bounded size before the package serializes them: the
 *   supervisor's context holds the whole run (a task table with every output), and each of its
 *   thousands of snapshots would otherwise be written out in full.
 */
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { WebSocket } from 'undici';
import type { AnyEventObject, InspectionEvent } from 'xstate';

/** How much of a value is kept: nesting, items per array/object/map, characters per string, values in all. */
export interface BoundLimits {
  depth: number;
  items: number;
  chars: number;
  nodes: number;
}

export const DEFAULT_BOUNDS: Readonly<BoundLimits> = Object.freeze({ depth: 6, items: 25, chars: 400, nodes: 600 });

export interface AttachInspectorOptions {
  /** The relay's WebSocket URL. Default `ws://localhost:8080` (the package's default relay). */
  url?: string;
  /** How much of each context, event and output is sent. Default DEFAULT_BOUNDS. */
  bounds?: Partial<BoundLimits>;
  /** Events queued while the socket connects; past this the oldest are dropped. Default 100 000. */
  maxQueued?: number;
  /** Told once when the relay cannot be reached or the connection drops (the run goes on). */
  onError?: (error: Error) => void;
  /** Told when the connection to the relay is open (with its URL). */
  onConnect?: (url: string) => void;
}

export interface AttachedInspector {
  /** Pass to `createSwarm({ inspect })`. Never throws into the actor system. */
  inspect: (event: InspectionEvent) => void;
  /**
   * Sends what is queued (waiting for a connection still being made), closes it. Resolves within
   * `timeoutMs` (default 5000) in every case; nothing is left running.
   */
  stop(timeoutMs?: number): Promise<void>;
  /** Messages sent, and dropped (no connection, or queue full). */
  readonly stats: { sent: number; dropped: number };
}

/** Kinds of inspection event the Stately inspector shows; the others (microsteps, actions) are not sent. */
const SHOWN = new Set(['@xstate.actor', '@xstate.event', '@xstate.snapshot']);

/**
 * Connects to an inspector relay and returns the `inspect` observer for `createSwarm`.
 *
 * @example
 * const inspector = attachInspector({ url: 'ws://localhost:8080' });
 * const swarm = createSwarm({ inspect: inspector.inspect });
 * await swarm.run(plan).result;
 * await swarm.close();
 * await inspector.stop();
 */
export function attachInspector(opts: AttachInspectorOptions = {}): AttachedInspector {
  const bounds: BoundLimits = { ...DEFAULT_BOUNDS, ...opts.bounds };
  const adapter = new SocketAdapter(opts.url ?? 'ws://localhost:8080', opts.maxQueued ?? 100_000, opts.onError, opts.onConnect);
  // The package runs these hooks on a timer of its own, where a throw would be uncaught: each
  // one falls back to a placeholder instead.
  const inspector = createInspector(adapter, {
    autoStart: false,
    sanitizeContext: (context) => guarded(() => boundedJson(context, bounds) as Record<string, unknown>, {}),
    sanitizeEvent: (event) => guarded(() => boundedEvent(event, bounds), { type: String(event?.type) }),
    // An actor's first snapshot is read by the package itself (actorRef.getSnapshot()): cut it here.
    serialize: (event) =>
      event.type === '@xstate.actor' ? { ...event, snapshot: guarded(() => boundedSnapshot(event.snapshot, bounds), { status: 'active' }) as never } : event,
  });
  inspector.start();
  return {
    inspect(event) {
      if (!SHOWN.has(event.type)) return;
      try {
        // The package serializes a snapshot in full before any hook of ours runs: hand it a
        // bounded copy, taken now (the supervisor's task table changes in place).
        const shown = event.type === '@xstate.snapshot' ? { ...event, snapshot: boundedSnapshot(event.snapshot, bounds) as never } : event;
        inspector.inspect.next?.(shown);
      } catch {
        // Inspection must never take the run down.
      }
    },
    async stop(timeoutMs = 5000) {
      // The package converts each event on a 0 ms timer: let those run before closing.
      await new Promise((resolve) => setTimeout(resolve, 0));
      await adapter.close(timeoutMs);
    },
    get stats() {
      return { sent: adapter.sent, dropped: adapter.dropped };
    },
  };
}

function guarded<T>(make: () => T, fallback: T): T {
  try {
    return make();
  } catch {
    return fallback;
  }
}

/**
 * The package's Adapter over one WebSocket: queue until open, send while open, drop after.
 * No reconnection: a run is short, and a CLI must not hang on a relay that is gone.
 */
class SocketAdapter {
  sent = 0;
  dropped = 0;
  private socket: WebSocket | undefined;
  private state: 'idle' | 'connecting' | 'open' | 'closed' = 'idle';
  private queue: string[] = [];
  private warned = false;
  /** Resolves when the socket has closed. */
  private closed: Promise<void> = Promise.resolve();
  /** Resolves when the socket has opened or failed to. */
  private settled: Promise<void> = Promise.resolve();

  constructor(
    private readonly url: string,
    private readonly maxQueued: number,
    private readonly onError: ((error: Error) => void) | undefined,
    private readonly onConnect?: (url: string) => void,
  ) {}

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'connecting';
    let socket: WebSocket;
    try {
      socket = new WebSocket(this.url);
    } catch (error) {
      this.fail(error);
      return;
    }
    this.socket = socket;
    this.closed = new Promise((resolve) => socket.addEventListener('close', () => resolve(), { once: true }));
    this.settled = new Promise((resolve) => {
      socket.addEventListener('open', () => resolve(), { once: true });
      socket.addEventListener('close', () => resolve(), { once: true });
    });
    socket.addEventListener('open', () => {
      if (this.state !== 'connecting') return;
      this.state = 'open';
      try {
        this.onConnect?.(this.url);
      } catch {
        // A listener's failure is not the connection's.
      }
      for (const message of this.queue) this.write(message);
      this.queue = [];
    });
    socket.addEventListener('error', (event) => this.fail((event as { error?: unknown }).error ?? new Error('connection failed')));
    socket.addEventListener('close', () => {
      if (this.state === 'open' || this.state === 'connecting') this.fail(new Error('the relay closed the connection'));
    });
  }

  stop(): void {
    // The package's stop(); ours is close(), which waits.
    void this.close(0);
  }

  send(event: StatelyInspectionEvent): void {
    let message: string;
    try {
      message = JSON.stringify(event);
    } catch {
      this.dropped++;
      return;
    }
    if (this.state === 'open') this.write(message);
    else if (this.state === 'connecting') {
      this.queue.push(message);
      if (this.queue.length > this.maxQueued) {
        this.queue.shift();
        this.dropped++;
      }
    } else this.dropped++;
  }

  /**
   * Flushes and closes: a socket still connecting gets until `timeoutMs` to open (a short run can
   * end before it does) and then sends its queue. Resolves when the socket has closed, or at the
   * deadline in every case.
   */
  async close(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    try {
      if (this.state === 'connecting') await Promise.race([this.settled, deadline]);
      if (this.state === 'connecting') this.dropped += this.queue.length;
      this.queue = [];
      this.state = 'closed';
      if (!this.socket || this.socket.readyState === WebSocket.CLOSED) return;
      // What was sent goes out before the close frame.
      this.socket.close(1000, 'run ended');
      await Promise.race([this.closed, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  private write(message: string): void {
    try {
      this.socket!.send(message);
      this.sent++;
    } catch {
      this.dropped++;
    }
  }

  private fail(error: unknown): void {
    if (this.state === 'closed') return;
    this.dropped += this.queue.length;
    this.queue = [];
    this.state = 'closed';
    if (this.warned) return;
    this.warned = true;
    // undici's WebSocket error events often carry an empty message: say what failed instead.
    const reason = (error instanceof Error ? error.message : String(error)) || 'nothing listens there';
    try {
      this.onError?.(new Error(`inspector: no connection to ${this.url} (${reason}); the run goes on without inspection`));
    } catch {
      // A listener that throws must not take the run down with it.
    }
  }
}

/** A snapshot as the inspector reads it: status, value, context, children's ids, output or error. */
export function boundedSnapshot(snapshot: unknown, bounds: BoundLimits = DEFAULT_BOUNDS): Record<string, unknown> {
  if (typeof snapshot !== 'object' || snapshot === null) return { status: 'active' };
  const s = snapshot as Record<string, unknown>;
  const out: Record<string, unknown> = { status: s.status ?? 'active' };
  if (s.value !== undefined) out.value = boundedJson(s.value, bounds);
  if (s.context !== undefined) out.context = boundedJson(s.context, bounds);
  if (s.children && typeof s.children === 'object') out.children = boundedJson(Object.keys(s.children), bounds);
  for (const field of ['output', 'error', 'input'] as const) {
    if (s[field] !== undefined) out[field] = boundedJson(s[field], bounds);
  }
  return out;
}

/** An event cut to size; its `type` always kept. */
function boundedEvent(event: AnyEventObject, bounds: BoundLimits): AnyEventObject {
  const out = boundedJson(event, bounds);
  return out && typeof out === 'object' && !Array.isArray(out) ? { ...(out as object), type: String(event.type) } : { type: String(event.type) };
}

/**
 * A JSON-safe copy of any value, never larger than `bounds`: `toJSON` honoured (and a throwing
 * one reported, not thrown), Maps and Sets as objects and arrays, cycles and functions named,
 * long strings, arrays and objects cut with a note of how much was left out.
 *
 * @example
 * boundedJson({ big: 'x'.repeat(1000), list: Array(100).fill(1) }, { depth: 4, items: 2, chars: 5, nodes: 100 })
 * // { big: 'xxxxx… (+995 chars)', list: [1, 1, '… (+98 items)'] }
 */
export function boundedJson(value: unknown, bounds: BoundLimits = DEFAULT_BOUNDS): unknown {
  let budget = bounds.nodes;
  const path = new Set<object>();

  const walk = (v: unknown, depth: number, key: string): unknown => {
    if (budget-- <= 0) return '…';
    if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function' && !(v instanceof Date)) {
      try {
        v = (v as { toJSON: (key: string) => unknown }).toJSON(key);
      } catch (error) {
        return `[unserializable: ${error instanceof Error ? error.message : String(error)}]`;
      }
    }
    switch (typeof v) {
      case 'string':
        return v.length > bounds.chars ? `${v.slice(0, bounds.chars)}… (+${v.length - bounds.chars} chars)` : v;
      case 'number':
        return Number.isFinite(v) ? v : null;
      case 'boolean':
        return v;
      case 'bigint':
        return v.toString();
      case 'function':
        return `[function ${v.name || 'anonymous'}]`;
      case 'symbol':
        return v.toString();
      case 'undefined':
        return undefined;
    }
    if (v === null) return null;
    const obj = v as object;
    if (obj instanceof Date) return Number.isNaN(obj.getTime()) ? null : obj.toISOString();
    if (obj instanceof Error) return { name: obj.name, message: walk(obj.message, depth + 1, 'message'), ...('code' in obj ? { code: String(obj.code) } : {}) };
    if (path.has(obj)) return '[circular]';
    if (depth >= bounds.depth) return Array.isArray(obj) ? `[array of ${obj.length}]` : `[${obj.constructor?.name ?? 'object'}]`;
    path.add(obj);
    try {
      if (Array.isArray(obj) || obj instanceof Set) {
        const items = Array.isArray(obj) ? obj : [...obj];
        const out = items.slice(0, bounds.items).map((item, i) => walk(item, depth + 1, String(i)) ?? null);
        if (items.length > bounds.items) out.push(`… (+${items.length - bounds.items} items)`);
        return out;
      }
      const entries: [string, unknown][] = obj instanceof Map ? [...obj.entries()].map(([k, x]) => [String(k), x]) : Object.entries(obj);
      const out: Record<string, unknown> = {};
      for (const [k, x] of entries.slice(0, bounds.items)) {
        const w = walk(x, depth + 1, k);
        if (w !== undefined) out[k] = w;
      }
      if (entries.length > bounds.items) out['…'] = `+${entries.length - bounds.items} entries`;
      return out;
    } finally {
      path.delete(obj);
    }
  };
  return walk(value, 0, '');
}
