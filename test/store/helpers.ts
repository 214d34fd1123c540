/**
 * Helpers for the store tests: temp dirs, a settable clock, a pid that is surely dead, and child
 * processes that run TypeScript from this repository (through tsx) and talk over stdin/stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Usage } from '../../machines/protocol.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'swarmstate-store-'));
}

/** A clock the test moves by hand: `clock.now()` for the store, `clock.t` to set. */
export function manualClock(start = 1_000_000): { t: number; now: () => number } {
  const clock = { t: start, now: () => clock.t };
  return clock;
}

export function usage(inputTokens: number, outputTokens: number): Usage {
  return { inputTokens, outputTokens, cacheWriteTokens: 0, cacheReadTokens: 0 };
}

/** The pid of a process that has exited (and was reaped). */
export async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  const pid = child.pid!;
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return pid;
}

/** A node child running `code` (an ES module, TypeScript allowed) with `args` as process.argv.slice(1). */
export function tsChild(code: string, args: string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code, '--', ...args], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** The child's stdout as lines, read one at a time; rejects with its stderr if it exits first. */
export function lineReader(child: ChildProcess): () => Promise<string> {
  const lines: string[] = [];
  const waiting: Array<{ resolve: (line: string) => void; reject: (error: Error) => void }> = [];
  let buffer = '';
  let stderr = '';
  let ended = false;
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (let end = buffer.indexOf('\n'); end >= 0; end = buffer.indexOf('\n')) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      const waiter = waiting.shift();
      if (waiter) waiter.resolve(line);
      else lines.push(line);
    }
  });
  child.once('exit', (code) => {
    ended = true;
    for (const waiter of waiting.splice(0)) waiter.reject(new Error(`child exited (${code}): ${stderr}`));
  });
  return () => {
    const line = lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (ended) return Promise.reject(new Error(`child exited: ${stderr}`));
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  };
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}
