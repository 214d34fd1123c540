/**
 * `swarmstate report <events.ndjson> [--out report.html]`: reads a saved event stream (written by
 * `swarmstate run --events`) and writes the HTML report. Exit codes: 0 written; 2 bad usage, or a
 * file that cannot be read, parsed or written.
 */
import { createReadStream } from 'node:fs';
import { readFile, realpath, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import type { RunResult } from '../../machines/tasks/results.js';
import type { TimedRunEvent } from '../swarm.js';
import { parseJsonText, type JsonTextError } from '../util/jsonText.js';
import { buildReport } from './html.js';

export const REPORT_HELP = `Usage: swarmstate report <events.ndjson> [--out <file.html>] [--result <result.json>] [--title <text>]

Writes a self-contained HTML report of a run from its event stream (swarmstate run --events).

Options:
  -o, --out <file>     Where to write the report (never one of its inputs). Default swarmstate-report.html.
  --result <file>      The run's result (swarmstate run --json), for the final task statuses.
  --title <text>       The page title. Default "swarmstate run <runId>".
  -h, --help           This help.`;

/** A line of an events file that is not a run event: says which line and why. */
export class EventsFileError extends Error {
  readonly code = 'EVENTS_INVALID';
  constructor(
    readonly path: string,
    readonly line: number,
    reason: string,
    /** Where in the line it stops being JSON (1-based), when that is what is wrong. */
    readonly column?: number,
  ) {
    super(`${path}:${line}: ${reason}`);
    this.name = 'EventsFileError';
  }
}

/**
 * Reads an NDJSON event stream: one JSON object per line, blank lines skipped. Throws an
 * EventsFileError naming the line of the first bad one, or the fs error when it cannot be read.
 *
 * @example
 * const events = await readEvents('run.ndjson');
 * await writeFile('report.html', buildReport({ events }));
 */
export async function readEvents(path: string): Promise<TimedRunEvent[]> {
  const events: TimedRunEvent[] = [];
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n += 1;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = parseJsonText(line, path);
    } catch (error) {
      const { column, reason } = error as JsonTextError;
      throw new EventsFileError(path, n, `not valid JSON at column ${column}: ${reason}`, column);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new EventsFileError(path, n, 'expected a run event object');
    const { type, at } = value as { type?: unknown; at?: unknown };
    if (typeof type !== 'string') throw new EventsFileError(path, n, 'a run event needs a string "type"');
    if (typeof at !== 'number' || !Number.isFinite(at)) throw new EventsFileError(path, n, `event "${type}" has no numeric "at" (time in ms): was it written by swarmstate run --events?`);
    events.push(value as TimedRunEvent);
  }
  return events;
}

/** The `report` command; argv is what follows `report`. Returns the exit code. */
export async function reportCommand(argv: string[], io: { out: NodeJS.WritableStream; err: NodeJS.WritableStream } = { out: process.stdout, err: process.stderr }): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        out: { type: 'string', short: 'o' },
        result: { type: 'string' },
        title: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    io.err.write(`swarmstate report: ${(error as Error).message}\n\n${REPORT_HELP}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out.write(`${REPORT_HELP}\n`);
    return 0;
  }
  if (positionals.length !== 1) {
    io.err.write(`swarmstate report: ${positionals.length === 0 ? 'an events file is required' : `one events file, got ${positionals.length}`}\n\n${REPORT_HELP}\n`);
    return 2;
  }
  const path = positionals[0]!;
  const out = values.out ?? 'swarmstate-report.html';
  // Writing the report over one of its own inputs would lose the run's record: refuse before reading.
  const overwritten = await sameFile(out, [path, values.result]);
  if (overwritten !== undefined) {
    io.err.write(`swarmstate report: --out ${out} is the input ${overwritten}: writing the report there would destroy it; choose another --out\n`);
    return 2;
  }
  let events: TimedRunEvent[];
  let result: RunResult | undefined;
  try {
    events = await readEvents(path);
    if (values.result !== undefined) result = parseJsonText(await readFile(values.result, 'utf8'), values.result) as RunResult;
  } catch (error) {
    io.err.write(`swarmstate report: ${describe(error)}\n`);
    return 2;
  }
  if (events.length === 0) {
    io.err.write(`swarmstate report: ${path} holds no events\n`);
    return 2;
  }
  let html: string;
  try {
    html = buildReport({ events, ...(result ? { result } : {}), ...(values.title !== undefined ? { title: values.title } : {}) });
  } catch (error) {
    io.err.write(`swarmstate report: cannot build the report from ${path}${values.result ? ` and ${values.result}` : ''}: ${describe(error)}\n`);
    return 2;
  }
  try {
    await writeFile(out, html);
  } catch (error) {
    io.err.write(`swarmstate report: cannot write ${out}: ${describe(error)}\n`);
    return 2;
  }
  const requests = events.filter((e) => e.type === 'model:request').length;
  io.out.write(`report written to ${out} (${events.length} events, ${requests} model calls)\n`);
  return 0;
}

function describe(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  if (e instanceof EventsFileError) return e.message;
  if (e.code && e.path) return `cannot read ${e.path}: ${e.code}`;
  return e.message ?? String(error);
}

/** The input among `inputs` that `out` names (through links too), if any. */
async function sameFile(out: string, inputs: (string | undefined)[]): Promise<string | undefined> {
  const real = (file: string) => realpath(file).catch(() => resolve(file));
  const target = await real(out);
  for (const input of inputs) if (input !== undefined && (await real(input)) === target) return input;
  return undefined;
}
