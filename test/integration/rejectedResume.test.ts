/**
 * Rejected answers survive a crash: a run stopped right after an attempt's answer failed its
 * schema resumes that task with the `<rejected-answer>` feedback the uninterrupted run would have
 * sent, and a task that failed for good keeps its last answer in a resumed run's result and in
 * `swarmstate show`. Real SQLite files, the simulator over loopback behind a recording proxy (the
 * request bodies as they went over the wire).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, SqliteStore, type RunEvent } from '../../src/index.js';
import { startSim, type SimServer } from '../../src/sim/index.js';
import { cli } from '../helpers/cli.js';
import { recordingProxy, type RecordedRequest } from '../helpers/recordingProxy.js';

const schema = {
  type: 'object',
  properties: { title: { type: 'string', minLength: 3 } },
  required: ['title'],
  additionalProperties: false,
};

let dir: string;
let sim: SimServer;
let proxy: Awaited<ReturnType<typeof recordingProxy>>;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-rejected-'));
  sim = await startSim({ seed: 4 });
  proxy = await recordingProxy(sim.url);
});
afterAll(async () => {
  await proxy.close();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

const planOf = (tasks: unknown[]) => ({
  providers: { sim: { type: 'sim', baseURL: proxy.url, sim: { protocol: 'anthropic' }, cache: false } },
  models: { fast: { provider: 'sim', model: 'sim-anthropic', maxTokens: 128 } },
  tasks,
});
const options = { seed: 1, backoff: { baseMs: 1, maxMs: 2 } };
const requestsOf = (taskId: string) => proxy.requests.filter((r: RecordedRequest) => r.call.split(';')[0] === taskId);

type Failed = Extract<RunEvent, { type: 'task:failed' }>;

describe('a rejected answer in the journal', () => {
  it('a task resumed after its answer was rejected retries with the rejected answer and its problems, as the uninterrupted run does', async () => {
    const file = join(dir, 'retry.db');
    const task = (id: string) => ({ id, model: 'fast', prompt: `Extract the title. [[sim:invalid 1 ${id}]]`, output: { schema }, maxRetries: 2 });

    // The uninterrupted run: its second request is the reference.
    const clean = createSwarm({ ...options, store: false });
    const reference = await clean.run(planOf([task('reference-task')])).result;
    await clean.close();
    expect(reference.tasks['reference-task']).toMatchObject({ status: 'completed', attempts: 2 });
    const expected = requestsOf('reference-task')[1]!;

    // Stopped as soon as the first answer is rejected (the retry may have left: it is not counted).
    const first = createSwarm({ ...options, store: file });
    const run = first.run(planOf([task('resumed-task')]));
    const failures: Failed[] = [];
    run.events.on('task:failed', (e) => {
      failures.push(e);
      run.cancel('stopped after the rejected answer');
    });
    expect((await run.result).status).toBe('cancelled');
    await first.close();
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ error: { code: 'invalid_output' }, willRetry: true });
    expect(failures[0]!.output).toContain('simulated invalid output 1 of 1');

    const again = createSwarm({ ...options, store: file });
    const result = await again.resume(run.id).result;
    await again.close();
    expect(result.tasks['resumed-task']).toMatchObject({ status: 'completed', output: { title: expect.any(String) } });
    // The resumed attempt's request (by its attempt number: a retry the cancel cut short may have reached the proxy too).
    const last = result.tasks['resumed-task']!.attempts;
    const resumed = requestsOf('resumed-task').filter((r) => r.call.split(';')[1] === String(last));
    expect(resumed).toHaveLength(1);
    const sent = JSON.stringify(resumed[0]!.body.messages);
    expect(sent).toContain('<rejected-answer>');
    expect(sent).toContain('the answer is not valid JSON');
    expect(sent).toContain('simulated invalid output 1 of 1');
    expect(sent).toBe(JSON.stringify(expected.body.messages).replaceAll('reference-task', 'resumed-task'));
  });

  it('a task that failed for good keeps its last answer in a resumed run\'s result and in swarmstate show', async () => {
    const file = join(dir, 'failed.db');
    const plan = planOf([
      { id: 'bad', model: 'fast', prompt: 'Extract the title. [[sim:reply {"title": 7}]]', output: { schema }, maxRetries: 0 },
      { id: 'other', model: 'fast', prompt: 'Something else.' },
    ]);
    const first = createSwarm({ ...options, store: file });
    const run = first.run(plan);
    run.events.on('task:failed', (e) => {
      if (e.taskId === 'bad' && !e.willRetry) run.cancel('stopped after the final failure');
    });
    const stopped = await run.result;
    await first.close();
    expect(stopped.status).toBe('cancelled');
    // The run's own result kept it all along.
    expect(stopped.tasks.bad).toMatchObject({ status: 'failed', output: { title: 7 } });

    const again = createSwarm({ ...options, store: file });
    const result = await again.resume(run.id).result;
    await again.close();
    expect(result.tasks.bad).toMatchObject({ status: 'failed', error: { code: 'invalid_output' }, output: { title: 7 } });
    expect(result.tasks.other).toMatchObject({ status: 'completed' });

    const store = new SqliteStore(file);
    expect(store.loadTasks(run.id).find((t) => t.taskId === 'bad')).toMatchObject({ status: 'failed', output: '{"title": 7}' });
    store.close();
    const shown = await cli(['show', run.id, 'bad', '--store', file, '--json']);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).tasks).toMatchObject([{ id: 'bad', status: 'failed', output: '{"title": 7}', error: { code: 'invalid_output' } }]);
    // The table says why it failed; the task named shows the error, then the answer it kept.
    const table = await cli(['show', run.id, '--store', file]);
    expect(table.stdout).toMatch(/\nbad +failed +1 .* invalid_output: /);
    const block = await cli(['show', run.id, 'bad', '--store', file]);
    expect(block.stdout).toMatch(/^== bad  failed  1 attempt.*\nerror: invalid_output: .*\nrejected answer:\n\{"title": 7\}\n/);
  });
});
