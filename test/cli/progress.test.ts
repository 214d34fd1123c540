/**
 * Live progress: the log lines of a real run, the status line on event time, the live view's
 * frame for a known state, the redraw throttle, and a writer that never throws.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { RunEvent, Usage } from '../../machines/protocol.js';
import { createProgress, progressState, reduce, renderFrame, REDRAW_MS } from '../../src/cli/progress.js';
import { formatUsd } from '../../src/cli/format.js';
import { createSwarm, type TimedRunEvent } from '../../src/swarm.js';

/** A stream that keeps what is written, and when (by the test's clock). */
function sink(clock: () => number = () => 0) {
  const writes: { t: number; text: string }[] = [];
  const out = { write: (text: string) => (writes.push({ t: clock(), text }), true), on: () => out } as unknown as NodeJS.WritableStream;
  return { out, writes, text: () => writes.map((w) => w.text).join('') };
}

/** Stamps events with times: each `[at, event]`. */
const timed = (list: [number, RunEvent][]): TimedRunEvent[] => list.map(([at, e]) => ({ ...e, at }) as TimedRunEvent);

const use = (inputTokens: number, outputTokens: number): Usage => ({ inputTokens, outputTokens, cacheWriteTokens: 0, cacheReadTokens: 0 });

const started = (tasks: number): RunEvent => ({
  type: 'run:started',
  runId: 'r1',
  tasks,
  models: { fast: { provider: 'p', model: 'm', price: { input: 1, output: 5 } } },
  keys: { 'p:aaaa': { rpm: 60 }, 'p:bbbb': {} },
  maxInFlight: 4,
});

