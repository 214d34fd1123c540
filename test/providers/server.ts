/**
 * A tiny real HTTP server on 127.0.0.1 (port 0) for the adapter tests: it records every request
 * and answers with whatever the test scripted (a fixture, in chunks, or a custom handler).
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { ProviderRequest } from '../../src/providers/types.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));

/** A fixture's text. `{{KEY}}` in it is replaced with the key the request carried (echo tests). */
export function fixture(path: string): string {
  return readFileSync(FIXTURES + path, 'utf8');
}

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
  /** Which connection carried it (1, 2, ... in order of accept). */
  connection: number;
}

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  /** The body (a fixture's text, usually). */
  body?: string;
  /** Send the body in pieces of this many bytes, one per event-loop turn. Default: all at once. */
  chunkSize?: number;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, recorded: RecordedRequest) => void;

export interface TestServer {
  /** http://127.0.0.1:<port> */
  url: string;
  requests: RecordedRequest[];
  /** Connections accepted so far. */
  readonly connections: number;
  /** Connections closed so far. */
  readonly closedConnections: number;
  /** Answers the next requests with this reply (or handler), until changed. */
  respond(reply: Reply | Handler): void;
  close(): Promise<void>;
}

function keyOf(headers: IncomingMessage['headers']): string {
  const apiKey = headers['x-api-key'];
  if (typeof apiKey === 'string') return apiKey;
  const auth = headers.authorization;
  return typeof auth === 'string' ? auth.replace(/^Bearer /, '') : '';
}

export async function startServer(): Promise<TestServer> {
  let current: Reply | Handler = { status: 200, body: '{}' };
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const ids = new WeakMap<Socket, number>();
  let connections = 0;
  let closedConnections = 0;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        body = { _raw: text };
      }
      const recorded: RecordedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, connection: ids.get(req.socket) ?? 0 };
      requests.push(recorded);
      if (typeof current === 'function') return current(req, res, recorded);
      const reply = current;
      const payload = Buffer.from((reply.body ?? '').split('{{KEY}}').join(keyOf(req.headers)), 'utf8');
      res.writeHead(reply.status ?? 200, reply.headers ?? { 'content-type': 'application/json' });
      if (!reply.chunkSize) return void res.end(payload);
      let at = 0;
      const next = () => {
        if (res.destroyed) return;
        if (at >= payload.length) return void res.end();
        res.write(payload.subarray(at, at + reply.chunkSize!));
        at += reply.chunkSize!;
        setImmediate(next);
      };
      next();
    });
  });
  server.on('connection', (socket: Socket) => {
    ids.set(socket, ++connections);
    sockets.add(socket);
    socket.on('close', () => {
      closedConnections++;
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get connections() {
      return connections;
    },
    get closedConnections() {
      return closedConnections;
    },
    respond(reply) {
      current = reply;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** SSE response headers. */
export const SSE = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

/** A secret that must never show up in an error. */
export const SECRET = 'sk-test-SECRET-0123456789abcdef';

/** A normalized request with a shared brief, a tool round-trip and two tools. */
export function makeRequest(overrides: Partial<ProviderRequest> = {}): ProviderRequest {
  return {
    provider: 'main',
    model: 'model-x',
    system: 'You are a careful worker.',
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'The shared brief: summarize the repo.' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Reading it.' },
          { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'README.md' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Go on.' },
          { type: 'tool_result', toolUseId: 'toolu_1', content: 'not found', isError: true },
        ],
      },
    ],
    tools: [
      { name: 'read_file', description: 'Reads a file', inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
      { name: 'list_files', inputSchema: { type: 'object', properties: {} } },
    ],
    maxTokens: 1024,
    key: { id: 'main:ab12', secret: SECRET },
    signal: new AbortController().signal,
    meta: { taskId: 't1', attempt: 1, turn: 2 },
    ...overrides,
  };
}
