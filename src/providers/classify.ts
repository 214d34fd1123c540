/**
 * Wire failures -> ProviderError with one of the error classes of machines/protocol.ts. Every
 * message names the provider, the model, the key id (never the key), the status and the server's
 * own message, and says what happens next.
 *
 * | wire                                                           | code             | retried |
 * |----------------------------------------------------------------|------------------|---------|
 * | 429 with code insufficient_quota or naming a spend limit or    | spend_cap        | no      |
 * |   credit balance, whatever its headers (Retry-After included)  |                  |         |
 * | 429 with Retry-After, or code rate_limit_exceeded              | rate_limited     | yes     |
 * | 429 without Retry-After naming a spend/billing/quota limit;    | spend_cap        | no      |
 * |   402; 400 naming a spend limit or credit balance              |                  |         |
 * | other 429                                                      | rate_limited     | yes     |
 * | 401, 403                                                       | auth (revoked)   | other key |
 * | 408, headers/body/connect timeouts                             | timeout          | yes     |
 * | 529                                                            | overloaded       | yes     |
 * | 500, 502, 503, 504 and any other 5xx                           | server_error     | yes     |
 * | 3xx (a redirect: not followed; the message names its Location)  | bad_request      | no      |
 * | 400/413/422 saying the prompt exceeds the context window       | context_overflow | no (compact) |
 * | other 4xx                                                      | bad_request      | no      |
 * | ECONNRESET, UND_ERR_SOCKET, refused, truncated stream          | network          | yes     |
 *
 * A failure of the connection itself, before any byte of the request left (a system error of
 * `connect` or `getaddrinfo`: refused, no such host, unreachable, a connect timeout; undici's
 * UND_ERR_CONNECT_TIMEOUT) is marked `unsent`: the call was not billed. Any other `timeout` or
 * `network` may have reached the server (docs/architecture.md, Budgets).
 * | the call's AbortSignal fired                                   | cancelled        | no      |
 *
 * Extending spend_cap beyond 429 is deliberate: Anthropic reports a reached workspace spend
 * limit or a too-low credit balance as 400 invalid_request_error, and retrying those only burns
 * attempts.
 */
import type { ErrorCode, RateLimitHint } from '../../machines/protocol.js';
import { RETRIED_WITH_BACKOFF } from '../../machines/errors.js';
import { ProviderError, thrownMessage } from './errors.js';
import { shownUrl } from '../tools/urls.js';
import { type HeaderSource, headerOf, parseDuration, parseRetryAfter, rateLimitOf } from './ratelimit.js';

/** Who made the call: every error names them. */
export interface CallFacts {
  provider: string;
  model: string;
  keyId: string;
}

export interface HttpErrorInput extends CallFacts {
  status: number;
  /** The response body as text (already redacted by the adapter). */
  body: string;
  headers?: HeaderSource;
  /** For HTTP-date Retry-After and RFC 3339 resets; default Date.now(). */
  now?: number;
  /** Where the request went: a redirect's relative Location is read against it, and the message names it. */
  url?: string;
}

/** The error a server put in its body, in either dialect (or a compatible server's variant). */
export interface ServerError {
  /** Anthropic `error.type`, OpenAI `error.type`. */
  type?: string;
  /** OpenAI `error.code`; Anthropic `error.details.error_code`. */
  code?: string;
  message: string;
  requestId?: string;
}

const SPEND = /insufficient_quota|enforced_spend_limit|spend(ing)? limit|billing|credit balance|exceeded your (current )?quota|api usage limits|out of extra usage/i;
/**
 * The spend wording that stays a spend cap even beside a Retry-After: OpenAI's `insufficient_quota`
 * code and Anthropic's spend-limit and credit wording (a 429 rate_limit_error "would exceed your
 * account's monthly spend limit", often with a Retry-After of hours). Not the looser words of
 * SPEND: an OpenAI rate limit's message may point at the billing page, and Gemini's per-minute
 * 429 says "You exceeded your current quota" with a retry delay; both do end.
 */
const SPEND_WHATEVER_HEADERS = /insufficient_quota|enforced_spend_limit|spend(ing)? limit|credit balance|api usage limits|out of extra usage/i;
const CONTEXT = /prompt is too long|context_length_exceeded|maximum context length|context window|context limit/i;
const ANTHROPIC_TYPE_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
  // OpenAI's stream errors use these.
  server_error: 500,
  rate_limit_exceeded: 429,
  insufficient_quota: 429,
};
const MAX_SERVER_MESSAGE = 500;

/** Replaces every occurrence of the secret (raw or JSON-escaped) with `[redacted]`. */
export function redactSecret(text: string, secret: string | undefined): string {
  if (!secret || secret.length < 4) return text;
  let out = text.split(secret).join('[redacted]');
  const escaped = JSON.stringify(secret).slice(1, -1);
  if (escaped !== secret) out = out.split(escaped).join('[redacted]');
  return out;
}

