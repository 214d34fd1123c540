/**
 * One lease cycle through a pool and its key alone (LEASE.REQUEST, KEY.GRANT, LEASE.GRANTED from
 * the key, LEASE.RELEASE, KEY.RELEASE, and whatever the key tells the pool), in CPU µs: the pool
 * and key machines' share of the scheduler's per-task cost, without the rest of the runtime.
 *   node --import tsx test/bench/lease.ts [limits|none] [held]
 * `limits`: the key paces (rpm, itpm, otpm stated, too high to bind); without, it paces nothing.
 * `held`: leases granted first and held throughout (as with that many calls in flight).
 */
import { createActor, setup, type AnyActorRef } from 'xstate';
import { poolMachine } from '../../machines/pool.machine.js';
import type { LeaseReply } from '../../machines/protocol.js';

const usage = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 };
let granted: string | undefined;
const agent = createActor(
  setup({ types: { events: {} as LeaseReply } }).createMachine({
    on: { 'LEASE.GRANTED': { actions: ({ event }) => (granted = event.leaseId) } },
  }),
).start();
const limits = process.argv[2] === 'limits' ? { rpm: 1e9, itpm: 1e12, otpm: 1e12 } : {};
const pool = createActor(poolMachine, { input: { provider: 'p', keys: [{ keyId: 'k1', limits }] } }).start();

let n = 0;
const held = Number(process.argv[3] ?? 0);
for (let i = 0; i < held; i++) {
  pool.send({ type: 'LEASE.REQUEST', replyTo: agent as AnyActorRef, requestId: `h${i}`, priority: 0, inputTokens: 10, outputTokens: 5 });
}
function cycles(count: number): number {
  const t0 = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    granted = undefined;
    pool.send({ type: 'LEASE.REQUEST', replyTo: agent as AnyActorRef, requestId: `r${n++}`, priority: 0, inputTokens: 10, outputTokens: 5 });
    if (granted === undefined) throw new Error(`request ${n} was not granted`);
    pool.send({ type: 'LEASE.RELEASE', leaseId: granted, keyId: 'k1', outcome: { kind: 'ok', usage } });
  }
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / count;
}

cycles(20_000); // warm-up
const runs = Array.from({ length: 7 }, () => cycles(20_000)).sort((a, b) => a - b);
console.log(JSON.stringify({ limits: process.argv[2] === 'limits', held, cpuUsPerCycle: runs[3], runs }));
