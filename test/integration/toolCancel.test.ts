/**
 * An attempt that ends while its tool call is out (its deadline passes) takes the call with it:
 * the bus stops the execution and the tool's handler sees its signal aborted, instead of the
 * tool running on for nobody.
 */
import { describe, expect, it } from 'vitest';
import { countTokens } from '../../src/sim/tokenizer.js';
import { createSwarm, type RunEvent, type ToolDefinition } from '../../src/index.js';

describe('tool calls of an attempt that ended', () => {
  it('are stopped: the handler sees its signal aborted before the run has ended', async () => {
    let aborted = false;
    let started = false;
    let finished = false;
    const slow: ToolDefinition<{ n: number }> = {
      name: 'slow_write',
      description: 'Takes ten seconds, and writes',
      inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
      annotations: { readOnlyHint: false },
      handler: (_args, { signal }) =>
        new Promise((resolve, reject) => {
          started = true;
          const timer = setTimeout(() => {
            finished = true;
            resolve('done');
          }, 10_000);
          signal.addEventListener('abort', () => {
            aborted = true;
            clearTimeout(timer);
            reject(new Error('aborted'));
          });
        }),
    };
    countTokens('warm'); // the simulator's tokenizer loads once per process: not inside the attempt's deadline
    const swarm = createSwarm({ tools: [slow], store: false });
    const run = swarm.run({
      providers: { p: { type: 'sim' } },
      models: { m: { provider: 'p', model: 'sim-m' } },
      tasks: [{ id: 't', model: 'm', tools: ['slow_write'], timeoutMs: 2_000, maxRetries: 0, prompt: 'write [[sim:tool slow_write {"n":1}]]' }],
    });
    const events: RunEvent[] = [];
    run.events.on('*', (_type, e) => events.push(e as RunEvent));
    const result = await run.result;
    // The handler was stopped and never ran to its end; and it was the bus that stopped it, for
    // the attempt that ended (a cancelled tool:result before the run's end), not the run's own
    // shutdown, which stops whatever is left anyway.
    expect([started, aborted, finished]).toEqual([true, true, false]);
    const cancelled = events.findIndex((e) => e.type === 'tool:result' && e.name === 'slow_write' && e.cancelled === true);
    expect(cancelled).toBeGreaterThanOrEqual(0);
    expect(cancelled).toBeLessThan(events.findIndex((e) => e.type === 'run:completed'));
    await swarm.close();
    expect(result.tasks.t).toMatchObject({ status: 'failed', error: { code: 'task_timeout' } });
    expect(result.tools!.failed).toBe(0);
  });
});
