#!/usr/bin/env node
/**
 * `npm run test:stress`: the whole suite while two busy processes keep both cores loaded, as on
 * a shared CI runner or a developer's laptop mid-build. A test that passes only on an idle
 * machine (a fixed sleep, a bound on elapsed time) fails here. Arguments go to `vitest run`.
 * The burners are killed when vitest ends, or when this script is interrupted.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

// vitest exports no path to its CLI: find it next to its package.json.
const vitest = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
const BURNERS = 2;
const burners = Array.from({ length: BURNERS }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
const stopBurners = () => {
  for (const b of burners) if (b.exitCode === null && b.signalCode === null) b.kill('SIGKILL');
};
process.on('exit', stopBurners);

console.error(`test:stress: ${BURNERS} CPU-burning processes (pids ${burners.map((b) => b.pid).join(', ')}) run beside the suite`);
const run = spawn(process.execPath, [vitest, 'run', ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    run.kill(signal);
    stopBurners();
  });
}
run.on('exit', (code, signal) => {
  stopBurners();
  process.exit(code ?? (signal ? 1 : 0));
});
