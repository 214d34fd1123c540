/**
 * Text from outside (a server's error, a plan's strings) reaches the terminal with its control
 * characters shown, not obeyed: in the live view, the log lines, the summary and the CLI's errors.
 */
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/tasks/results.js';
import { createProgress } from '../../src/cli/progress.js';
import { formatSummaryTable } from '../../src/cli/summary.js';
import { errorText, jsonForTerminal, visible, visibleLines, visibleWithTabs } from '../../src/cli/terminal.js';
import { PlanValidationError } from '../../src/plan/index.js';
import type { TimedRunEvent } from '../../src/swarm.js';

/** Clear screen, window title, OSC 52 clipboard write, a CR overwriting the line, a C1 CSI, BEL. */
const HOSTILE = 'bad\x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x07\rOK\u009b31m\nnext';

/** The CLI's own sequences: cursor hide/show, clear to the end of the line or below, up N lines. */
const OWN = /\x1b\[\?25[lh]|\x1b\[K|\x1b\[J|\x1b\[\d+A\r/g;
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

function sink() {
  const writes: string[] = [];
  const out = { write: (text: string) => (writes.push(text), true), on: () => out } as unknown as NodeJS.WritableStream;
  return { out, text: () => writes.join('') };
}

const failedEvents = (): TimedRunEvent[] =>
  (
    [
      { type: 'run:started', runId: 'r1', tasks: 2, models: { fast: { provider: 'p', model: 'm\x1b[2J' } }, keys: { 'p:aaaa': {} } },
      { type: 'task:started', taskId: 'a', attempt: 1, model: 'fast' },
      { type: 'task:failed', taskId: 'a', attempt: 1, error: { code: 'bad_request', message: HOSTILE, retryable: false }, willRetry: false },
      { type: 'task:skipped', taskId: 'b', reason: `depends on "a", which failed: ${HOSTILE}` },
      { type: 'breaker:open', route: 'p/m\x1b[2J', failures: 5, cooldownMs: 1000 },
      { type: 'run:cancelled', reason: HOSTILE },
      { type: 'run:completed', status: 'partial' },
    ] satisfies RunEvent[]
  ).map((e, i) => ({ ...e, at: i * 10 }) as TimedRunEvent);

describe('visible', () => {
  it('shows every C0 and C1 control and DEL as an escape; visibleLines keeps the line breaks', () => {
    expect(visible(HOSTILE)).toBe('bad\\e[2J\\e]0;pwned\\x07\\e]52;c;ZWNobyBoaQ==\\x07\\rOK\\x9b31m\\nnext');
    expect(visible('tab\there\x7f\x00')).toBe('tab\\there\\x7f\\x00');
    expect(visibleLines('one\ntwo\r\x1b[2J')).toBe('one\ntwo\\r\\e[2J');
    expect(visible('plain text, ünïcode ✓')).toBe('plain text, ünïcode ✓');
  });

  it('shows the bidi and invisible format characters as escapes, in every form; keeps joiners', () => {
    // A right-to-left override makes `txt.exe` of `exe.txt` on screen; isolates and marks do likewise.
    const spoof = 'invoice\u202Etxt.exe \u2066a\u2069 \u200E\u200F\u061C \u202A\u202B\u202C\u202D \u2067\u2068 \u200B\uFEFF\u2060\u00AD \u2028\u2029 \u{E0041}';
    const shown = 'invoice\\u202etxt.exe \\u2066a\\u2069 \\u200e\\u200f\\u061c \\u202a\\u202b\\u202c\\u202d \\u2067\\u2068 \\u200b\\ufeff\\u2060\\u00ad \\u2028\\u2029 \\u{e0041}';
    expect(visible(spoof)).toBe(shown);
    expect(visibleLines(`${spoof}\n`)).toBe(`${shown}\n`);
    expect(visibleWithTabs(`\t${spoof}`)).toBe(`\t${shown}`);
    // Joiners shape scripts and emoji: a family emoji and a Persian word are left as they are.
    expect(visible('\u{1F468}\u200D\u{1F469}\u200D\u{1F467} \u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645')).toBe('\u{1F468}\u200D\u{1F469}\u200D\u{1F467} \u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645');
  });

  it('prints an error on one line, and an invalid plan one escaped issue per line', () => {
    expect(errorText(new Error(HOSTILE))).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    const plan = new PlanValidationError([{ path: 'tasks[0].model', message: `unknown model "x${HOSTILE}"` }, { path: 'tasks[1].id', message: 'bad' }]);
    const lines = errorText(plan).split('\n');
    expect(lines).toEqual(['invalid plan: 2 problems, fix them and run again', expect.stringMatching(/^tasks\[0\]\.model: unknown model "xbad\\e\[2J.*\\nnext"$/), 'tasks[1].id: bad']);
  });

  it('leaves JSON parsing to the same value, with DEL and C1 escaped as JSON does C0', () => {
    const value = { message: HOSTILE, name: 'a\u202Eb\u{E0041}\u200D' };
    const text = jsonForTerminal(value);
    expect(text).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e\u{e0041}]/u);
    expect(text).toContain('"a\\u202eb\\udb40\\udc41\u200D"');
    expect(JSON.parse(text)).toEqual(value);
  });
});

describe('at the terminal', () => {
  it('the live view shows a server error escaped above the frame, and no sequence but its own', () => {
    let t = 0;
    const { out, text } = sink();
    const progress = createProgress({ out, tty: true, now: () => (t += 200), width: 100 });
    for (const event of failedEvents()) progress.onEvent(event);
    progress.finish();
    const written = text();
    expect(written.replace(OWN, '')).not.toMatch(CONTROL_BUT_NEWLINE);
    expect(written).toContain('FAILED   a attempt 1 (bad_request: bad\\e[2J\\e]0;pwned\\x07');
    expect(written).toContain('breaker  p/m\\e[2J');
  });

  it('the log lines show it escaped, one line per event', () => {
    const { out, text } = sink();
    const progress = createProgress({ out, tty: false });
    for (const event of failedEvents()) progress.onEvent(event);
    progress.finish();
    const written = text();
    expect(written).not.toMatch(CONTROL_BUT_NEWLINE);
    expect(written.split('\n').filter((l) => l.includes('pwned'))).toHaveLength(3);
    expect(written).toContain('run cancelled: bad\\e[2J');
  });

  it('the summary shows failures and names escaped, its columns still aligned', () => {
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const result: RunResult = {
      runId: 'r1',
      status: 'partial',
      tasks: {
        a: { id: 'a', status: 'failed', attempts: 1, model: 'fast', usage, requests: 1, retries: 0, error: { code: 'bad_request', message: HOSTILE, retryable: false } },
      },
      totals: { tasks: 1, completed: 0, failed: 1, skipped: 0, cancelled: 0, containers: 0, attempts: 1, requests: 1, retries: 0, usage, durationMs: 10 },
    };
    const table = formatSummaryTable(result, failedEvents());
    expect(table).not.toMatch(CONTROL_BUT_NEWLINE);
    expect(table).toContain('failed a: bad_request: bad\\e[2J');
    expect(table).toMatch(/^fast +p\/m\\e\[2J +1 /m);
  });
});