/** Reads the error out of a response body; falls back to the (shortened) raw text. */
export function serverErrorOf(body: string): ServerError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    const text = body.trim().replace(/\s+/g, ' ');
    return { message: text === '' ? '(empty body)' : clip(text) };
  }
  const root = (parsed ?? {}) as Record<string, unknown>;
  const err = root.error;
  const out: ServerError = { message: '' };
  if (typeof root.request_id === 'string') out.requestId = root.request_id;
  if (err && typeof err === 'object') {
    const e = err as Record<string, unknown>;
    if (typeof e.type === 'string') out.type = e.type;
    if (typeof e.code === 'string') out.code = e.code;
    const details = e.details as Record<string, unknown> | undefined;
    if (out.code === undefined && details && typeof details.error_code === 'string') out.code = details.error_code;
    if (typeof e.message === 'string') out.message = clip(e.message);
  } else if (typeof err === 'string') {
    out.message = clip(err);
  }
  if (out.message === '') {
    for (const field of ['message', 'detail']) {
      if (typeof root[field] === 'string') {
        out.message = clip(root[field] as string);
        break;
      }
    }
  }
  if (out.message === '') out.message = clip(body.trim());
  return out;
}

/**
 * An error response -> ProviderError.
 *
 * @example
 * classifyHttpError({ status: 401, body, headers, provider: 'anthropic', model: 'claude-x', keyId: 'anthropic:ab12' })
 * // ProviderError { code: 'auth', message: 'anthropic/claude-x, key anthropic:ab12: HTTP 401 ...' }
 */
export function classifyHttpError(input: HttpErrorInput): ProviderError {
  if (input.status >= 300 && input.status < 400) return redirectError(input);
  const now = input.now ?? Date.now();
  const server = serverErrorOf(input.body);
  const requestId = server.requestId ?? headerOf(input.headers, 'request-id') ?? headerOf(input.headers, 'x-request-id');
  if (requestId !== undefined) server.requestId = requestId;
  const headerRetryAfter = parseRetryAfter(input.headers, now);
  return build(input, input.status, server, headerRetryAfter, rateLimitOf(input.headers, now));
}

/**
 * An `error` the server sent inside a stream that had started with HTTP 200 (Anthropic's
 * `event: error`, an OpenAI chunk with an `error` field). Its type stands in for the status.
 */
export function classifyStreamError(input: CallFacts & { data: string; rateLimit?: RateLimitHint }): ProviderError {
  const server = serverErrorOf(input.data);
  const status = ANTHROPIC_TYPE_STATUS[server.type ?? ''] ?? ANTHROPIC_TYPE_STATUS[server.code ?? ''];
  return build(input, status, server, undefined, input.rateLimit, true);
}

