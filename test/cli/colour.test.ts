/**
 * How the CLI treats a terminal: NO_COLOR / FORCE_COLOR, TERM=dumb, a terminal of 0 columns, and
 * colours that never change what a line says or how wide it is.
 */
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../machines/protocol.js';
import { colourLine, terminalMode } from '../../src/cli/colour.js';
import { createProgress } from '../../src/cli/progress.js';
import type { TimedRunEvent } from '../../src/swarm.js';

const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, '');

function sink(columns?: number) {
  const writes: string[] = [];
  const out = { write: (text: string) => (writes.push(text), true), on: () => out, ...(columns !== undefined ? { columns } : {}) } as unknown as NodeJS.WritableStream;
  return { out, text: () => writes.join('') };
}

const events = (list: RunEvent[]): TimedRunEvent[] => list.map((e, i) => ({ ...e, at: 1_000 + i * 100 }) as TimedRunEvent);
const run: RunEvent[] = [
  { type: 'run:started', runId: 'r1', tasks: 2, models: { m: { provider: 'p', model: 'x', price: { input: 1, output: 1 } } }, keys: { 'p:aaaa': {} }, budgetUsd: 2 },
  { type: 'task:started', taskId: 'a', attempt: 1, model: 'm' },
  { type: 'task:failed', taskId: 'a', attempt: 1, willRetry: false, error: { code: 'server_error', message: 'boom', retryable: true } },
  { type: 'task:completed', taskId: 'b', attempt: 1, output: 'ok', usage: { inputTokens: 1_000, outputTokens: 1_000, cacheReadTokens: 0, cacheWriteTokens: 0 } },
];

describe('terminalMode', () => {
  const tty = { isTTY: true, columns: 120 };
  it('a terminal gets the live view and colours; a pipe gets neither', () => {
    expect(terminalMode(tty, {})).toEqual({ live: true, colour: true, width: 120 });
    expect(terminalMode({}, {})).toEqual({ live: false, colour: false });
  });
  it('NO_COLOR turns colours off (an empty value does not); FORCE_COLOR turns them on, even on a pipe, and wins', () => {
    expect(terminalMode(tty, { NO_COLOR: '1' }).colour).toBe(false);
    expect(terminalMode(tty, { NO_COLOR: '' }).colour).toBe(true);
    expect(terminalMode({}, { FORCE_COLOR: '1' }).colour).toBe(true);
    expect(terminalMode(tty, { FORCE_COLOR: '0' }).colour).toBe(false);
    expect(terminalMode(tty, { FORCE_COLOR: '1', NO_COLOR: '1' }).colour).toBe(true);
  });
  it('TERM=dumb gets log lines without colours; 0 columns is no width at all', () => {
    expect(terminalMode(tty, { TERM: 'dumb' })).toEqual({ live: false, colour: false, width: 120 });
    expect(terminalMode({ isTTY: true, columns: 0 }, {})).toEqual({ live: true, colour: true });
  });
});

describe('colours', () => {
  it('wrap known words only: the text is the same without them', () => {
    const lines = ['tasks    [####......]  2/5  40.0%  1 completed  1 failed', 'key      p:aaaa  backoff    3 requests  2 rate limited', 'breaker  p/x  open (opened 1 time)', '[1.2s] FAILED   a attempt 1 (boom)', '[1.3s] retry    a #1 in 20 ms (x)'];
    for (const line of lines) {
      const painted = colourLine(line);
      expect(painted).not.toBe(line);
      expect(plain(painted)).toBe(line);
    }
    expect(colourLine(lines[0]!)).toContain('\x1b[31m1 failed\x1b[39m');
    expect(colourLine(lines[1]!)).toContain('\x1b[33mbackoff\x1b[39m');
  });

  it('progress with colour on paints; off (the default) writes no colour code at all', () => {
    for (const tty of [true, false]) {
      const on = sink(80);
      const off = sink(80);
      const a = createProgress({ out: on.out, tty, colour: true, now: () => 0 });
      const b = createProgress({ out: off.out, tty, now: () => 0 });
      for (const e of events(run)) (a.onEvent(e), b.onEvent(e));
      a.finish();
      b.finish();
      expect(on.text()).toMatch(/\x1b\[3[12]m/);
      expect(off.text()).not.toMatch(/\x1b\[[0-9;]*m/);
      expect(plain(on.text())).toBe(off.text());
    }
  });
});

describe('the live view on odd terminals', () => {
  it('a terminal of 0 columns is drawn 80 wide, not cut to 20', () => {
    const { out, text } = sink(0);
    const progress = createProgress({ out, tty: true, now: () => 0 });
    for (const e of events(run)) progress.onEvent(e);
    progress.finish();
    const widest = Math.max(...plain(text()).split('\n').map((l) => l.replace(/\x1b\[[^a-zA-Z]*[a-zA-Z]/g, '').length));
    expect(widest).toBeGreaterThan(40);
    expect(widest).toBeLessThanOrEqual(79);
  });

  it('the budget stated by run:started shows on the cost line (a resume reads no plan file)', () => {
    const { out, text } = sink();
    const progress = createProgress({ out, tty: false });
    for (const e of events(run)) progress.onEvent(e);
    progress.finish();
    expect(text()).toMatch(/of \$2\.00/);
  });
});
