/**
 * The simulated provider server: Anthropic Messages and OpenAI Chat Completions on 127.0.0.1,
 * faithful enough that the official SDKs work against it. One request goes through, in order:
 * key -> JSON -> validation and directives -> context window -> prompt cache plan -> rate limits
 * -> directive errors and injected faults -> the reply (where `[[sim:replies]]` is counted), paced
 * by the latency options.
 *
 * @example
 * const sim = await startSim({ seed: 1, keys: { 'sk-test': { rpm: 60 } } });
 * const client = new Anthropic({ apiKey: 'sk-test', baseURL: sim.url });
 * // ... later
 * await sim.close();
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { canonicalJson } from '../../machines/canonical.js';
import { anthropic } from './anthropic.js';
import { usageOf, PromptCache, type CachePlan } from './cache.js';
import { derivedId, fingerprint, sha256, unitFloat } from './hash.js';
import type { KeyLimiter, Ticket } from './limits.js';
import { contextError, directiveError, planReply, readDirectives, type Directives } from './model.js';
import { FAULT_ORDER, resolveConfig, type Config } from './config.js';
import { openai } from './openai.js';
import { StatsRecorder } from './stats.js';
import { SimHttpError, type SimFaultKind, type SimLogEntry, type SimOptions, type SimServer, type SimUsage } from './types.js';
import type { WireProtocol } from './wire.js';

const MAX_BODY_BYTES = 32 * 1024 * 1024;
/**
 * The listen queue: connections the kernel completes before the server accepts them (Linux caps
 * it at net.core.somaxconn). Node's default, 511, is the sim's own limit, not a provider's: when
 * thousands of calls open their connections at once while this process is busy, the connections
 * past it lose their SYN and the client retries it 1, 3, 7, 15, 31 s later, which stretched a
 * 3,000-call wave of 1 s calls to tens of seconds.
 */
export const LISTEN_BACKLOG = 65_535;

/** Node's timer resolution: a shorter timeout waits this long. */
const MIN_WAIT_MS = 1;

/** One request in flight. */
interface Exchange {
  protocol: WireProtocol;
  req: IncomingMessage;
  res: ServerResponse;
  entry: SimLogEntry;
  requestId: string;
  limiter?: KeyLimiter;
  ticket?: Ticket;
  closed: boolean;
  /** Ends the current wait early (the client went away). */
  wake?: () => void;
  recorded: boolean;
}

/**
 * Starts a simulator on 127.0.0.1 (port 0: an ephemeral one).
 * @throws TypeError naming the option when an option is out of range.
 */
export async function startSim(options: SimOptions = {}): Promise<SimServer> {
  const config = resolveConfig(options);
  const sim = new Simulator(config, new PromptCache(config.cacheTtlMs, config.now, config.minCacheTokens));
  const server = createServer((req, res) => void sim.handle(req, res));
  server.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: config.port, host: '127.0.0.1', backlog: LISTEN_BACKLOG }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    stats: () => sim.stats.snapshot(),
    resetStats: () => sim.stats.reset(),
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        sim.stop();
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

class Simulator {
  readonly stats = new StatsRecorder();
  /** Request content -> times seen, so a retry of the same request gets a fresh fault draw. */
  private readonly seen = new Map<string, number>();
  /** `[[sim:replies]]` directive text -> requests planned with it so far. */
  private readonly replyCounts = new Map<string, number>();
  private readonly stalls = new Set<NodeJS.Timeout>();
  private requests = 0;
  private readonly faulty: boolean;

  constructor(
    private readonly config: Config,
    private readonly cache: PromptCache,
  ) {
    this.faulty = FAULT_ORDER.some((kind) => config.faults[kind] > 0);
  }