function build(
  facts: CallFacts,
  status: number | undefined,
  server: ServerError,
  headerRetryAfter: number | undefined,
  rateLimit: RateLimitHint | undefined,
  inStream = false,
): ProviderError {
  const code = codeFor(status, server, headerRetryAfter !== undefined);
  let retryAfterMs = headerRetryAfter;
  if (retryAfterMs === undefined && code === 'rate_limited') retryAfterMs = retryAfterInMessage(server.message);
  const where = inStream ? `error event after HTTP 200${status ? ` (as ${status})` : ''}` : `HTTP ${status}`;
  const kind = server.type ?? server.code;
  const said = `${where}${kind ? ` ${kind}` : ''}: ${server.message}`;
  const request = server.requestId ? ` [request ${server.requestId}]` : '';
  const message = `${facts.provider}/${facts.model}, key ${facts.keyId}: ${said}${request}. ${advice(code, facts, status, retryAfterMs)}`;
  return new ProviderError(code, message, {
    provider: facts.provider,
    model: facts.model,
    keyId: facts.keyId,
    ...(status !== undefined && !inStream ? { status } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    ...(rateLimit ? { rateLimit } : {}),
  });
}

function codeFor(status: number | undefined, server: ServerError, hasRetryAfter: boolean): ErrorCode {
  const text = `${server.type ?? ''} ${server.code ?? ''} ${server.message}`;
  const clientSide = status === undefined || status === 400 || status === 413 || status === 422;
  if (clientSide && (server.code === 'context_length_exceeded' || CONTEXT.test(server.message))) return 'context_overflow';
  switch (status) {
    case 429:
      if (server.code === 'rate_limit_exceeded') return 'rate_limited';
      if (SPEND_WHATEVER_HEADERS.test(text)) return 'spend_cap';
      if (hasRetryAfter) return 'rate_limited';
      return SPEND.test(text) ? 'spend_cap' : 'rate_limited';
    case 402:
      return 'spend_cap';
    case 400:
      return SPEND.test(server.message) || server.code === 'insufficient_quota' ? 'spend_cap' : 'bad_request';
    case 401:
    case 403:
      return 'auth';
    case 408:
      return 'timeout';
    case 529:
      return 'overloaded';
    case undefined:
      return 'server_error';
    default:
      if (status >= 500) return 'server_error';
      return 'bad_request';
  }
}

/**
 * A 3xx: the adapters do not follow redirects (a POST with a key in its headers is not sent on to
 * wherever a server points), so the call cannot succeed as configured. The Location is shown
 * without its user, password or query values; the adapter scrubs the key from the rest.
 */
function redirectError(input: HttpErrorInput): ProviderError {
  const location = headerOf(input.headers, 'location');
  const target = location === undefined ? undefined : shownUrl(resolvedUrl(location, input.url));
  const where = target === undefined ? ' (no Location header)' : ` to ${clip(target)}`;
  const went = input.url === undefined ? '' : ` (this request went to ${clip(shownUrl(input.url))})`;
  const message =
    `${input.provider}/${input.model}, key ${input.keyId}: HTTP ${input.status} redirect${where}: swarmstate does not follow redirects. ` +
    `Check the provider's baseURL${went}: point it at the address the redirect names (https rather than http, another host or path); this is not retried.`;
  return new ProviderError('bad_request', message, { provider: input.provider, model: input.model, keyId: input.keyId, status: input.status });
}

/** A Location read against the request's URL (it may be relative); as it came when it cannot be. */
function resolvedUrl(location: string, base: string | undefined): string {
  try {
    return new URL(location, base).toString();
  } catch {
    return location;
  }
}

/** OpenAI says "Please try again in 6.5s" when it sends no Retry-After. */
function retryAfterInMessage(message: string): number | undefined {
  const match = /try again in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)/i.exec(message);
  return match ? parseDuration(match[1]!) : undefined;
}

function advice(code: ErrorCode, facts: CallFacts, status: number | undefined, retryAfterMs: number | undefined): string {
  const wait = retryAfterMs !== undefined ? ` (the server asks to wait ${seconds(retryAfterMs)})` : '';
  switch (code) {
    case 'rate_limited':
      return `The key ${facts.keyId} is rate-limited${wait}: it backs off and other keys take the calls.`;
    case 'spend_cap':
      return `The account behind key ${facts.keyId} reached a spend, billing or quota limit: raise the limit or add credits; this is not retried.`;
    case 'auth':
      return `The key ${facts.keyId} was rejected (${status ?? 'auth error'}): it will not be used again in this run.`;
    case 'overloaded':
      return `The provider is overloaded${wait}: ${RETRIED_WITH_BACKOFF}.`;
    case 'server_error':
      return `The provider failed${wait}: ${RETRIED_WITH_BACKOFF}; repeated failures open the route's breaker.`;
    case 'timeout':
      return `The server timed out the request${wait}: ${RETRIED_WITH_BACKOFF}.`;
    case 'context_overflow':
      return `The conversation exceeds the context window of ${facts.model}: compact it or pick a model with a larger window.`;
    default:
      if (status === 404) return `Check the model id "${facts.model}" and the provider's base URL; this is not retried.`;
      if (status === 413) return 'The request is larger than the API accepts; this is not retried.';
      return 'The request was rejected as invalid; this is not retried (check the model and the request).';
  }
}

/** The code of http.ts's HttpClientClosedError (named here to keep the import one-way). */
const CLOSED_CODE = 'SWARM_HTTP_CLOSED';
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const NETWORK_CODES = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'ENOTFOUND', 'EAI_AGAIN',
  'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'UND_ERR_ABORTED',
  'ERR_STREAM_PREMATURE_CLOSE', 'UND_ERR_PRX_TLS',
]);

/** The system calls whose failure means no connection was made, so nothing of the request was sent. */
const CONNECT_SYSCALLS = new Set(['connect', 'getaddrinfo']);

