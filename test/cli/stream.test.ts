/**
 * `--stream`: each task's streamed text as whole lines prefixed by its task id. The line buffer
 * on pieces cut anywhere and interleaved (pure), its place above the live view, and the built CLI
 * as a child process (the build the global setup keeps current) against the embedded simulator.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../machines/protocol.js';
import { createTextLines } from '../../src/cli/stream.js';
import { createProgress } from '../../src/cli/progress.js';
import { cli } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-stream-'));

const delta = (taskId: string, text: string, turn = 0, attempt = 1): RunEvent => ({ type: 'task:delta', taskId, attempt, turn, text });
const completed = (taskId: string): RunEvent => ({ type: 'task:completed', taskId, attempt: 1, output: '', usage: { inputTokens: 0, outputTokens: 0, cacheWriteTokens: 0, cacheReadTokens: 0 } });

function collect() {
  const writes: string[] = [];
  const lines = createTextLines((text) => void writes.push(text));
  return { lines, writes, text: () => writes.join('') };
}

describe('the line buffer', () => {
  it('prints whole lines only, each with its task id, however two tasks\' pieces interleave', () => {
    const { lines, writes, text } = collect();
    for (const e of [delta('a', 'alpha o'), delta('b', 'be'), delta('a', 'ne\nalpha tw'), delta('b', 'ta one\n'), delta('a', 'o\n'), delta('b', '\nbeta three')]) lines.onEvent(e);
    // Nothing half: every write is whole lines.
    for (const w of writes) expect(w.endsWith('\n')).toBe(true);
    expect(text()).toBe('[a] alpha one\n[b] beta one\n[a] alpha two\n[b]\n');
    // A task's last line has no break: it goes out when the task ends.
    lines.onEvent(completed('b'));
    expect(text().endsWith('[b] beta three\n')).toBe(true);
    lines.onEvent(delta('a', 'tail'));
    lines.finish();
    expect(text().endsWith('[a] tail\n')).toBe(true);
    lines.finish();
    expect(writes.join('').match(/tail/g)).toHaveLength(1);
  });

  it('ends a line at a new turn, says when the text starts again, and shows control characters', () => {
    const { lines, text } = collect();
    lines.onEvent(delta('a', 'I will look'));
    lines.onEvent(delta('a', 'Found it\r\n', 1));
    lines.onEvent(delta('a', 'half a li'));
    lines.onEvent({ type: 'task:retry', taskId: 'a', attempt: 1, retry: 1, delayMs: 5, error: { code: 'overloaded', message: 'x', retryable: true } });
    lines.onEvent(delta('a', 'again\n', 1));
    lines.onEvent({ type: 'task:failed', taskId: 'a', attempt: 1, error: { code: 'network', message: 'x', retryable: true }, willRetry: true });
    lines.onEvent(delta('a', '\x1b]52;c;aGk=\x07\tok\n', 0, 2));
    lines.onEvent(delta('x\x1b[2J', 'y\n'));
    lines.onEvent(delta('c', 'see \u202Etxt.exe\n'));
    expect(text()).toBe(
      [
        '[a] I will look',
        '[a] Found it',
        '[a] half a li',
        '[a] -- retry 1: the text starts again --',
        '[a] again',
        '[a] -- attempt 2: the text starts again --',
        '[a] \\e]52;c;aGk=\\x07\tok',
        '[x\\e[2J] y',
        '[c] see \\u202etxt.exe',
        '',
      ].join('\n'),
    );
  });

  it('never throws, even when its writer does', () => {
    const lines = createTextLines(() => {
      throw new Error('EPIPE');
    });
    expect(() => lines.onEvent(delta('a', 'x\n'))).not.toThrow();
    expect(() => lines.onEvent(null as unknown as RunEvent)).not.toThrow();
    expect(() => lines.finish()).not.toThrow();
  });
});

describe('on a terminal with the live view', () => {
  it('keeps the text lines above the frame, where the next redraw does not overwrite them', () => {
    let t = 0;
    const writes: string[] = [];
    const out = { write: (text: string) => (writes.push(text), true), on: () => out } as unknown as NodeJS.WritableStream;
    const progress = createProgress({ out, tty: true, now: () => t, width: 80 });
    progress.onEvent({ type: 'run:started', runId: 'r1', tasks: 1, models: { m: { provider: 'p', model: 'm' } }, at: 0 });
    const lines = createTextLines((text) => progress.print(text));
    t = 50;
    lines.onEvent(delta('a', 'one\ntwo\nth'));
    // Not written between frames: the next frame would draw over it.
    expect(writes).toHaveLength(1);
    t = 200;
    progress.onEvent({ type: 'task:started', taskId: 'a', attempt: 1, model: 'm', at: 200 });
    const frame = writes.at(-1)!.split('\n');
    const height = writes[0]!.split('\n').length - 1;
    expect(frame.slice(0, 2)).toEqual([`\x1b[${height}A\r[a] one\x1b[K`, '[a] two\x1b[K']);
    expect(frame[2]).toMatch(/^swarmstate run r1/);
    t = 400;
    progress.onEvent({ type: 'task:queued', taskId: 'b', at: 400 });
    expect(writes.at(-1)!.startsWith(`\x1b[${frame.length - 3}A\r`)).toBe(true);
    expect(writes.at(-1)).not.toContain('[a]');
    lines.finish();
    progress.finish();
    expect(writes.at(-1)).toContain('[a] th\x1b[K\nswarmstate run r1');
  });
});

describe('swarmstate run --stream', () => {
  // Two tasks streaming at once, at 100 tokens a second: their pieces arrive cut mid-line.
  const plan = {
    providers: { sim: { type: 'sim', sim: { tokensPerSecond: 100 } } },
    models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 256 } },
    tasks: [
      { id: 'alpha', model: 'fast', prompt: '[[sim:reply Alpha opens the first line\nand its second line is here\nthe third ends it]]' },
      { id: 'beta', model: 'fast', prompt: '[[sim:reply Beta says one thing\n\nthen, after a blank line, another without a break]]' },
    ],
  };
  const file = join(dir, 'plan.json');
  writeFileSync(file, JSON.stringify(plan));
  const outputsOf = (events: string) =>
    Object.fromEntries(
      readFileSync(events, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; taskId: string; output: string })
        .filter((e) => e.type === 'task:completed')
        .map((e) => [e.taskId, e.output]),
    );

  it('prints each task\'s text as prefixed lines on stdout, complete, and nothing of it without the flag', async () => {
    const events = join(dir, 'stream.ndjson');
    const r = await cli(['run', file, '--stream', '--store', 'memory', '--events', events]);
    expect(r.code).toBe(0);
    const outputs = outputsOf(events);
    expect(Object.keys(outputs).sort()).toEqual(['alpha', 'beta']);
    for (const id of ['alpha', 'beta']) {
      const mine = r.stdout
        .split('\n')
        .filter((l) => l.startsWith(`[${id}]`))
        .map((l) => l.slice(id.length + 3));
      expect(mine.join('\n'), id).toBe(outputs[id]);
    }
    // The text goes to stdout only; the summary table follows it.
    expect(r.stderr).not.toContain('Alpha opens');
    expect(r.stdout).toMatch(/\n\[(alpha|beta)\] [^\n]*\nstatus +completed/);
    // The events file has the pieces too.
    expect(readFileSync(events, 'utf8')).toContain('"type":"task:delta"');

    const plain = join(dir, 'plain.ndjson');
    const without = await cli(['run', file, '--store', 'memory', '--events', plain]);
    expect(without.code).toBe(0);
    expect(outputsOf(plain)).toEqual(outputs);
    for (const piece of ['Alpha', 'second line', 'Beta', 'blank line']) {
      expect(without.stdout).not.toContain(piece);
      expect(without.stderr).not.toContain(piece);
    }
    expect(readFileSync(plain, 'utf8')).not.toContain('task:delta');
  });

  it('refuses --json with --stream: both would write stdout', async () => {
    for (const args of [['run', file], ['resume', 'someRun']]) {
      const r = await cli([...args, '--stream', '--json', '--store', 'memory']);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`swarmstate ${args[0]}: --stream and --json both write to stdout: give one of them (with --events <file>, the file gets the task:delta events too) (see swarmstate ${args[0]} --help)\n`);
    }
  });
});
