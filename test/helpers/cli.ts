/**
 * The CLI as the tests drive it: a child process running bin/swarmstate.js (on the build in dist/,
 * which the suite's global setup, test/setup/build.ts, makes current), to the end (`cli`) or to be
 * watched and signalled (`start`).
 */
import { execFile, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const exec = promisify(execFile);
/** Absolute, so a test may run the CLI in another working directory. */
const BIN = fileURLToPath(new URL('../../bin/swarmstate.js', import.meta.url));

/** A child still running after this long is killed: below the suite's 180 s test timeout. */
const CHILD_TIMEOUT_MS = 170_000;

/**
 * The CLI run to its end: its exit code (null when a signal ended it, then named in `signal`) and
 * its output.
 * Past `timeoutMs` it is killed with SIGKILL, which it cannot catch: SIGTERM would start a
 * graceful stop that a hung child may never finish, and it would outlive the test.
 */
export async function cli(args: string[], env: Record<string, string> = {}, cwd?: string, timeoutMs = CHILD_TIMEOUT_MS) {
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], {
      timeout: timeoutMs,
      killSignal: 'SIGKILL',
      env: { ...process.env, ...env },
      ...(cwd !== undefined ? { cwd } : {}),
    });
    return { code: 0, stdout, stderr } as { code: number | null; signal?: NodeJS.Signals; stdout: string; stderr: string };
  } catch (error) {
    const e = error as { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };
    // `signal` only when one ended it, so tests comparing the whole answer need not name it.
    return { code: e.code, ...(e.signal ? { signal: e.signal } : {}), stdout: e.stdout, stderr: e.stderr };
  }
}


/** Resolves once `check` holds, looking again every 25 ms (no fixed wait: it watches). */
export async function until(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The CLI as a child process to signal: its output so far, and its exit (killed past `timeoutMs`, as `cli`'s). */
export function start(args: string[], env: Record<string, string> = {}, timeoutMs = CHILD_TIMEOUT_MS) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += d));
  child.stderr.on('data', (d) => (out.stderr += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return { child, out, exit };
}

/**
 * The CLI with one of its output pipes closed before it writes anything (as `| head` does once it
 * has its lines): the reader of `closed` is destroyed at once; the other stream is collected.
 */
export function withClosedPipe(args: string[], closed: 'stdout' | 'stderr', env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], timeout: CHILD_TIMEOUT_MS, killSignal: 'SIGKILL' });
  child[closed].destroy();
  const open = closed === 'stdout' ? child.stderr : child.stdout;
  let text = '';
  open.on('data', (d) => (text += d));
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; text: string }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, text })));
}

/**
 * A two-task plan whose first call takes a minute (`a`, then `b` after it), written to `file`: a
 * run of it is in flight, its first model call sent, for as long as a test needs to look or signal.
 */
export function slowPlanFile(file: string): string {
  const plan = {
    providers: { sim: { type: 'sim', sim: { ttftMs: 60_000 } } },
    models: { fast: { provider: 'sim', model: 'sim-fast', maxTokens: 64 } },
    tasks: [
      { id: 'a', model: 'fast', prompt: 'slow' },
      { id: 'b', model: 'fast', prompt: 'after {{a}}', deps: ['a'] },
    ],
  };
  writeFileSync(file, JSON.stringify(plan));
  return file;
}