/** The first `code` in an error's cause chain that we know, with its message and whether the request was ever sent. */
function transportCode(error: unknown): { code: string; message: string; unsent: boolean } | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 5 && e && typeof e === 'object'; depth++) {
    const code = (e as { code?: unknown }).code;
    const message = (e as { message?: unknown }).message;
    if (typeof code === 'string' && (TIMEOUT_CODES.has(code) || NETWORK_CODES.has(code) || code.startsWith('HPE_'))) {
      const syscall = (e as { syscall?: unknown }).syscall;
      const unsent = code === 'UND_ERR_CONNECT_TIMEOUT' || (typeof syscall === 'string' && CONNECT_SYSCALLS.has(syscall));
      return { code, message: typeof message === 'string' ? message : code, unsent };
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * A thrown error -> ProviderError: the call's own abort is `cancelled` (whatever undici threw for
 * it), a ProviderError passes through, timeouts are `timeout`, socket failures `network`;
 * anything else is `internal` (a bug, not bad luck: not retried).
 */
export function classifyTransportError(
  error: unknown,
  facts: CallFacts & { signal?: AbortSignal; headersTimeoutMs?: number; bodyTimeoutMs?: number },
): ProviderError {
  const who = `${facts.provider}/${facts.model}, key ${facts.keyId}`;
  const base = { provider: facts.provider, model: facts.model, keyId: facts.keyId };
  // The call's own abort wins over whatever it caused (a destroyed body, a cut stream).
  if (facts.signal?.aborted) {
    return new ProviderError('cancelled', `${who}: the call was cancelled (its signal was aborted); not retried.`, { ...base, retryable: false });
  }
  if (error instanceof ProviderError) return error;
  if ((error as { code?: unknown } | null)?.code === CLOSED_CODE) {
    return new ProviderError('internal', `${who}: ${(error as Error).message}.`, { ...base, retryable: false });
  }
  const found = transportCode(error);
  const sent = found?.unsent ? { ...base, unsent: true } : base;
  if (found && TIMEOUT_CODES.has(found.code)) {
    const what =
      found.code === 'UND_ERR_HEADERS_TIMEOUT'
        ? `no response headers within ${facts.headersTimeoutMs ?? '?'} ms`
        : found.code === 'UND_ERR_BODY_TIMEOUT'
          ? `the response stalled for more than ${facts.bodyTimeoutMs ?? '?'} ms`
          : 'the connection timed out';
    return new ProviderError('timeout', `${who}: ${what} (${found.code}): ${RETRIED_WITH_BACKOFF}.`, sent);
  }
  if (found) {
    const hint = found.code === 'ENOTFOUND' || found.code === 'ECONNREFUSED' ? ' (check the base URL)' : '';
    return new ProviderError('network', `${who}: the connection failed (${found.code}: ${found.message})${hint}: ${RETRIED_WITH_BACKOFF}.`, sent);
  }
  return new ProviderError('internal', `${who}: the provider adapter failed: ${thrownMessage(error)}`, { ...base, retryable: false });
}

/** A stream that ended before its final event: the response is incomplete. */
export function truncatedStream(facts: CallFacts, missing: string, rateLimit?: RateLimitHint): ProviderError {
  return new ProviderError(
    'network',
    `${facts.provider}/${facts.model}, key ${facts.keyId}: the stream ended before ${missing} (truncated response): ${RETRIED_WITH_BACKOFF}.`,
    { provider: facts.provider, model: facts.model, keyId: facts.keyId, ...(rateLimit ? { rateLimit } : {}) },
  );
}

/** A response the adapter cannot read (not JSON, or not the documented shape). */
export function malformedResponse(facts: CallFacts, what: string, rateLimit?: RateLimitHint): ProviderError {
  return new ProviderError(
    'server_error',
    `${facts.provider}/${facts.model}, key ${facts.keyId}: malformed response: ${clip(what)}: ${RETRIED_WITH_BACKOFF}.`,
    { provider: facts.provider, model: facts.model, keyId: facts.keyId, ...(rateLimit ? { rateLimit } : {}) },
  );
}

/** The same error with the secret scrubbed from its message: the adapters' last line of defence. */
export function scrubbed(error: ProviderError, secret: string): ProviderError {
  const message = redactSecret(error.message, secret);
  if (message === error.message) return error;
  return new ProviderError(error.code, message, { ...error.toJSON() });
}

function clip(text: string): string {
  return text.length > MAX_SERVER_MESSAGE ? `${text.slice(0, MAX_SERVER_MESSAGE)}…` : text;
}

function seconds(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 100) / 10} s`;
}

/**
 * A tool call's arguments as the model streamed them (a JSON text) -> its input. Empty means `{}`.
 * Invalid JSON is a malformed response (retried), unless the reply was cut by max_tokens: then the
 * call is unfinished rather than wrong, and `undefined` tells the adapter to drop it (the agent
 * sees stopReason max_tokens).
 */
export function toolInputOf(json: string, tool: string, cutByMaxTokens: boolean, facts: CallFacts, rateLimit?: RateLimitHint): unknown {
  if (json.trim() === '') return {};
  try {
    return JSON.parse(json);
  } catch {
    if (cutByMaxTokens) return undefined;
    throw malformedResponse(facts, `the arguments of tool call "${tool}" are not valid JSON`, rateLimit);
  }
}

/** A JSON object's fields, or undefined when the text is not JSON or not an object. */
export function jsonObjectOf(text: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}
