/**
 * Many connections at once: the simulator must not be the narrow end when thousands of calls open
 * their connections together (docs/sim.md "Connections").
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HttpClient } from '../../src/providers/http.js';
import { LISTEN_BACKLOG } from '../../src/sim/server.js';
import { until } from '../helpers/cli.js';
import { messagesBody, messagesUrl, useSims } from './helpers.js';

const sims = useSims();

/** The listen queue of the socket on `port` as the kernel holds it (`ss`: Send-Q of a LISTEN socket). */
function listenQueue(port: number): number | undefined {
  try {
    const line = execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).trim().split('\n')[0];
    const sendQ = Number(line?.trim().split(/\s+/)[2]);
    return Number.isInteger(sendQ) ? sendQ : undefined;
  } catch {
    return undefined;
  }
}

const somaxconn = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  } catch {
    return undefined;
  }
})();
const hasSs = (() => {
  try {
    execFileSync('ss', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const canReadQueue = process.platform === 'linux' && somaxconn !== undefined && hasSs;

describe('sim: many connections at once', () => {
  it.skipIf(!canReadQueue)('listens with a queue as deep as the OS allows, not Node’s 511', async () => {
    const s = await sims({ seed: 1 });
    const queue = listenQueue(s.port);
    expect(queue).toBe(Math.min(LISTEN_BACKLOG, somaxconn!));
    if (somaxconn! > 511) expect(queue).toBeGreaterThan(511);
  });

  it('holds 600 requests in flight at once, each on its own connection, and counts them', async () => {
    const n = 600;
    const s = await sims({ seed: 1, latency: { ttftMs: 600_000 } });
    const http = new HttpClient(); // no connection limit: one connection per request in flight
    const aborts = Array.from({ length: n }, () => new AbortController());
    const calls = aborts.map((abort, i) =>
      http
        .post({ url: messagesUrl(s), headers: { 'content-type': 'application/json' }, body: JSON.stringify(messagesBody(`call ${i}`)), signal: abort.signal })
        .then(
          () => 'answered',
          () => 'aborted',
        ),
    );
    await until(() => s.stats().inFlight === n, `${n} requests in flight at the sim`);
    expect(s.stats().requests).toBe(0); // none has ended
    for (const abort of aborts) abort.abort();
    expect(new Set(await Promise.all(calls))).toEqual(new Set(['aborted']));
    await until(() => s.stats().inFlight === 0, 'the aborted requests to end at the sim');
    const stats = s.stats();
    expect(stats.peakInFlight).toBe(n);
    expect(stats.requests).toBe(n);
    expect(stats.log.every((e) => e.aborted === true)).toBe(true);
    s.resetStats();
    expect(s.stats()).toMatchObject({ inFlight: 0, peakInFlight: 0, requests: 0 });
    await http.close();
  });
});
