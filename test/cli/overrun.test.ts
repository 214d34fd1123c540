/**
 * A budget a call's settlement took over its limit (`budget:overrun`) is said on stderr: the run
 * ends `budget_exceeded` with every task completed, and the line is the only cause a CLI user
 * sees. The built CLI as a child process against an OpenAI-compatible server on loopback that
 * counts 5 million input tokens for a call that reserved less than a hundredth of a cent
 * (its prompt's estimate and its 64 output tokens at $1 per million).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-overrun-'));
let server: Server;
let planFile: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      // A streamed reply, as the adapter asks for: the text, then the usage chunk.
      const chunk = (body: object) => `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'gpt-x', ...body })}\n\n`;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'done' }, finish_reason: null }] }) +
          chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) +
          chunk({ choices: [], usage: { prompt_tokens: 5_000_000, completion_tokens: 10, total_tokens: 5_000_010 } }) +
          'data: [DONE]\n\n',
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  planFile = join(dir, 'plan.json');
  writeFileSync(
    planFile,
    JSON.stringify({
      providers: { p: { type: 'openai', baseURL: `http://127.0.0.1:${port}/v1`, keys: ['sk-overrun-aaaaaaaa'] } },
      // $1 per million: 5,000,000 input tokens cost $5.00, on a $1 run budget.
      models: { m: { provider: 'p', model: 'gpt-x', maxTokens: 64, price: { input: 1, output: 1 } } },
      budget: { usd: 1 },
      tasks: [{ id: 'big', model: 'm', prompt: 'hi' }],
    }),
  );
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const OVERRUN = /^\[\d+\.\ds\] budget {3}big OVERRAN the run budget: a call on m cost \$5\.00 \(\$0\.000097 reserved\); spent \$5\.00 of \$1\.00$/m;

describe('budget:overrun on the CLI', () => {
  it('prints its cause in the progress lines, then the run budget_exceeded', async () => {
    const r = await cli(['run', planFile, '--store', 'memory']);
    expect(r.stderr).toMatch(OVERRUN);
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(/run budget_exceeded: 1\/1 done, 0 in flight, 0 queued, 0 retries, \$5\.00 of \$1\.00$/);
    expect(r.stderr).not.toContain('sk-overrun-aaaaaaaa');
  });

  it('prints the same line with --verbose', async () => {
    const r = await cli(['run', planFile, '--store', 'memory', '--verbose']);
    expect(r.stderr).toMatch(OVERRUN);
  });
});
