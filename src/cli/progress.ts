/**
 * Live progress of a run, from its event stream.
 *
 * Three layers, so tests need no timers: `reduce` folds each event into a `ProgressState`
 * (progressState.ts: no I/O, no clock, the time is the event's `at`), `renderFrame` and `statusLine` turn a state into
 * text, and `createProgress` writes that text: on a terminal a view redrawn in place at most ten
 * times a second; elsewhere (CI, a pipe) one line per notable event and a status line every
 * `intervalMs` of event time.
 */
import type { RunEvent } from '../../machines/protocol.js';
import type { TimedRunEvent } from '../swarm.js';
import { progressState, reduce, type ProgressState } from './progressState.js';
import { formatEventLine, formatInt, renderFrame, stamp, startLine, statusLine } from './format.js';
import { colourLine } from './colour.js';
import { visible } from './terminal.js';

export { etaMs, finishedTasks, renderFrame, statusLine } from './format.js';

export { progressState, reduce } from './progressState.js';
export type { BreakerView, KeyView, ProgressState, ToolTally } from './progressState.js';

// ---------------------------------------------------------------------------------------------
// The writer
// ---------------------------------------------------------------------------------------------

export interface ProgressOptions {
  out: NodeJS.WritableStream;
  /** A terminal gets the live view; anything else gets log lines. */
  tty: boolean;
  /** The clock of the redraw throttle (TTY only). Default Date.now. */
  now?: () => number;
  /** Non-TTY: a status line every this many ms of event time (`at`). Default 5000. */
  intervalMs?: number;
  /** Columns of the terminal. Default: the stream's `columns` (0 counts as unknown), else 80. */
  width?: number;
  /** Shown next to the cost so far. Default: the budget the run's `run:started` states. */
  budgetUsd?: number;
  /** Colour the lines (see `terminalMode` in colour.ts for what decides it). Default false. */
  colour?: boolean;
}

export interface Progress {
  /** Never throws: a broken stream or a strange event must not take the run down. */
  onEvent(event: TimedRunEvent): void;
  /** Draws the last state (TTY: and shows the cursor again). Idempotent. */
  finish(): void;
  /**
   * Lines of someone else's (`--stream`'s text), each ending in a line break, on the same
   * terminal: TTY, kept above the view from its next redraw on (written now, a redraw would
   * overwrite them); log lines, written at once. Not coloured.
   */
  print(lines: string): void;
}

/** Redraws of the live view: at most one per this many ms. */
export const REDRAW_MS = 100;
/** Without events, the live view still redraws this often so the elapsed time moves. */
const HEARTBEAT_MS = 1000;
/** Skipped tasks printed one by one per failed dependency; the rest are counted on one line. */
const SKIPS_SHOWN = 3;

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const CLEAR_TO_EOL = '\x1b[K';
const CLEAR_BELOW = '\x1b[J';
const up = (n: number) => (n > 0 ? `\x1b[${n}A\r` : '\r');

/**
 * Progress of one run on `out`.
 *
 * @example
 * const progress = createProgress({ out: process.stderr, tty: process.stderr.isTTY === true });
 * run.events.on('*', (_type, event) => progress.onEvent(event));
 * const result = await run.result;
 * progress.finish();
 */
