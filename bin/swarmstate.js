#!/usr/bin/env node
// The CLI runs from the build in dist/ (made by `npm ci` / `npm install` through `prepare`).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  console.error('swarmstate: the build is missing (dist/). Run `npm run build` (npm ci runs it for you).');
  process.exit(2);
}
const { main: run } = await import(main.href);
process.exitCode = await run(process.argv.slice(2));