  stop(): void {
    for (const timer of this.stalls) clearTimeout(timer);
    this.stalls.clear();
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://sim').pathname.replace(/\/+$/, '');
    if (req.method === 'GET' && path === '/stats') return json(res, 200, this.stats.snapshot());
    if (req.method === 'GET' && (path === '' || path === '/health')) return json(res, 200, { ok: true });
    const protocol = req.method === 'POST' && path === '/v1/messages' ? anthropic : req.method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions') ? openai : undefined;
    if (!protocol) {
      req.resume();
      return json(res, 404, { error: { type: 'not_found_error', message: `sim: no route ${req.method} ${path}; use POST /v1/messages or POST /v1/chat/completions` } });
    }
    const secret = readKey(req);
    const x: Exchange = {
      protocol,
      req,
      res,
      entry: { at: this.config.now(), key: fingerprint(secret), protocol: protocol.name, model: '', status: 0, stream: false, ...callOf(req) },
      requestId: derivedId('req_sim_', 16, ++this.requests),
      closed: false,
      recorded: false,
    };
    this.stats.arrived();
    if (this.config.keys !== 'any') x.limiter = this.config.keys.get(secret ?? '');
    res.on('close', () => {
      x.closed = true;
      x.wake?.();
    });
    try {
      await this.serve(x, secret);
    } catch (error) {
      if (x.ticket) x.limiter?.settle(x.ticket, 0, false);
      const e = error instanceof SimHttpError ? error : new SimHttpError('api_error', `sim: internal error: ${(error as Error).message}`);
      this.sendError(x, e);
    }
  }

  private async serve(x: Exchange, secret: string | undefined): Promise<void> {
    const raw = await readBody(x.req);
    let body: unknown;
    let badJson = false;
    try {
      body = JSON.parse(raw);
    } catch {
      badJson = true;
    }
    if (body && typeof body === 'object') {
      const b = body as Record<string, unknown>;
      if (typeof b.model === 'string') x.entry.model = b.model;
      x.entry.stream = b.stream === true;
    }
    if (this.config.keys !== 'any' && !x.limiter) {
      throw new SimHttpError('authentication', secret ? 'invalid x-api-key' : 'x-api-key header is required');
    }
    if (badJson) throw new SimHttpError('invalid_request', 'There was an error parsing the body of your request: it is not valid JSON.');

    const request = x.protocol.parse(body);
    if (request.outputSchema) x.entry.outputSchema = request.outputSchema;
    if (request.tools.length > 0) x.entry.tools = request.tools;
    const directives = readDirectives(request);
    if (request.inputTokens > this.config.contextWindow) throw contextError(request, this.config.contextWindow);
    const cachePlan = x.protocol.planCache(this.cache, request);
    if (x.limiter) {
      const admission = x.limiter.admit(request.inputTokens - cachePlan.readTokens, request.maxTokens);
      if (!admission.ok) throw new SimHttpError('rate_limit', admission.message, admission.retryAfterMs, admission.limit === 'requests' ? 'requests' : 'tokens');
      x.ticket = admission.ticket;
    }
    if (cachePlan.read) this.cache.commit([cachePlan.read]);

    const contentKey = sha256(`${x.protocol.name}\u0000${canonicalJson(body)}`);
    const n = this.seen.get(contentKey) ?? 0;
    this.seen.set(contentKey, n + 1);
    const wanted = directives.error;
    if (wanted && (wanted.times === undefined || n < wanted.times)) throw directiveError(wanted.code, request, this.config.contextWindow);

    const fault = this.decideFault(contentKey, n, request.stream);
    if (fault === 'http500') throw Object.assign(new SimHttpError('api_error', 'Internal server error'), { fault });
    if (fault === 'http529') throw Object.assign(new SimHttpError('overloaded', 'Overloaded'), { fault });
    if (fault === 'reset' || fault === 'stall') return this.dropConnection(x, fault);

    const contentHash = sha256(`${x.protocol.name}\u0000${request.model}\u0000${request.units.map((u) => u.text).join('\u0001')}`);
    const reply = planReply(request, this.chooseReply(directives, fault), { seed: this.config.seed, contentHash, toolIdPrefix: x.protocol.toolIdPrefix });
    const usage = usageOf(request.inputTokens, cachePlan, reply.outputTokens, x.protocol.billsCacheWrites);
    const meta = { id: derivedId(x.protocol.messageIdPrefix, 24, 'message', contentHash, this.config.seed, n), model: request.model, created: Math.floor(this.config.now() / 1000) };
    const ttft = this.ttftOf(contentKey, n) + (this.config.prefillMsPer1k * (request.inputTokens - cachePlan.readTokens)) / 1000;
    const msPerToken = 1000 / this.config.tokensPerSecond;

    if (!request.stream) {
      if (!(await this.wait(x, ttft + reply.outputTokens * msPerToken))) return this.aborted(x, 0);
      this.cache.commit(cachePlan.writes);
      x.limiter?.settle(x.ticket!, reply.outputTokens);
      x.entry.status = 200;
      this.record(x, usage, cachePlan);
      x.res.writeHead(200, this.headers(x, 'application/json'));
      x.res.end(JSON.stringify(x.protocol.message(reply, usage, meta)));
      return;
    }

    const plan = x.protocol.stream(reply, usage, meta, request.includeUsage);
    const firstContent = plan.body.findIndex((f) => f.tokens > 0);
    const faultAt = fault === 'streamError' ? Math.min(plan.body.length, Math.max(firstContent + 1, Math.floor(plan.body.length / 2))) : -1;
    // The response begins once the prompt is processed (time to first token): only then is what
    // it writes to the cache readable by other requests, as with the real API.
    if (!(await this.wait(x, ttft))) return this.aborted(x, 0);
    this.cache.commit(cachePlan.writes);
    x.res.writeHead(200, { ...this.headers(x, 'text/event-stream; charset=utf-8'), 'cache-control': 'no-cache' });
    let pending = plan.head;
    let emitted = 0;
    // Time owed to the pacing: a timer below MIN_WAIT_MS waits MIN_WAIT_MS anyway, so frames due
    // sooner are held and go out with the next one (a fast stream costs a timer and a write per
    // millisecond, not per frame, and is no slower than its tokensPerSecond).
    let owed = 0;
    for (let i = 0; i < plan.body.length; i++) {
      if (i === faultAt) break;
      const frame = plan.body[i]!;
      owed += frame.tokens * msPerToken;
      if (owed >= MIN_WAIT_MS) {
        x.res.write(pending);
        pending = '';
        if (!(await this.wait(x, owed))) return this.aborted(x, emitted, usage, cachePlan);
        owed = 0;
      }
      pending += frame.text;
      emitted += frame.tokens;
    }
    x.entry.status = 200;
    if (faultAt >= 0) {
      x.limiter?.settle(x.ticket!, Math.ceil(emitted));
      x.entry.fault = 'streamError';
      this.record(x, usage, cachePlan);
      // OpenAI has no error event: the connection is cut once what was sent has left.
      if (plan.faultFrame === null) x.res.write(pending, () => x.req.socket.destroy());
      else x.res.end(pending + plan.faultFrame);
      return;
    }
    x.limiter?.settle(x.ticket!, reply.outputTokens);
    this.record(x, usage, cachePlan);
    x.res.end(pending + plan.tail);
  }