describe('non-TTY progress', () => {
  it('prints a real run line by line: its start, the final failure, the skip, the retry and the final status', async () => {
    const plan = {
      providers: { sim: { type: 'sim', keys: ['k-a'], limits: { concurrency: 2 } } },
      models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 64, price: { input: 1, output: 5 } } },
      // One at a time, so the order is the scheduler's: c (two tasks left on its chain) before b.
      defaults: { maxInFlight: 1, maxRetries: 2 },
      tasks: [
        { id: 'a', model: 'fast', prompt: 'first' },
        { id: 'b', model: 'fast', deps: ['a'], prompt: 'flaky [[sim:error 500 1]]' },
        { id: 'c', model: 'fast', deps: ['a'], prompt: 'broken [[sim:error 400]]' },
        { id: 'd', model: 'fast', deps: ['c'], prompt: 'never' },
      ],
    };
    const swarm = createSwarm({ seed: 1, backoff: { baseMs: 1, maxMs: 2 } });
    const { out, text } = sink();
    const progress = createProgress({ out, tty: false, intervalMs: 60_000 });
    const run = swarm.run(plan);
    run.events.on('*', (_type, event) => progress.onEvent(event as TimedRunEvent));
    const result = await run.result;
    await swarm.close();
    progress.finish();

    const lines = text()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => l.replace(/^\[\d+\.\ds\] /, '[T] '));
    expect(lines).toHaveLength(5);
    expect(lines[0]).toBe(`[T] run ${run.id}: 4 tasks, 1 key, at most 1 in flight`);
    expect(lines[1]).toMatch(/^\[T\] FAILED   c attempt 1 \(bad_request: sim\/sim-fast, key sim:[0-9a-f]{8}: HTTP 400 .*\)$/);
    expect(lines[2]).toBe('[T] skipped  d (depends on "c", which failed)');
    expect(lines[3]).toMatch(/^\[T\] retry    b #1 in \d+ ms \(server_error: sim\/sim-fast, key sim:[0-9a-f]{8}: HTTP 500 .*\)$/);
    expect(lines[4]).toBe(`[T] run partial: 2/4 done, 1 failed, 1 skipped, 0 in flight, 0 queued, 1 retry, ${formatUsd(result.totals.costUsd)}`);
    expect(result.totals.costUsd).toBeGreaterThan(0);
  });

  it('prints a status line per intervalMs of event time, on the grid, and no line per completed task', () => {
    const { out, text } = sink();
    const progress = createProgress({ out, tty: false, intervalMs: 5000, budgetUsd: 2 });
    const events = timed([
      [1000, started(3)],
      [1000, { type: 'task:queued', taskId: 'a' }],
      [1000, { type: 'task:queued', taskId: 'b' }],
      [1000, { type: 'task:queued', taskId: 'c' }],
      [1100, { type: 'task:started', taskId: 'a', attempt: 1, model: 'fast' }],
      [1200, { type: 'model:request', taskId: 'a', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:aaaa' }],
      [4000, { type: 'model:response', taskId: 'a', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:aaaa', usage: use(1000, 200) }],
      [4000, { type: 'task:completed', taskId: 'a', attempt: 1, output: 'x', usage: use(1000, 200) }],
      [6000, { type: 'task:started', taskId: 'b', attempt: 1, model: 'fast' }],
      // Quiet for 12 s: one line, and the next is due at 21 s (the grid), not 25.
      [18_000, { type: 'key:backoff', keyId: 'p:aaaa', retryAfterMs: 1000 }],
      [20_000, { type: 'task:started', taskId: 'c', attempt: 1, model: 'fast' }],
      [21_000, { type: 'task:completed', taskId: 'b', attempt: 1, output: 'x', usage: use(0, 0) }],
      [21_500, { type: 'task:completed', taskId: 'c', attempt: 1, output: 'x', usage: use(0, 0) }],
      [21_500, { type: 'run:completed', status: 'completed' }],
    ]);
    for (const e of events) progress.onEvent(e);
    progress.finish();
    expect(text().split('\n')).toEqual([
      '[0.0s] run r1: 3 tasks, 2 keys, at most 4 in flight',
      '[5.0s] 1/3 done, 1 in flight, 1 queued, 0 retries, $0.0020 of $2.00',
      '[17.0s] key      p:aaaa backs off 1000 ms',
      '[17.0s] 1/3 done, 1 in flight, 1 queued, 0 retries, $0.0020 of $2.00',
      '[20.0s] 2/3 done, 1 in flight, 0 queued, 0 retries, $0.0020 of $2.00',
      '[20.5s] run completed: 3/3 done, 0 in flight, 0 queued, 0 retries, $0.0020 of $2.00',
      '',
    ]);
  });

  it('prints a few of the tasks a failure skips, then counts the rest on one line', () => {
    const { out, text } = sink();
    const progress = createProgress({ out, tty: false });
    const reason = 'depends on "root", which failed';
    const events: [number, RunEvent][] = [[0, started(12)]];
    for (let i = 0; i < 10; i++) events.push([100, { type: 'task:skipped', taskId: `t${i}`, reason }]);
    events.push([200, { type: 'breaker:open', route: 'p/m', cooldownMs: 10_000, failures: 5 }]);
    for (const e of timed(events)) progress.onEvent(e);
    expect(text().split('\n').slice(1, -1)).toEqual([
      '[0.1s] skipped  t0 (depends on "root", which failed)',
      '[0.1s] skipped  t1 (depends on "root", which failed)',
      '[0.1s] skipped  t2 (depends on "root", which failed)',
      '[0.1s] skipped  ... and 7 more (depends on "root", which failed)',
      '[0.2s] breaker  p/m OPEN for 10000 ms after 5 failures',
    ]);
  });
});

describe('renderFrame', () => {
  /** Ten tasks: 4 completed, 1 failed after a retry, 2 running, 3 queued; one 429; a breaker half open; tools. */
  function midRun() {
    const list: [number, RunEvent][] = [[0, started(10)]];
    const req = (taskId: string, keyId: string): RunEvent => ({ type: 'model:request', taskId, attempt: 1, turn: 0, provider: 'p', model: 'm', keyId });
    const res = (taskId: string, keyId: string): RunEvent => ({ type: 'model:response', taskId, attempt: 1, turn: 0, provider: 'p', model: 'm', keyId, usage: use(1000, 200) });
    for (let i = 0; i < 10; i++) list.push([0, { type: 'task:queued', taskId: `t${i}` }]);
    for (let i = 0; i < 4; i++) {
      list.push([100, { type: 'task:started', taskId: `t${i}`, attempt: 1, model: 'fast' }], [100, req(`t${i}`, 'p:aaaa')], [900, res(`t${i}`, 'p:aaaa')]);
      list.push([1000, { type: 'task:completed', taskId: `t${i}`, attempt: 1, output: 'x', usage: use(1000, 200) }]);
    }
    const boom = { code: 'server_error' as const, message: 'HTTP 500', retryable: true };
    list.push(
      [2000, { type: 'task:started', taskId: 't4', attempt: 1, model: 'fast' }],
      [2000, { type: 'task:failed', taskId: 't4', attempt: 1, error: boom, willRetry: true }],
      [2000, { type: 'task:queued', taskId: 't4' }],
      [2100, { type: 'task:started', taskId: 't4', attempt: 2, model: 'fast' }],
      [2200, { type: 'task:failed', taskId: 't4', attempt: 2, error: { ...boom, retryable: false }, willRetry: false }],
      [3000, { type: 'task:started', taskId: 't5', attempt: 1, model: 'fast' }],
      [3000, req('t5', 'p:bbbb')],
      [3100, { type: 'model:error', taskId: 't5', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:bbbb', error: { code: 'rate_limited', message: '429', retryable: true } }],
      [3100, { type: 'key:backoff', keyId: 'p:bbbb', retryAfterMs: 5000 }],
      [3100, { type: 'task:retry', taskId: 't5', attempt: 1, retry: 1, delayMs: 10, error: { code: 'rate_limited', message: '429', retryable: true } }],
      [3200, { type: 'task:started', taskId: 't6', attempt: 1, model: 'fast' }],
      [3200, req('t6', 'p:bbbb')],
      [4000, { type: 'breaker:closed', route: 'q/never-opened' }],
      [4000, { type: 'breaker:open', route: 'p/m', cooldownMs: 10_000, failures: 5 }],
      [9000, { type: 'breaker:halfOpen', route: 'p/m' }],
      [9000, { type: 'tool:called', taskId: 't5', name: 'read', shared: false }],
      [9000, { type: 'tool:called', taskId: 't6', name: 'read', shared: true }],
      [9500, { type: 'tool:called', taskId: 't6', name: 'read', shared: false, cached: true }],
      [9500, { type: 'tool:result', name: 'read', isError: false, durationMs: 500 }],
    );
    return timed(list).reduce(reduce, progressState());
  }

  it('shows tasks with a bar, in flight, queued, retries, cost against the budget, each key, breakers that left closed, tools and an ETA', () => {
    expect(renderFrame(midRun(), 10_000, 80, 1)).toEqual([
      'swarmstate run r1  10.0s  ETA 10.0s',
      'tasks    [########.........]  5/10  50.0%  4 completed  1 failed',
      'now      2 in flight, 3 queued, 2 retries, 6 requests (1 rate limited)',
      'cost     $0.0080 of $1.00 (0.8%)',
      'key      p:aaaa  ready      4 requests',
      'key      p:bbbb  backoff    2 requests  1 active  1 rate limited',
      'breaker  p/m  halfOpen (opened 1 time)',
      'tools    3 requested, 1 executed, 1 shared, 1 cached',
    ]);
  });

  it('freezes the clock at run:completed, shows the status instead of an ETA, and never exceeds the width', () => {
    const state = midRun();
    reduce(state, { type: 'run:completed', status: 'partial', at: 12_000 });
    const frame = renderFrame(state, 99_000, 40);
    expect(frame[0]).toBe('swarmstate run r1  12.0s  partial');
    expect(frame[3]).toBe('cost     $0.0080');
    for (const line of frame) expect(line.length).toBeLessThanOrEqual(40);
    expect(frame[1]).toBe('tasks    [#####.....]  5/10  50.0%  4 c…');
  });

  it('says the cost is unknown when no model has a price, rather than $0', () => {
    const state = reduce(progressState(), { type: 'run:started', runId: 'r2', tasks: 1, models: { m: { provider: 'p', model: 'm' } }, at: 0 });
    expect(renderFrame(state, 0, 80)[3]).toBe('cost     unknown (no model has a price)');
  });
});

describe('TTY progress', () => {
  it('redraws at most once per 100 ms of now, in place, however many events arrive', () => {
    let t = 0;
    const { out, writes } = sink(() => t);
    const progress = createProgress({ out, tty: true, now: () => t, width: 80 });
    progress.onEvent({ ...started(1000), at: 0 });
    for (let i = 0; i < 1000; i++) {
      t += 7;
      progress.onEvent({ type: 'task:queued', taskId: `t${i}`, at: t });
      progress.onEvent({ type: 'task:started', taskId: `t${i}`, attempt: 1, model: 'fast', at: t });
      progress.onEvent({ type: 'task:completed', taskId: `t${i}`, attempt: 1, output: '', usage: use(0, 0), at: t });
    }
    const beforeFinish = writes.length;
    progress.finish();

    // 7 s of events: at most one frame per 100 ms (plus the first), then the final one.
    expect(beforeFinish).toBeLessThanOrEqual(7000 / REDRAW_MS + 1);
    expect(beforeFinish).toBeGreaterThan(7000 / REDRAW_MS / 2);
    for (let i = 1; i < beforeFinish; i++) expect(writes[i]!.t - writes[i - 1]!.t).toBeGreaterThanOrEqual(REDRAW_MS);
    expect(writes).toHaveLength(beforeFinish + 1);

    // The first frame hides the cursor; each later one goes back up over the last and ends by
    // clearing what is below; the final one shows the cursor again.
    expect(writes[0]!.text.startsWith('\x1b[?25l')).toBe(true);
    for (let i = 1; i < writes.length; i++) {
      const previousHeight = writes[i - 1]!.text.split('\n').length - 1;
      expect(writes[i]!.text.startsWith(`\x1b[${previousHeight}A\r`)).toBe(true);
      expect(writes[i]!.text).toContain('\x1b[J');
    }
    const last = writes.at(-1)!.text;
    expect(last.endsWith('\x1b[?25h')).toBe(true);
    // 80 columns leave the bar its least (10 cells) next to what 1,000 tasks' counts may need.
    expect(last).toContain('tasks    [##########]  1,000/1,000  100.0%');
  });

  it('writes a final failure above the live view, where the next frame does not overwrite it', () => {
    let t = 0;
    const { out, writes } = sink(() => t);
    const progress = createProgress({ out, tty: true, now: () => t, width: 80 });
    progress.onEvent({ ...started(2), at: 0 });
    t = 500;
    progress.onEvent({ type: 'task:started', taskId: 'a', attempt: 1, model: 'fast', at: 500 });
    progress.onEvent({ type: 'task:failed', taskId: 'a', attempt: 1, error: { code: 'bad_request', message: 'HTTP 400', retryable: false }, willRetry: false, at: 500 });
    t = 700;
    progress.onEvent({ type: 'task:skipped', taskId: 'b', reason: 'depends on "a", which failed', at: 700 });
    progress.finish();
    const i = writes.findIndex((w) => w.text.includes('FAILED'));
    const lines = writes[i]!.text.split('\n');
    const height = writes[i - 1]!.text.split('\n').length - 1;
    expect(lines[0]).toBe(`\x1b[${height}A\r[0.5s] FAILED   a attempt 1 (bad_request: HTTP 400)\x1b[K`);
    expect(lines[1]).toMatch(/^swarmstate run r1  0\.7s/);
    // The next frame goes back up over the frame only, not over the failure line.
    const frameHeight = lines.length - 2;
    expect(writes[i + 1]!.text.startsWith(`\x1b[${frameHeight}A\r`)).toBe(true);
    expect(writes[i + 1]!.text).not.toContain('FAILED');
  });
});

describe('a budget overrun', () => {
  const overrun = (budget: 'run' | 'task' | 'model', limitUsd: number): RunEvent => ({
    type: 'budget:overrun',
    taskId: 'big',
    model: 'm',
    reservedUsd: 0.0123,
    actualUsd: 5,
    budget,
    limitUsd,
    spentUsd: 5.25,
  });

  it('is a log line naming the task, the budget, the call\'s cost and reservation, and the spend', () => {
    const { out, text } = sink();
    const progress = createProgress({ out, tty: false, intervalMs: 60_000 });
    progress.onEvent({ ...started(1), at: 0 });
    progress.onEvent({ ...overrun('task', 0.05), at: 1200 });
    expect(text().split('\n')[1]).toBe('[1.2s] budget   big OVERRAN the task budget: a call on m cost $5.00 ($0.0123 reserved); spent $5.25 of $0.05');
  });

  it('is written above the live view, as a final failure is', () => {
    let t = 0;
    const { out, text } = sink(() => t);
    const progress = createProgress({ out, tty: true, now: () => t, width: 120 });
    progress.onEvent({ ...started(1), at: 0 });
    t = 300;
    progress.onEvent({ ...overrun('model', 2), at: 300 });
    progress.finish();
    expect(text()).toContain('[0.3s] budget   big OVERRAN the model budget: a call on m cost $5.00 ($0.0123 reserved); spent $5.25 of $2.00\x1b[K');
  });

  it('a key set aside is written above the live view too', () => {
    let t = 0;
    const { out, text } = sink(() => t);
    const progress = createProgress({ out, tty: true, now: () => t, width: 120 });
    progress.onEvent({ ...started(1), at: 0 });
    t = 400;
    progress.onEvent({ type: 'key:set-aside', keyId: 'p:aaaa', provider: 'p', rateLimitedMs: 120000, responses: 7, at: 400 });
    progress.finish();
    expect(text()).toContain('[0.4s] key      p:aaaa SET ASIDE: nothing but 429s for 120000 ms (7 responses)\x1b[K');
  });
});

describe('a progress writer never throws', () => {
  it('survives a stream whose write throws, a stream that errors later, and malformed events', async () => {
    const throwing = { write: () => { throw new Error('EPIPE'); }, on: () => throwing } as unknown as NodeJS.WritableStream;
    for (const tty of [false, true]) {
      const progress = createProgress({ out: throwing, tty, now: () => 0 });
      expect(() => progress.onEvent({ ...started(1), at: 0 })).not.toThrow();
      expect(() => progress.onEvent({ type: 'model:response', keyId: 'k', at: 1 } as unknown as TimedRunEvent)).not.toThrow();
      expect(() => progress.onEvent({ type: 'task:failed', taskId: 'x', at: 2 } as unknown as TimedRunEvent)).not.toThrow();
      expect(() => progress.onEvent(null as unknown as TimedRunEvent)).not.toThrow();
      expect(() => progress.finish()).not.toThrow();
    }
    // An 'error' event on the stream (the reader went away) is handled, and later writes stop.
    const out = new PassThrough();
    const progress = createProgress({ out, tty: false });
    out.destroy(new Error('EPIPE'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(() => progress.onEvent({ type: 'task:failed', taskId: 'x', attempt: 1, error: { code: 'internal', message: 'x', retryable: false }, willRetry: false, at: 0 })).not.toThrow();
    expect(() => progress.finish()).not.toThrow();
  });
});

describe('progress of a resumed run, or one with planners', () => {
  it('counts the tasks completed before the resume, and the sub-tasks planners add', () => {
    let state = reduce(progressState(), { type: 'run:started', runId: 'r', tasks: 10, resumed: true, alreadyCompleted: 6, at: 0 });
    expect(state.counts.completed).toBe(6);
    state = reduce(state, { type: 'task:planned', taskId: 'p', attempt: 1, subtasks: ['p/a', 'p/b'], depth: 1, at: 1 });
    expect(state.total).toBe(12);
    state = reduce(state, { type: 'task:completed', taskId: 'x', attempt: 1, output: '', usage: { inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0 }, at: 2 });
    expect(state.counts.completed).toBe(7);
  });
});
