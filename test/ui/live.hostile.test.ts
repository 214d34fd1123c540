/**
 * The live page's server against requests no browser sends, during a real run held at a tool
 * call: none of them may end the run or the server. Raw sockets (node:net), since fetch refuses
 * to send most of them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSwarm, startLiveUi } from '../../src/index.js';
import { rawGet, rawStatus } from './rawHttp.js';

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

describe('the live page under odd requests', () => {
  it('answers every one (403 before anything else without the token), and the run completes', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const swarm = createSwarm({
      tools: [{ name: 'gate', description: 'Waits for the test', inputSchema: { type: 'object' }, handler: async () => (await released, 'open') }],
    });
    cleanup.push(() => swarm.close());
    const run = swarm.run({
      providers: { sim: { type: 'sim', keys: ['sim-live-hostile'] } },
      models: { m: { provider: 'sim', model: 'sim-small', maxTokens: 64 } },
      tasks: [
        { id: 'held', model: 'm', tools: ['gate'], prompt: 'wait [[sim:tool gate {}]]' },
        { id: 'after', model: 'm', deps: ['held'], prompt: 'after [[sim:length 8]]' },
      ],
    });
    cleanup.push(() => (release(), run.result.catch(() => undefined)));
    let toolCalled!: () => void;
    const atGate = new Promise<void>((resolve) => (toolCalled = resolve));
    run.events.on('tool:called', () => toolCalled());
    const ui = await startLiveUi({ run });
    cleanup.push(() => ui.close());
    const { port, searchParams } = new URL(ui.url);
    const token = searchParams.get('token')!;
    await atGate;

    const withoutToken: [string, string, number][] = [
      ['GET', '//[', 403],
      ['GET', '//[?token=x', 403],
      ['GET', 'http://x', 403],
      ['GET', 'http://[', 403],
      ['GET', '*', 403],
      ['OPTIONS', '*', 403],
      ['POST', '/', 403],
      ['DELETE', '//[', 403],
      ['GET', '/?token=%E0%A4%A', 403],
      ['GET', '/events?token=%zz', 403],
      ['GET', '/%', 403],
      ['GET', `/${'a'.repeat(100_000)}`, 431],
      ['GET', `/?token=${'%'.repeat(20_000)}`, 431],
    ];
    const withToken: [string, string, number][] = [
      ['GET', `//[?token=${token}`, 404],
      ['GET', `/%zz?token=${token}`, 404],
      ['GET', `/?token=${token}&token=%zz`, 200],
      ['GET', `/?a=%zz&token=${token}`, 200],
      ['POST', `/?token=${token}`, 405],
      ['PUT', `/events?token=${token}`, 405],
    ];
    for (const [method, target, status] of [...withoutToken, ...withToken]) {
      expect(await rawGet(Number(port), target, method), `${method} ${target.slice(0, 60)}`).toBe(status);
    }
    // Not HTTP at all: the parser's 400, and the server goes on.
    expect(await rawStatus(Number(port), '\u0000\u0001 HELLO\r\n\r\n')).toBe(400);
    expect(await rawStatus(Number(port), 'GET //[ HTTP/1.1\r\nHost: [\r\nContent-Length: x\r\n\r\n')).toBe(400);

    const page = await fetch(ui.url);
    expect(page.status).toBe(200);
    await page.text();
    release();
    expect((await run.result).status).toBe('completed');
    expect((await fetch(ui.url)).status).toBe(200);
  });
});
