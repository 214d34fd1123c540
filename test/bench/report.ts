/**
 * What every benchmark runner shares: a size run in a fresh process (its JSON line back), the
 * machine line of a table, and writing a table into docs/benchmarks.md between its markers.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';

export const DOC = 'docs/benchmarks.md';

export function child(script: string, args: string[], env: Record<string, string> = {}): Record<string, number> {
  const out = execFileSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const last = out.trim().split('\n').pop()!;
  return JSON.parse(last) as Record<string, number>;
}

export function machineLine(): string {
  return `Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${new Date().toISOString().slice(0, 10)}`;
}

export function writeSection(name: string, body: string): void {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  let doc = existsSync(DOC) ? readFileSync(DOC, 'utf8') : '# Benchmarks\n\nWritten by `npm run bench`; each table is replaced when its benchmark runs again.\n';
  const block = `${start}\n${body.trim()}\n${end}`;
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  doc = i >= 0 && j > i ? doc.slice(0, i) + block + doc.slice(j + end.length) : `${doc.trimEnd()}\n\n${block}\n`;
  writeFileSync(DOC, doc);
}
