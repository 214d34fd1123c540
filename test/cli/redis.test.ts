/**
 * `run --redis` and `worker` when no Redis answers: they say where they connect (without the
 * credentials), give up with a clear error and a non-zero exit, and Ctrl-C during the wait ends
 * them. The Redis is a loopback port that was bound and closed, so nothing listens there.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { cli, start, until } from '../helpers/cli.js';

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const PLAN = 'examples/plans/hello.json';

describe('--redis with no Redis there', () => {
  it('run and worker print where they connect, then fail with the reason, exit 2, no credentials shown', async () => {
    const url = `redis://app:s3cret-pw@127.0.0.1:${await closedPort()}`;
    // A short wait keeps the test quick; the default is 10 s.
    const env = { SWARMSTATE_REDIS_CONNECT_MS: '1000' };
    for (const args of [['run', PLAN, '--redis', url, '--store', 'memory'], ['worker', '--redis', url]]) {
      const r = await cli(args, env);
      expect(r.code, args[0]).toBe(2);
      expect(r.stderr).toMatch(/^connecting to redis:\/\/\*\*\*:\*\*\*@127\.0\.0\.1:\d+ …$/m);
      expect(r.stderr).toMatch(/cannot reach Redis at redis:\/\/\*\*\*:\*\*\*@127\.0\.0\.1:\d+ after 1 s \(ECONNREFUSED\)/);
      expect(r.stderr + r.stdout).not.toContain('s3cret-pw');
    }
  });

  it('rejects a connect wait that is not a positive integer', async () => {
    const r = await cli(['worker', '--redis', 'redis://127.0.0.1:1'], { SWARMSTATE_REDIS_CONNECT_MS: 'soon' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('SWARMSTATE_REDIS_CONNECT_MS must be a positive integer');
  });

  it('Ctrl-C while connecting ends run (exit 1) and worker (exit 0) at once, not at the deadline', async () => {
    const url = `redis://127.0.0.1:${await closedPort()}`;
    // The deadline is far beyond the test's own timeout: only the signal can end the wait in time.
    const env = { SWARMSTATE_REDIS_CONNECT_MS: '600000' };
    for (const [args, code] of [[['run', PLAN, '--redis', url, '--store', 'memory'], 1], [['worker', '--redis', url], 0]] as const) {
      const child = start([...args], env);
      await until(() => child.out.stderr.includes('connecting to'), 'the connecting line');
      child.child.kill('SIGINT');
      const exit = await child.exit;
      expect(exit, args[0]).toEqual({ code, signal: null });
      expect(child.out.stderr).toContain('interrupted while connecting to Redis');
    }
  });
});
