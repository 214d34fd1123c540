/**
 * A private Redis for a test: `redis-server` (Debian's package; `.ci/run` installs it) on a free
 * port of 127.0.0.1, no persistence, its own folder. It can be stopped and started again on the
 * same port (a Redis outage), and is killed when the test ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestRedis {
  url: string;
  port: number;
  /** Stops the server (its data is gone: there is no persistence). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function until(ok: () => Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'swarmstate-redis-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    let failed: Error | undefined;
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
    // Without this, a missing binary is an uncaught 'error' event that takes the test process down.
    child.once('error', (error) => (failed = error));
    await until(async () => {
      if (failed) throw new Error(`redis-server could not start (${failed.message}): apt-get install -y redis-server`);
      return accepts(port);
    }, `redis-server on port ${port}`);
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    c.kill('SIGKILL');
    await exited;
    await until(async () => !(await accepts(port)), `redis-server on port ${port} to stop`);
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, start, stop, close: stop };
}

/** An `onError(source, message)` for Redis clients that records, and a promise for the first message of each of `sources`. */
export function errorListener(sources: string[]) {
  const told: [string, string][] = [];
  let allTold!: () => void;
  const all = new Promise<void>((resolve) => (allTold = resolve));
  const onError = (source: string, message: string) => {
    told.push([source, message]);
    if (sources.every((s) => told.some(([t]) => t === s))) allTold();
  };
  return { told, all, onError };
}
