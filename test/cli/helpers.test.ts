/**
 * The CLI children the tests spawn cannot outlive them: past its timeout a child is killed with
 * SIGKILL, which no handler can catch. The child here hangs before the CLI even starts (a module
 * preloaded through NODE_OPTIONS ignores SIGTERM and never finishes loading), as a CLI stuck in
 * a graceful stop would.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cli, start } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-hung-'));
const hang = join(dir, 'hang.mjs');
writeFileSync(hang, "process.on('SIGTERM', () => {});\nsetInterval(() => {}, 1 << 30);\nawait new Promise(() => {});\n");
const HUNG = { NODE_OPTIONS: `--import=${pathToFileURL(hang).href}` };

// Long enough for the preload to be running however loaded the machine is (a SIGTERM before it
// would end the child by default); far below the test's own timeout, which is what a hung
// child meets without the kill.
const TIMEOUT_MS = 8_000;

describe('a hung CLI child', () => {
  it('run to its end (`cli`) is killed with SIGKILL at its timeout', { timeout: 60_000 }, async () => {
    const r = await cli(['--version'], HUNG, undefined, TIMEOUT_MS);
    expect(r.signal).toBe('SIGKILL');
    expect(r.code).toBe(null);
  });

  it('started to be signalled (`start`) is killed with SIGKILL at its timeout', { timeout: 60_000 }, async () => {
    const { exit } = start(['--version'], HUNG, TIMEOUT_MS);
    expect(await exit).toEqual({ code: null, signal: 'SIGKILL' });
  });
});
