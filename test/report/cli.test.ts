/**
 * Reading a saved event stream and the `report` command: blank lines skipped, a bad line named by
 * its number, exit 2 for bad usage or a file that cannot be read.
 */
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventsFileError, readEvents, reportCommand } from '../../src/report/index.js';

function sink() {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return { stream, text: () => text };
}

async function runReport(argv: string[]) {
  const out = sink();
  const err = sink();
  const code = await reportCommand(argv, { out: out.stream, err: err.stream });
  return { code, out: out.text(), err: err.text() };
}

const lines = [
  { type: 'run:started', runId: 'r-cli', tasks: 1, keys: { 'p:k': { rpm: 60 } }, at: 1000 },
  { type: 'model:request', taskId: 'a.b', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:k', at: 1010 },
  { type: 'model:response', taskId: 'a.b', attempt: 1, turn: 0, provider: 'p', model: 'm', keyId: 'p:k', usage: { inputTokens: 1, outputTokens: 1, cacheWriteTokens: 0, cacheReadTokens: 0 }, at: 1090 },
  { type: 'run:completed', status: 'completed', at: 1100 },
].map((e) => JSON.stringify(e));

describe('readEvents and swarmstate report', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'swarmstate-report-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));
  const file = async (name: string, text: string) => {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  };

  it('reads one event per line and skips blank lines', async () => {
    const path = await file('ok.ndjson', `${lines[0]}\n\n${lines.slice(1).join('\r\n')}\n   \n`);
    const events = await readEvents(path);
    expect(events.map((e) => e.type)).toEqual(['run:started', 'model:request', 'model:response', 'run:completed']);
  });

  it('names the line of bad JSON', async () => {
    const path = await file('bad.ndjson', `${lines[0]}\n\n{"type":"task:queued",\n`);
    const error = await readEvents(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EventsFileError);
    expect((error as EventsFileError).line).toBe(3);
    expect((error as EventsFileError).column).toBe(23);
    expect((error as Error).message).toBe(`${path}:3: not valid JSON at column 23: Expected double-quoted property name`);
  });

  it('refuses a line that is not a timed run event', async () => {
    await expect(readEvents(await file('array.ndjson', '[1,2]\n'))).rejects.toThrow(/:1: expected a run event object/);
    await expect(readEvents(await file('notype.ndjson', '{"at":1}\n'))).rejects.toThrow(/:1: a run event needs a string "type"/);
    await expect(readEvents(await file('noat.ndjson', `${lines[0]}\n{"type":"task:queued","taskId":"a"}\n`))).rejects.toThrow(/:2: event "task:queued" has no numeric "at"/);
  });

  it('writes the report where --out says and exits 0', async () => {
    const events = await file('run.ndjson', lines.join('\n'));
    const out = join(dir, 'report.html');
    const r = await runReport([events, '--out', out, '--title', 'Nightly <run>']);
    expect(r.code).toBe(0);
    expect(r.out).toBe(`report written to ${out} (4 events, 1 model calls)\n`);
    const html = await readFile(out, 'utf8');
    expect(html).toContain('<title>Nightly &lt;run&gt;</title>');
    expect(html.split('data-call="').length - 1).toBe(1);
  });

  it('uses the result file for the final statuses when given', async () => {
    const events = await file('run2.ndjson', lines.join('\n'));
    const result = await file('result.json', JSON.stringify({ runId: 'r-cli', status: 'completed', tasks: { 'a.b': { id: 'a.b', status: 'completed', attempts: 1, model: 'x', usage: {}, requests: 1, retries: 0, costUsd: 0.5 } }, totals: { tasks: 1, completed: 1, failed: 0, skipped: 0, cancelled: 0, containers: 0, attempts: 1, requests: 1, retries: 0, usage: {}, durationMs: 100, costUsd: 0.5 } }));
    const out = join(dir, 'with-result.html');
    expect((await runReport([events, '-o', out, '--result', result])).code).toBe(0);
    expect(await readFile(out, 'utf8')).toContain('$0.5000');
  });

  it('refuses an --out that names its events or result file (through a link too), and leaves it as it was', async () => {
    const events = await file('keep.ndjson', `${JSON.stringify({ type: 'run:started', at: 1 })}\n`);
    const before = await readFile(events, 'utf8');
    for (const out of [events, join(dir, '.', 'keep.ndjson')]) {
      const r = await runReport([events, '--out', out]);
      expect(r.code).toBe(2);
      expect(r.err).toContain(`--out ${out} is the input ${events}`);
    }
    const link = join(dir, 'link.ndjson');
    await symlink(events, link);
    expect((await runReport([link, '--out', events])).code).toBe(2);
    const result = await file('keep.json', '{}');
    const r = await runReport([events, '--result', result, '-o', result]);
    expect(r.code).toBe(2);
    expect(await readFile(result, 'utf8')).toBe('{}');
    expect(await readFile(events, 'utf8')).toBe(before);
  });

  it('exits 2 without a file, with two files, with an unknown flag, or an unreadable or bad file', async () => {
    const none = await runReport([]);
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/an events file is required/);
    expect((await runReport(['a', 'b'])).code).toBe(2);
    expect((await runReport(['a', '--nope'])).code).toBe(2);
    const missing = await runReport([join(dir, 'missing.ndjson'), '--out', join(dir, 'x.html')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/cannot read .*missing\.ndjson: ENOENT/);
    const bad = await runReport([await file('bad2.ndjson', 'nope\n'), '--out', join(dir, 'y.html')]);
    expect(bad.code).toBe(2);
    expect(bad.err).toBe(`swarmstate report: ${join(dir, 'bad2.ndjson')}:1: not valid JSON at column 1: Unexpected token 'o'\n`);
    const empty = await runReport([await file('empty.ndjson', '\n'), '--out', join(dir, 'z.html')]);
    expect(empty.code).toBe(2);
    expect(empty.err).toMatch(/holds no events/);
  });

  it('prints its help and exits 0 with --help', async () => {
    const r = await runReport(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^Usage: swarmstate report <events\.ndjson>/);
  });
});