  /**
   * Resolves `[[sim:replies A || B]]` into a plain reply: the k-th request planned with that
   * directive text (k from 1, across keys and protocols) gets item min(k, n). Only requests that
   * got this far count: 401s, 429s, directive errors and faults decided before the reply do not,
   * and neither does a stream that is planned to fail (streamError), so its retry gets the same item.
   */
  private chooseReply(directives: Directives, fault: SimFaultKind | undefined): Directives {
    const invalid = directives.invalid;
    if (invalid && directives.reply === undefined && !directives.replies) {
      // `[[sim:invalid N]]`, counted like `replies`: the first N answers are not JSON.
      const seen = this.replyCounts.get(invalid.key) ?? 0;
      if (fault !== 'streamError') this.replyCounts.set(invalid.key, seen + 1);
      if (seen < invalid.times) return { ...directives, reply: `Here is the answer (simulated invalid output ${seen + 1} of ${invalid.times}).` };
      return directives;
    }
    const replies = directives.replies;
    if (!replies) return directives;
    const seen = this.replyCounts.get(replies.key) ?? 0;
    if (fault !== 'streamError') this.replyCounts.set(replies.key, seen + 1);
    return { ...directives, reply: replies.items[Math.min(seen, replies.items.length - 1)]! };
  }

  private decideFault(contentKey: string, n: number, stream: boolean): SimFaultKind | undefined {
    // No rates, no draw: the hash is the cost of a call that can never fault.
    if (!this.faulty) return undefined;
    const draw = unitFloat('fault', this.config.seed, contentKey, n);
    let edge = 0;
    for (const kind of FAULT_ORDER) {
      const rate = this.config.faults[kind];
      if (rate <= 0) continue;
      edge += rate;
      if (draw < edge) return kind === 'streamError' && !stream ? undefined : kind;
    }
    return undefined;
  }

