/** `swarmstate sim`: starts, prints the URL, serves until stopped; bad usage exits 2. */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { simCommand } from '../../src/sim/index.js';
import { cli, start, until } from '../helpers/cli.js';
import { messagesBody, post } from './helpers.js';

function capture(): { stream: PassThrough; text: () => string; line: () => Promise<string> } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return {
    stream,
    text: () => text,
    line: () =>
      new Promise((resolve) => {
        const check = () => (text.includes('\n') ? resolve(text.split('\n')[0]!) : stream.once('data', () => setImmediate(check)));
        check();
      }),
  };
}

describe('simCommand', () => {
  it('prints the URL, enforces --keys and --rpm, and exits 0 when stopped', async () => {
    const out = capture();
    const err = capture();
    const stop = new AbortController();
    const exit = simCommand(['--port', '0', '--seed', '4', '--keys', 'sk-cli-one,sk-cli-two', '--rpm', '1'], { out: out.stream, err: err.stream, stop: stop.signal });
    const url = await out.line();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await post(`${url}/v1/messages`, messagesBody('hi'), { key: 'sk-cli-one' })).status).toBe(200);
    expect((await post(`${url}/v1/messages`, messagesBody('again'), { key: 'sk-cli-one' })).status).toBe(429);
    expect((await post(`${url}/v1/messages`, messagesBody('hi'), { key: 'sk-cli-two' })).status).toBe(200);
    expect((await post(`${url}/v1/messages`, messagesBody('hi'), { key: 'sk-other' })).status).toBe(401);
    stop.abort();
    expect(await exit).toBe(0);
    expect(err.text()).not.toContain('sk-cli-one');
    await expect(fetch(`${url}/stats`)).rejects.toThrow();
  });

  it('--no-headers: the limits are enforced, and no answer says anything about them', async () => {
    const out = capture();
    const stop = new AbortController();
    const exit = simCommand(['--port', '0', '--keys', 'sk-cli-quiet', '--rpm', '1', '--no-headers'], { out: out.stream, err: new PassThrough(), stop: stop.signal });
    const url = await out.line();
    const first = await post(`${url}/v1/messages`, messagesBody('hi'), { key: 'sk-cli-quiet' });
    const second = await post(`${url}/v1/messages`, messagesBody('again'), { key: 'sk-cli-quiet' });
    expect([first.status, second.status]).toEqual([200, 429]);
    for (const res of [first, second]) expect([...res.headers.keys()].filter((h) => h.includes('ratelimit') || h === 'retry-after')).toEqual([]);
    stop.abort();
    expect(await exit).toBe(0);
  });

  it('exits 2 on bad usage, naming the problem', async () => {
    for (const argv of [['--port', 'x'], ['--rpm', '5'], ['--fault-rate', '2'], ['--bogus']]) {
      const err = capture();
      expect(await simCommand(argv, { out: new PassThrough(), err: err.stream }), argv.join(' ')).toBe(2);
      expect(err.text()).toMatch(/^swarmstate sim: /);
    }
  });

  it('the built CLI takes --rpm 0: a key that gets a 429 on every request; a negative limit is refused', async () => {
    const sim = start(['sim', '--port', '0', '--keys', 'sk-cli-zero', '--rpm', '0']);
    try {
      await until(() => sim.out.stdout.includes('\n') || sim.child.exitCode !== null, 'the URL on stdout');
      expect(sim.out.stderr).not.toMatch(/must be/);
      const url = sim.out.stdout.split('\n')[0]!;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      for (const prompt of ['hi', 'again']) {
        const res = await post(`${url}/v1/messages`, messagesBody(prompt), { key: 'sk-cli-zero' });
        expect(res.status).toBe(429);
        expect(res.headers.get('retry-after')).toBe('1');
        expect(res.text).toContain("This key's rate limit is 0 requests per minute: every request is refused.");
      }
    } finally {
      sim.child.kill('SIGTERM');
    }
    expect((await sim.exit).code).toBe(0);
    const refused = await cli(['sim', '--port', '0', '--keys', 'sk-cli-zero', '--otpm', '-1']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe('swarmstate sim: --otpm must be a number >= 0, got "-1" (see swarmstate sim --help)\n');
  });
});
