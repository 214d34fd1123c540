/**
 * The HTTP transport of the provider adapters: one undici `Pool` per origin, kept alive and
 * shared by every call of one provider, closed by `close()`. Requests carry headers and body
 * timeouts and the call's AbortSignal; aborting cancels the request and closes its connection.
 *
 * `exchange` is the frame of one model call that both adapters share: send, turn a non-2xx
 * answer into a classified ProviderError, let the adapter read a 2xx one, and make sure that
 * whatever escapes is a ProviderError with the call's facts and without the key.
 */
import type { Dispatcher, Pool } from 'undici';
import type { RateLimitHint } from '../../machines/protocol.js';
import { type CallFacts, classifyHttpError, classifyTransportError, redactSecret, scrubbed } from './classify.js';
import { rateLimitOf } from './ratelimit.js';

export interface HttpClientOptions {
  /** Max wait for the response headers, in ms. Default 60 000. */
  headersTimeoutMs?: number | undefined;
  /** Max silence between two body chunks, in ms (a streaming server's pings reset it). Default 120 000. */
  bodyTimeoutMs?: number | undefined;
  /** Connections per origin; undefined = no limit (the key leases bound concurrency). */
  connections?: number;
}

export interface HttpRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  signal?: AbortSignal;
}

export interface HttpResponse {
  status: number;
  /** Lower-case names, as undici gives them. */
  headers: Record<string, string | string[] | undefined>;
  /** The body as a byte stream. */
  body: AsyncIterable<Uint8Array>;
  /** The whole body as text, at most `limit` bytes (the rest is dropped with the connection). */
  text(limit?: number): Promise<string>;
  /** The same, saying whether that was the whole body (false: it was cut at `limit`). */
  readText(limit: number): Promise<{ text: string; complete: boolean }>;
  /** Drops the body and its connection (after a failure, when the rest is of no use). */
  destroy(): void;
}

/** Error bodies are only read for their message: never buffer more than this. */
export const ERROR_BODY_LIMIT = 64 * 1024;
/** Successful plain (non-streamed) bodies: generous, but bounded. replyLimits.ts bounds streams. */
export const JSON_BODY_LIMIT = 16 * 1024 * 1024;

/** URLs whose parse a client keeps (adapters post to a fixed URL or two; a caller varying them only costs parses). */
const MAX_TARGETS = 64;

/** Thrown by `post` after `close()`. */
export class HttpClientClosedError extends Error {
  override readonly name = 'HttpClientClosedError';
  readonly code = 'SWARM_HTTP_CLOSED';
  constructor() {
    super('the provider was closed: no more calls can be made with it');
  }
}

/**
 * undici, loaded when the first client is made (not on `import 'swarmstate'`: a quarter of a
 * second most imports need not pay), so it is there by the first request.
 */
let undici: Promise<typeof import('undici')> | undefined;
/** undici once loaded: a call then dispatches at once, with no promise of its own to wait for. */
let undiciLoaded: typeof import('undici') | undefined;

/** Starts loading undici now: for a process that will make calls later (a worker), sooner is better. */
export function preloadHttp(): Promise<typeof import('undici')> {
  return (undici ??= import('undici').then((module) => (undiciLoaded = module)));
}

/**
 * A keep-alive HTTP client for one provider.
 *
 * @example
 * const http = new HttpClient({ headersTimeoutMs: 30_000 }); // bodyTimeoutMs: the default 120 000
 * const res = await http.post({ url, headers, body: JSON.stringify(payload), signal });
 * await http.close();
 */
export class HttpClient {
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, { origin: string; path: string }>();
  private closed = false;

  readonly options: Required<Pick<HttpClientOptions, 'headersTimeoutMs' | 'bodyTimeoutMs'>> & HttpClientOptions;

  constructor(options: HttpClientOptions = {}) {
    // The defaults of every adapter, in one place.
    this.options = { ...options, headersTimeoutMs: options.headersTimeoutMs ?? 60_000, bodyTimeoutMs: options.bodyTimeoutMs ?? 120_000 };
    void preloadHttp().catch(() => {}); // a failed load is the first request's error
  }

  post(request: HttpRequest): Promise<HttpResponse> {
    if (this.closed) return Promise.reject(new HttpClientClosedError());
    // Only the first calls wait for the module; after that the request leaves in this tick.
    if (!undiciLoaded) return preloadHttp().then(() => this.post(request));
    let target: { origin: string; path: string };
    try {
      target = this.target(request.url);
    } catch (error) {
      return Promise.reject(error);
    }
    const { origin, path } = target;
    const pool = this.poolFor(origin, undiciLoaded);
    const send = () =>
      pool.request({
        method: 'POST',
        path,
        headers: request.headers,
        body: request.body,
        signal: request.signal ?? null,
        headersTimeout: this.options.headersTimeoutMs,
        bodyTimeout: this.options.bodyTimeoutMs,
      });
    return send().then(wrap, (error: unknown) => {
      if (!closedWhileIdle(error) || request.signal?.aborted || this.closed) throw error;
      // Once, on a fresh connection: the request met a kept-alive connection the server had
      // already closed, so it was not answered (see closedWhileIdle).
      return send().then(wrap);
    });
  }

