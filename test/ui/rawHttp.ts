/**
 * HTTP spoken by hand over node:net, for servers that must survive requests no HTTP client would
 * send (`GET //[`, a target of 100 kB, a line that is not HTTP at all): what the server answers,
 * and idle clients that connect and then never read.
 */
import { connect, type Socket } from 'node:net';

/**
 * Sends `head` (a request line and headers, written as given) and resolves with the status code
 * of the answer (0 when the server closed without one) once the server closes the connection.
 */
export function rawStatus(port: number, head: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' ? undefined : reject(e)));
    socket.on('close', () => resolve(Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0)));
    socket.end(head, 'latin1');
  });
}

/** A GET whose target is written as given, with `Connection: close`. */
export const rawGet = (port: number, target: string, method = 'GET') => rawStatus(port, `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);

export interface IdleClient {
  socket: Socket;
  /** The answer's status, once its first bytes arrived. */
  status: Promise<number>;
  /** The server ended or dropped the connection. */
  closed: Promise<void>;
}

/**
 * A client that asks for `target` and, once the status line is in, reads nothing more: what the
 * server sends it then piles up in the server (the kernel's buffers hold only so much).
 */
export function idleClient(port: number, target: string): IdleClient {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const status = new Promise<number>((resolve) => {
    socket.once('data', (chunk: Buffer) => {
      socket.pause();
      resolve(Number(/^HTTP\/1\.[01] (\d{3})/.exec(chunk.toString('latin1'))?.[1] ?? 0));
    });
    socket.once('close', () => resolve(0));
  });
  socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  return { socket, status, closed };
}