export function createProgress(opts: ProgressOptions): Progress {
  const state = progressState();
  const now = opts.now ?? Date.now;
  const intervalMs = opts.intervalMs !== undefined && opts.intervalMs > 0 ? opts.intervalMs : 5000;
  const paint = opts.colour === true ? colourLine : (line: string) => line;
  const budgetOf = () => opts.budgetUsd ?? state.budgetUsd;
  let broken = false;
  let finished = false;

  const write = (text: string) => {
    if (broken || text === '') return;
    try {
      opts.out.write(text);
    } catch {
      broken = true;
    }
  };
  // A stream that fails later (EPIPE when the reader went away) says so with an 'error' event,
  // which would crash the process if nobody listened.
  try {
    opts.out.on?.('error', () => {
      broken = true;
    });
  } catch {
    // Not an emitter: writes are guarded anyway.
  }

  return opts.tty ? liveView() : logLines();

  /** Non-TTY: notable events and a status line per `intervalMs` of event time. */
  function logLines(): Progress {
    let nextStatusAt: number | undefined;
    // A failed task with 1,000 dependents skips them in one burst: a few lines, then a count.
    let skips: { reason: string; shown: number; held: number; at: number } | undefined;
    const flushSkips = () => {
      if (skips && skips.held > 0) write(`${stamp(state, skips.at)} skipped  ... and ${formatInt(skips.held)} more (${visible(skips.reason)})\n`);
      skips = undefined;
    };
    const log = (event: RunEvent, line: string, at: number) => {
      if (event.type !== 'task:skipped') flushSkips();
      else {
        if (skips?.reason !== event.reason) {
          flushSkips();
          skips = { reason: event.reason, shown: 0, held: 0, at };
        }
        if (skips.shown >= SKIPS_SHOWN) {
          skips.held += 1;
          skips.at = at;
          return;
        }
        skips.shown += 1;
      }
      // A line may quote a server's error: its control characters are shown, not obeyed.
      write(`${paint(`${stamp(state, at)} ${visible(line)}`)}\n`);
    };
    const status = (at: number) => {
      flushSkips();
      write(`${paint(visible(statusLine(state, at, budgetOf())))}\n`);
    };
    return {
      onEvent(event) {
        if (finished) return;
        try {
          reduce(state, event);
          const at = Number.isFinite(event.at) ? event.at : (state.lastAt ?? 0);
          if (event.type === 'run:completed') {
            status(at);
            finished = true;
            return;
          }
          const line = event.type === 'run:started' ? startLine(state) : formatEventLine(event);
          if (line !== undefined) log(event, line, at);
          nextStatusAt ??= (state.startedAt ?? at) + intervalMs;
          if (at >= nextStatusAt) {
            status(at);
            // On the interval's grid, however long the stream was quiet.
            nextStatusAt += Math.floor((at - nextStatusAt) / intervalMs + 1) * intervalMs;
          }
        } catch {
          // Progress is best effort.
        }
      },
      finish() {
        if (finished) return;
        finished = true;
        try {
          status(state.lastAt ?? 0);
        } catch {
          // Progress is best effort.
        }
      },
      print: write,
    };
  }

  /** TTY: the frame redrawn in place; final failures and alarms logged above it. */
  function liveView(): Progress {
    let drawn = 0;
    let shown = false;
    let lastDraw = -Infinity;
    let dirty = false;
    let timer: ReturnType<typeof setInterval> | undefined;
    const above: string[] = [];
    const restore = () => write(SHOW_CURSOR);

    /** One write per frame: back to the frame's top, each line overwritten then cleared to its end. */
    const draw = (t: number, tail = '') => {
      const columns = opts.width ?? (opts.out as { columns?: number }).columns;
      // A terminal that says it has 0 columns (or nothing) is taken as 80 wide, not as 20.
      const width = Math.max(20, columns !== undefined && columns > 0 ? columns : 80);
      // The frame stays one column short of the width, so no line wraps and `up(drawn)` is exact.
      const frame = renderFrame(state, t, width - 1, budgetOf()).map(paint);
      const lines = [...above.splice(0), ...frame];
      write(`${shown ? up(drawn) : HIDE_CURSOR}${lines.map((l) => `${l}${CLEAR_TO_EOL}\n`).join('')}${CLEAR_BELOW}${tail}`);
      shown = true;
      drawn = frame.length;
      lastDraw = t;
      dirty = false;
    };
    const drawIfDue = () => {
      try {
        const t = now();
        if ((dirty && t - lastDraw >= REDRAW_MS) || t - lastDraw >= HEARTBEAT_MS) draw(t);
      } catch {
        // Progress is best effort.
      }
    };

    return {
      onEvent(event) {
        if (finished) return;
        try {
          reduce(state, event);
          if (isAlarm(event)) {
            const line = formatEventLine(event);
            if (line) above.push(paint(`${stamp(state, event.at)} ${visible(line)}`));
          }
          dirty = true;
          const t = now();
          if (t - lastDraw >= REDRAW_MS) draw(t);
          if (timer === undefined) {
            timer = setInterval(drawIfDue, REDRAW_MS);
            timer.unref?.();
            process.once('exit', restore);
          }
        } catch {
          // Progress is best effort.
        }
      },
      finish() {
        if (finished) return;
        finished = true;
        if (timer !== undefined) clearInterval(timer);
        process.off('exit', restore);
        try {
          draw(now(), SHOW_CURSOR);
        } catch {
          restore();
        }
      },
      print(lines) {
        if (lines === '') return;
        if (finished) return write(lines);
        // Each keeps its own line above the frame: the frame's line breaks are the ones drawn.
        for (const line of lines.split('\n').slice(0, -1)) above.push(line);
        dirty = true;
      },
    };
  }
}

/** What stays on a terminal above the live view: what a person must not miss. */
function isAlarm(event: RunEvent): boolean {
  if (event.type === 'task:failed') return !event.willRetry;
  return ['key:revoked', 'key:set-aside', 'budget:overrun', 'breaker:open', 'approval:requested', 'approval:decided', 'run:cancelled'].includes(event.type);
}