  private ttftOf(contentKey: string, n: number): number {
    const ttft = this.config.ttft;
    if (typeof ttft === 'number') return ttft;
    return ttft[0] + unitFloat('ttft', this.config.seed, contentKey, n) * (ttft[1] - ttft[0]);
  }

  /** A reset (the socket is destroyed now) or a stall (destroyed after stallMs, if still open). */
  private dropConnection(x: Exchange, fault: 'reset' | 'stall'): void {
    x.entry.fault = fault;
    this.record(x);
    if (x.ticket) x.limiter?.settle(x.ticket, 0, false);
    const socket = x.req.socket;
    if (fault === 'reset') {
      if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
      else socket.destroy();
      return;
    }
    const timer = setTimeout(() => {
      this.stalls.delete(timer);
      socket.destroy();
    }, this.config.stallMs);
    this.stalls.add(timer);
    x.res.on('close', () => {
      clearTimeout(timer);
      this.stalls.delete(timer);
    });
  }

  /** Waits `ms` of real time; false when the client went away meanwhile. */
  private wait(x: Exchange, ms: number): Promise<boolean> {
    if (x.closed) return Promise.resolve(false);
    if (ms <= 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        x.wake = undefined;
        resolve(!x.closed);
      }, ms);
      x.wake = () => {
        clearTimeout(timer);
        x.wake = undefined;
        resolve(false);
      };
    });
  }

  /** The client went away mid-answer: output not sent is given back, the prompt stays charged. */
  private aborted(x: Exchange, outputTokens: number, usage?: SimUsage, plan?: CachePlan): void {
    if (x.ticket) x.limiter?.settle(x.ticket, Math.ceil(outputTokens));
    x.entry.aborted = true;
    x.entry.status = usage === undefined ? 0 : 200;
    this.record(x, usage, plan);
  }

  private headers(x: Exchange, contentType: string): Record<string, string> {
    const limits = x.limiter && this.config.headers ? x.protocol.rateLimitHeaders(x.limiter.report(), this.config.now()) : {};
    return { 'content-type': contentType, [x.protocol.requestIdHeader]: x.requestId, ...limits };
  }

  private sendError(x: Exchange, error: SimHttpError & { fault?: SimFaultKind }): void {
    const { status, body } = x.protocol.error(error, x.requestId);
    const headers = this.headers(x, 'application/json');
    if (error.retryAfterMs !== undefined && this.config.headers) {
      headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterMs / 1000)));
      x.entry.retryAfterMs = error.retryAfterMs;
    }
    x.entry.status = status;
    if (error.fault) x.entry.fault = error.fault;
    this.record(x);
    if (x.closed || x.res.headersSent) return void x.res.destroy();
    x.res.writeHead(status, headers);
    x.res.end(JSON.stringify(body));
  }

  private record(x: Exchange, usage?: SimUsage, plan?: CachePlan): void {
    if (x.recorded) return;
    x.recorded = true;
    x.entry.endedAt = this.config.now();
    this.stats.record(usage ? { entry: x.entry, usage } : { entry: x.entry }, plan?.writeTokens ?? 0);
  }
}

/** Which task's call this is, when the client says (swarmstate sends `x-swarmstate-call: <task>;<attempt>;<turn>`). */
function callOf(req: IncomingMessage): { call?: string } {
  const header = req.headers['x-swarmstate-call'];
  return typeof header === 'string' && header !== '' ? { call: header.slice(0, 300) } : {};
}

/** The key a client sent: `x-api-key`, else `Authorization: Bearer`. */
function readKey(req: IncomingMessage): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header !== '') return header;
  const auth = req.headers.authorization;
  const match = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth) : null;
  return match?.[1];
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  if (size > MAX_BODY_BYTES) throw new SimHttpError('too_large', `Request exceeds the maximum allowed number of bytes (${MAX_BODY_BYTES}).`);
  return Buffer.concat(chunks).toString('utf8');
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}
