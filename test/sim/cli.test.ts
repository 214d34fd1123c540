/** `swarmstate sim`: starts, prints the URL, serves until stopped; bad usage exits 2. */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { simCommand } from '../../src/sim/index.js';
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

  it('exits 2 on bad usage, naming the problem', async () => {
    for (const argv of [['--port', 'x'], ['--rpm', '5'], ['--fault-rate', '2'], ['--bogus']]) {
      const err = capture();
      expect(await simCommand(argv, { out: new PassThrough(), err: err.stream }), argv.join(' ')).toBe(2);
      expect(err.text()).toMatch(/^swarmstate sim: /);
    }
  });
});
