/**
 * A kept-alive connection the server closed while it was idle: the next request sent on it is
 * sent again once on a fresh connection, instead of failing (a burst of such failures opened the
 * route's breaker at 1,000 calls in flight). A connection closed on its first request is not retried.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpClient } from '../../src/providers/http.js';

/**
 * A raw HTTP/1.1 server that answers the first `answers` requests of each connection with a
 * kept-alive 200 and closes the connection (FIN, or RST with 'reset') on the next one without
 * answering: the close a keep-alive timeout makes when it crosses a request.
 */
async function closingServer(answers: number, close: 'end' | 'reset' = 'end'): Promise<{ url: string; connections: () => number; requests: () => number; server: Server }> {
  let connections = 0;
  let requests = 0;
  const server = createServer((socket: Socket) => {
    connections++;
    let answered = 0;
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      // Each test request is small: headers and a Content-Length body in one piece or a few.
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length:\s*(\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.slice(end + 4 + length);
        requests++;
        if (answered >= answers) return void (close === 'end' ? socket.end() : socket.resetAndDestroy());
        answered++;
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok');
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1/messages`, connections: () => connections, requests: () => requests, server };
}

const open: { server: Server; http: HttpClient }[] = [];
afterEach(async () => {
  for (const { server, http } of open.splice(0)) {
    await http.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe('HttpClient: kept-alive connections the server closed', () => {
  it('sends a request that met a closed kept-alive connection again, once, on a new connection', async () => {
    const s = await closingServer(1);
    const http = new HttpClient({ connections: 1 });
    open.push({ server: s.server, http });
    const post = () => http.post({ url: s.url, headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(await (await post()).text()).toBe('ok'); // the connection now carries one answer
    const second = await post(); // on the same connection, which the server closes unanswered
    expect(second.status).toBe(200);
    expect(await second.text()).toBe('ok');
    expect(s.connections()).toBe(2);
    expect(s.requests()).toBe(3);
  });

  it('does the same when the server answers the request with a reset (ECONNRESET)', async () => {
    const s = await closingServer(1, 'reset');
    const http = new HttpClient({ connections: 1 });
    open.push({ server: s.server, http });
    const post = () => http.post({ url: s.url, headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(await (await post()).text()).toBe('ok');
    expect(await (await post()).text()).toBe('ok');
    expect(s.connections()).toBe(2);
  });

  it.each(['end', 'reset'] as const)('does not send again a request whose fresh connection was closed unanswered (%s)', async (close) => {
    const s = await closingServer(0, close);
    const http = new HttpClient({ connections: 1 });
    open.push({ server: s.server, http });
    const error = await http.post({ url: s.url, headers: { 'content-type': 'application/json' }, body: '{}' }).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(error?.code).toBe(close === 'end' ? 'UND_ERR_SOCKET' : 'ECONNRESET');
    expect(s.connections()).toBe(1);
    expect(s.requests()).toBe(1);
  });
});
