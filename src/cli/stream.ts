/**
 * `--stream`: each task's streamed text (`task:delta`) as lines prefixed by the task id.
 *
 * Pieces arrive cut anywhere (mid-word, mid-line) and several tasks stream at once, so each task
 * keeps its unfinished line until the rest of it arrives: only whole lines go out, and a line is
 * never split by another task's. A task's last, unterminated line goes out when its text stops
 * (its turn, attempt or task ends). Pure apart from `write`: no clock, no stream.
 */
import type { RunEvent } from '../../machines/protocol.js';
import { visible, visibleWithTabs } from './terminal.js';

export interface TextLines {
  /** Never throws: the text is a view, it must not take the run down. */
  onEvent(event: RunEvent): void;
  /** Every task's held line goes out (the run ended, or was stopped). Idempotent. */
  finish(): void;
}

interface Held {
  attempt: number;
  turn: number;
  /** The current line so far (no line break yet). */
  line: string;
  /** Whether any of the task's text went out: only then does a restart need saying. */
  said: boolean;
  /** The text starts again (an in-attempt retry of the call, or a new attempt): said before the next line. */
  restart: string | undefined;
}

/**
 * Lines of streamed text for `write`, each `[taskId] text` and ending in a line break; `write`
 * gets one call per batch of whole lines.
 *
 * @example
 * const lines = createTextLines((text) => process.stdout.write(text));
 * run.events.on('*', (_type, event) => lines.onEvent(event));
 */
export function createTextLines(write: (text: string) => void): TextLines {
  const tasks = new Map<string, Held>();
  let broken = false;

  const out = (text: string) => {
    if (broken || text === '') return;
    try {
      write(text);
    } catch {
      broken = true;
    }
  };
  const prefix = (taskId: string) => `[${visible(taskId)}]`;
  const lineOf = (taskId: string, text: string) => {
    const body = visibleWithTabs(text.endsWith('\r') ? text.slice(0, -1) : text);
    return body === '' ? `${prefix(taskId)}\n` : `${prefix(taskId)} ${body}\n`;
  };
  /** The held line goes out on its own (the text it belonged to stopped there). */
  const flush = (taskId: string, held: Held) => {
    if (held.line === '') return;
    out(lineOf(taskId, held.line));
    held.line = '';
    held.said = true;
  };

  const delta = (e: Extract<RunEvent, { type: 'task:delta' }>) => {
    let held = tasks.get(e.taskId);
    if (held === undefined) {
      held = { attempt: e.attempt, turn: e.turn, line: '', said: false, restart: undefined };
      tasks.set(e.taskId, held);
    }
    if (e.attempt !== held.attempt) {
      flush(e.taskId, held);
      held.restart = `attempt ${e.attempt}`;
    } else if (e.turn !== held.turn) {
      // A new turn (after tool calls) is new text, not the rest of the last line.
      flush(e.taskId, held);
    }
    held.attempt = e.attempt;
    held.turn = e.turn;
    if (e.text === '') return;
    let text = '';
    if (held.restart !== undefined) {
      if (held.said) text += `${prefix(e.taskId)} -- ${held.restart}: the text starts again --\n`;
      held.restart = undefined;
    }
    const parts = (held.line + e.text).split('\n');
    held.line = parts.pop()!;
    for (const part of parts) text += lineOf(e.taskId, part);
    if (parts.length > 0) held.said = true;
    out(text);
  };

  const finish = () => {
    for (const [taskId, held] of tasks) flush(taskId, held);
    tasks.clear();
  };

  return {
    finish,
    onEvent(event) {
      try {
        switch (event.type) {
          case 'task:delta':
            delta(event);
            break;
          case 'task:retry': {
            const held = tasks.get(event.taskId);
            if (held === undefined) break;
            flush(event.taskId, held);
            held.restart = `retry ${event.retry}`;
            break;
          }
          case 'task:failed': {
            const held = tasks.get(event.taskId);
            if (held === undefined) break;
            flush(event.taskId, held);
            // A new attempt streams again: its first delta says so (its attempt differs).
            if (!event.willRetry) tasks.delete(event.taskId);
            break;
          }
          case 'task:completed':
          case 'task:cancelled': {
            const held = tasks.get(event.taskId);
            if (held === undefined) break;
            flush(event.taskId, held);
            tasks.delete(event.taskId);
            break;
          }
          case 'run:completed':
            finish();
            break;
          default:
            break;
        }
      } catch {
        // The text is a view: best effort.
      }
    },
  };
}
