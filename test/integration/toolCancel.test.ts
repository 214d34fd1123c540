/**
 * An attempt that ends while its tool call is out (its deadline passes) takes the call with it:
 * the bus stops the execution and the tool's handler sees its signal aborted, instead of the
 * tool running on for nobody.
 */
import { describe, expect, it } from 'vitest';
import { createSwarm, type ToolDefinition } from '../../src/index.js';

describe('tool calls of an attempt that ended', () => {
  it('are stopped: the handler sees its signal aborted soon after the deadline', async () => {
    let abortedAt: number | undefined;
    let startedAt: number | undefined;
    const slow: ToolDefinition<{ n: number }> = {
      name: 'slow_write',
      description: 'Takes ten seconds, and writes',
      inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
      annotations: { readOnlyHint: false },
      handler: (_args, { signal }) =>
        new Promise((resolve, reject) => {
          startedAt = Date.now();
          const timer = setTimeout(() => resolve('done'), 10_000);
          signal.addEventListener('abort', () => {
            abortedAt = Date.now();
            clearTimeout(timer);
            reject(new Error('aborted'));
          });
        }),
    };
    const swarm = createSwarm({ tools: [slow], store: false });
    const started = Date.now();
    const result = await swarm.run({
      providers: { p: { type: 'sim' } },
      models: { m: { provider: 'p', model: 'sim-m' } },
      tasks: [{ id: 't', model: 'm', tools: ['slow_write'], timeoutMs: 400, maxRetries: 0, prompt: 'write [[sim:tool slow_write {"n":1}]]' }],
    }).result;
    await swarm.close();
    expect(result.tasks.t).toMatchObject({ status: 'failed', error: { code: 'task_timeout' } });
    expect(startedAt).toBeDefined();
    expect(abortedAt).toBeDefined();
    expect(abortedAt! - started).toBeLessThan(3000);
    expect(result.tools!.failed).toBe(0);
  });
});