  /** An adapter posts to one URL or two: parsed once each, not once a call. */
  private target(url: string): { origin: string; path: string } {
    let target = this.targets.get(url);
    if (!target) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: parsed.pathname + parsed.search };
      if (this.targets.size >= MAX_TARGETS) this.targets.clear();
      this.targets.set(url, target);
    }
    return target;
  }

  /** Closes every pool: lets calls in flight finish, then frees the sockets. */
  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.close()));
  }

  private poolFor(origin: string, { Pool: PoolClass, buildConnector }: typeof import('undici')): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      const connect = buildConnector({});
      pool = new PoolClass(origin, {
        // Marks a socket's error once the socket has carried an answer (closedWhileIdle).
        connect: (options, callback) =>
          connect(options, (error, socket) => {
            socket?.prependListener('error', (e: Error & { [AFTER_ANSWERS]?: boolean }) => {
              if (socket.bytesRead > 0) e[AFTER_ANSWERS] = true;
            });
            (callback as (error: Error | null, socket: unknown) => void)(error, socket);
          }),
        connections: this.options.connections ?? null,
        headersTimeout: this.options.headersTimeoutMs,
        bodyTimeout: this.options.bodyTimeoutMs,
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }
}

/**
 * A request sent on a kept-alive connection that the server closed while it was idle: the close
 * (a server's keep-alive timeout, Node's 5 s) crossed the request, or reached a client whose event
 * loop was too busy to retire the connection first. undici says `other side closed` before any
 * response, on a socket that had carried earlier answers (bytesRead > 0; a fresh connection
 * closed unanswered is the server's doing and is not retried here). Sent again at once on a new
 * connection, as browsers do: otherwise hundreds of calls that met such connections together
 * failed as one burst, which opened the route's breaker for its cooldown (10 s).
 */
function closedWhileIdle(error: unknown): boolean {
  const e = error as { code?: unknown; socket?: { bytesRead?: unknown }; [AFTER_ANSWERS]?: boolean } | null;
  if (e?.code === 'UND_ERR_SOCKET') return typeof e.socket?.bytesRead === 'number' && e.socket.bytesRead > 0;
  // The same race when the request reached the closed socket first: the server's RST.
  return e?.code === 'ECONNRESET' && e[AFTER_ANSWERS] === true;
}

/** Set by the pool's connector on a socket error once that socket had read earlier answers. */
const AFTER_ANSWERS = Symbol('swarmstate.afterAnswers');

function wrap(response: Dispatcher.ResponseData): HttpResponse {
  const body = response.body;
  return {
    status: response.statusCode,
    headers: response.headers,
    body,
    async text(limit = ERROR_BODY_LIMIT) {
      return (await this.readText(limit)).text;
    },
    async readText(limit) {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of body) {
        const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
        if (size + buf.length > limit) {
          chunks.push(buf.subarray(0, limit - size));
          // Leaving the loop destroys the body.
          return { text: Buffer.concat(chunks).toString('utf8'), complete: false };
        }
        chunks.push(buf);
        size += buf.length;
      }
      return { text: Buffer.concat(chunks).toString('utf8'), complete: true };
    },
    destroy() {
      if (!body.destroyed) body.destroy();
    },
  };
}

/** One model call as `exchange` sends it. */
export interface Exchange extends CallFacts {
  url: string;
  headers: Record<string, string>;
  body: unknown;
  signal: AbortSignal;
  /** The key: scrubbed from every error message, whatever the server echoed. */
  secret: string;
  /** The clock that reads reset times (RFC 3339, HTTP-date) as durations. Default Date.now. */
  now?: () => number;
}

/**
 * Sends one call and reads its answer with `read` (given only 2xx responses and their rate-limit
 * headers). Everything thrown comes out as a ProviderError with the call's facts, the key's
 * secret scrubbed from it, and the error response's rate-limit headers attached.
 */
export async function exchange<T>(
  http: HttpClient,
  call: Exchange,
  read: (response: HttpResponse, rateLimit: RateLimitHint | undefined) => Promise<T>,
): Promise<T> {
  const facts: CallFacts = { provider: call.provider, model: call.model, keyId: call.keyId };
  let response: HttpResponse | undefined;
  try {
    response = await http.post({ url: call.url, headers: call.headers, body: JSON.stringify(call.body), signal: call.signal });
    const now = call.now?.() ?? Date.now();
    const rateLimit = rateLimitOf(response.headers, now);
    if (response.status < 200 || response.status >= 300) {
      const text = redactSecret(await response.text(ERROR_BODY_LIMIT), call.secret);
      throw classifyHttpError({ ...facts, status: response.status, body: text, headers: response.headers, now, url: call.url });
    }
    return await read(response, rateLimit);
  } catch (error) {
    response?.destroy();
    const { headersTimeoutMs, bodyTimeoutMs } = http.options;
    throw scrubbed(classifyTransportError(error, { ...facts, signal: call.signal, headersTimeoutMs, bodyTimeoutMs }), call.secret);
  }
}
