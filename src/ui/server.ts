/**
 * The request handling both pages share (`run --ui`'s live page, `swarmstate ui`'s journal
 * pages): a server on 127.0.0.1 whose every path needs a random token in the URL.
 *
 * Any local process can connect, so a request is checked before anything in it is parsed: the
 * token is looked for in the raw request target as the client sent it (no `new URL`, no
 * percent-decoding), compared in constant time, and only a request that has it reaches a route.
 * Nothing a request holds may end the process: the route runs inside a try, and what it throws
 * becomes a 500 (or a cut connection once the answer had begun). Requests too odd for Node's
 * parser (a 100 kB target, a line that is not HTTP) get the parser's 400 or 431 and never reach
 * the handler.
 *
 * A page that takes decisions (`post`) takes them by POST only, after the same token check, and
 * only from itself: a request whose `Origin` is another site's (a page elsewhere in the browser)
 * is refused (403), one without `Origin` (curl, a script) passes on the token alone; the body must
 * be declared JSON (a cross-site form cannot send that without asking first) and is bounded.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { reportPage, type RenderedReport } from '../report/html.js';

/** A request that carried the token. */
export interface PageRequest {
  req: IncomingMessage;
  res: ServerResponse;
  /** The target's path as sent, before any `?`: always starts with `/` (never `//`), not decoded. */
  path: string;
}

export interface TokenServerOptions {
  /** Only 127.0.0.1: the pages are for this machine. */
  host?: '127.0.0.1';
  /** Default 0: a free port. */
  port?: number;
  /** What the error of a wrong host says it is (`startLiveUi`). */
  name: string;
  /** Answers a GET that carried the token; may throw (a 500, the server goes on). */
  route(request: PageRequest): void;
  /**
   * The paths that take a POST, and what answers one that carried the token, came from this
   * server's own origin (or named none), and sent a JSON body within `maxBodyBytes` (the body as
   * text; may throw or reject: a 500). A POST anywhere else is refused (405) like any method but GET.
   */
  post?: { paths: readonly string[]; take(request: PageRequest, body: string): void | Promise<void> };
  /** Most bytes of a POST body. Default 64 KiB. */
  maxBodyBytes?: number;
}

/** The default bound of a POST body: a decision and its note, not an upload. */
export const MAX_POST_BYTES = 64 * 1024;

export interface TokenServer {
  /** `http://127.0.0.1:<port>/?token=<token>`: the token is the only key to the pages. */
  readonly url: string;
  readonly port: number;
  readonly token: string;
  /** Stops listening and cuts what is still connected (end long answers first). Idempotent. */
  close(): Promise<void>;
}

/**
 * The token of a raw request target (`/events?a=b&token=xyz`): the first `token=` parameter,
 * taken as sent. The token is base64url, which no client encodes.
 */
export function tokenOf(target: string): string | undefined {
  const query = target.indexOf('?');
  if (query < 0) return undefined;
  for (const part of target.slice(query + 1).split('&')) if (part.startsWith('token=')) return part.slice('token='.length);
  return undefined;
}

const SECURITY_HEADERS = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store' };

/** A JSON answer (a POST's). */
export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8' }).end(JSON.stringify(value) + '\n');
}

/** A short plain-text answer. */
export function sendText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', ...headers }).end(text.endsWith('\n') ? text : `${text}\n`);
}

/**
 * A page: the report's page around `rendered`, with a CSP header that allows nothing but its own
 * inline script (by a nonce made for this answer) and, for the live page, `/events`.
 */
export function sendPage(res: ServerResponse, rendered: RenderedReport, script?: string): void {
  const nonce = randomBytes(16).toString('base64');
  const csp = `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': csp });
  res.end(reportPage(rendered, { nonce, ...(script !== undefined ? { script } : {}) }));
}

/** Starts a token-protected server on 127.0.0.1. */
export async function startTokenServer(opts: TokenServerOptions): Promise<TokenServer> {
  if (opts.host !== undefined && opts.host !== '127.0.0.1') {
    throw new Error(`${opts.name}: host must be 127.0.0.1 (got ${String(opts.host)}): the page is for this machine only`);
  }
  const token = randomBytes(18).toString('base64url');
  const expected = Buffer.from(token);
  const allowed = (target: string) => {
    const given = tokenOf(target);
    if (given === undefined || given.length !== expected.length) return false;
    const bytes = Buffer.from(given);
    return bytes.length === expected.length && timingSafeEqual(bytes, expected);
  };

  let origin = '';
  const maxBody = opts.maxBodyBytes ?? MAX_POST_BYTES;
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    const target = req.url ?? '';
    if (!allowed(target)) return sendText(res, 403, '403: this page needs the token in the URL swarmstate printed');
    const query = target.indexOf('?');
    const path = query < 0 ? target : target.slice(0, query);
    const post = req.method === 'POST' && opts.post !== undefined && opts.post.paths.includes(path);
    if (req.method !== 'GET' && !post) return void res.writeHead(405, { Allow: 'GET' }).end();
    // Origin-form only: `http://host/...`, `*` and `//...` name nothing here.
    if (!path.startsWith('/') || path.startsWith('//')) return sendText(res, 404, 'not found');
    if (post) return receive(req, res, path);
    opts.route({ req, res, path });
  };
  /** A POST's checks, then its body read within the bound, then `post`. */
  const receive = (req: IncomingMessage, res: ServerResponse, path: string) => {
    const from = req.headers.origin;
    if (from !== undefined && from !== origin) return sendJson(res, 403, { error: `refused: a decision comes from this page (${origin}), not from ${from}` });
    if (!/^application\/json(\s*;|$)/i.test(req.headers['content-type'] ?? '')) return sendJson(res, 415, { error: 'the body must be JSON (Content-Type: application/json)' });
    const tooBig = () => {
      // The rest of the body is not read: the connection closes after the answer.
      res.once('finish', () => req.destroy());
      sendJson(res, 413, { error: `the body is over ${maxBody} bytes` });
    };
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > maxBody) return tooBig();
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > maxBody) {
        over = true;
        return tooBig();
      }
      chunks.push(chunk);
    });
    req.on('error', () => undefined);
    req.on('end', () => {
      if (over) return;
      const failed = () => (!res.headersSent ? sendJson(res, 500, { error: 'the decision could not be taken' }) : res.destroy());
      try {
        void Promise.resolve(opts.post!.take({ req, res, path }, Buffer.concat(chunks).toString('utf8'))).catch(failed);
      } catch {
        failed();
      }
    });
  };
  const server: Server = createServer((req, res) => {
    // A write to a client that has gone is nobody's error.
    res.on('error', () => undefined);
    try {
      answer(req, res);
    } catch {
      if (!res.headersSent) sendText(res, 500, 'the page could not be made');
      else res.destroy();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  // A listening server's own errors (none expected once bound) are not the run's end.
  server.on('error', () => undefined);
  const { port } = server.address() as AddressInfo;
  origin = `http://127.0.0.1:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    token,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
