/** The end-of-run table: from the result alone, and with what only the event stream knows. */
import { describe, expect, it } from 'vitest';
import type { RunEvent, Usage } from '../../machines/protocol.js';
import type { RunResult, TaskResult } from '../../machines/tasks/results.js';
import { formatSummaryTable } from '../../src/cli/summary.js';
import type { TimedRunEvent } from '../../src/swarm.js';

const use = (inputTokens: number, outputTokens: number, cacheReadTokens = 0, cacheWriteTokens = 0): Usage => ({ inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens });

function task(id: string, model: string, status: TaskResult['status'], usage: Usage, requests: number, costUsd?: number | null, retries = 0): TaskResult {
  const t: TaskResult = { id, status, attempts: status === 'skipped' ? 0 : 1, model, usage, requests, retries };
  if (costUsd !== undefined) t.costUsd = costUsd;
  if (status === 'failed') t.error = { code: 'bad_request', message: 'HTTP 400: bad', retryable: false };
  return t;
}

/** Two models: `fast` (three tasks, one failed) and `smart` (two tasks, one skipped). */
function twoModelResult(priced: boolean): RunResult {
  const cost = (usd: number) => (priced ? usd : undefined);
  const tasks = [
    task('a', 'fast', 'completed', use(1000, 200, 3000, 500), 2, cost(0.0025), 1),
    task('b', 'fast', 'completed', use(2000, 100), 1, cost(0.0025)),
    task('c', 'fast', 'failed', use(0, 0), 1, cost(0)),
    task('d', 'smart', 'completed', use(4000, 1000, 1000), 3, cost(0.0273), 1),
    task('e', 'smart', 'skipped', use(0, 0), 0, cost(0)),
  ];
  return {
    runId: 'r1',
    status: 'partial',
    tasks: Object.fromEntries(tasks.map((t) => [t.id, t])),
    totals: {
      tasks: 5,
      completed: 3,
      failed: 1,
      skipped: 1,
      cancelled: 0,
      containers: 0,
      attempts: 4,
      requests: 7,
      retries: 2,
      usage: use(7000, 1300, 4000, 500),
      durationMs: 83_456,
      ...(priced ? { costUsd: 0.0323 } : {}),
    },
  };
}

const events: TimedRunEvent[] = (
  [
    {
      type: 'run:started',
      runId: 'r1',
      tasks: 5,
      models: {
        fast: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 5 } },
        smart: { provider: 'sim', model: 'sim-smart', price: { input: 3, output: 15 } },
      },
      keys: { 'sim:aaaa': {} },
    },
    { type: 'model:error', taskId: 'a', attempt: 1, turn: 0, provider: 'sim', model: 'sim-fast', keyId: 'sim:aaaa', error: { code: 'rate_limited', message: '429', retryable: true } },
    { type: 'model:error', taskId: 'd', attempt: 1, turn: 0, provider: 'sim', model: 'sim-smart', keyId: 'sim:aaaa', error: { code: 'rate_limited', message: '429', retryable: true } },
    { type: 'model:error', taskId: 'd', attempt: 1, turn: 1, provider: 'sim', model: 'sim-smart', keyId: 'sim:aaaa', error: { code: 'server_error', message: '500', retryable: true } },
    { type: 'tool:called', taskId: 'a', name: 'read', shared: false },
    { type: 'tool:called', taskId: 'b', name: 'read', shared: true },
    { type: 'tool:called', taskId: 'd', name: 'read', shared: false, cached: true },
    { type: 'tool:called', taskId: 'd', name: 'grep', shared: false },
    { type: 'tool:result', name: 'read', isError: false },
    { type: 'tool:result', name: 'grep', isError: false },
    { type: 'run:completed', status: 'partial' },
  ] satisfies RunEvent[]
).map((e, i) => ({ ...e, at: i * 10 }) as TimedRunEvent);

describe('formatSummaryTable', () => {
  it('lists tasks by status, attempts, requests, 429s, retries, cache read share, tool sharing, makespan and cost per model and in total', () => {
    expect(formatSummaryTable(twoModelResult(true), events).split('\n')).toEqual([
      'status       partial (run r1)',
      'tasks        5',
      '  completed  3',
      '  failed     1',
      '  skipped    1',
      '  cancelled  0',
      'attempts     4',
      'requests     7',
      '429s         2',
      'retries      2',
      'cache read   34.8% of input tokens (4,000 of 11,500)',
      'tools        4 requested, 2 executed, 1 shared, 1 cached',
      'makespan     83.46s (1m23s)',
      '',
      'model  route          tasks  requests  input  output  cache read  cache write     cost',
      'fast   sim/sim-fast       3         4  3,000     300       3,000          500  $0.0050',
      'smart  sim/sim-smart      2         3  4,000   1,000       1,000            0  $0.0273',
      'total                     5         7  7,000   1,300       4,000          500  $0.0323',
      '',
      'failed c: bad_request: HTTP 400: bad',
    ]);
  });

  it('works from the result alone: what only events know says so, the rest is the same', () => {
    const lines = formatSummaryTable(twoModelResult(true)).split('\n');
    expect(lines[8]).toBe('429s         n/a (no events)');
    expect(lines[11]).toBe('tools        n/a (no events)');
    expect(lines.slice(14, 18)).toEqual([
      'model  route  tasks  requests  input  output  cache read  cache write     cost',
      'fast              3         4  3,000     300       3,000          500  $0.0050',
      'smart             2         3  4,000   1,000       1,000            0  $0.0273',
      'total             5         7  7,000   1,300       4,000          500  $0.0323',
    ]);
  });

  it('prices a result that carries no cost from the prices in run:started, and says unknown without either', () => {
    const fromEvents = formatSummaryTable(twoModelResult(false), events).split('\n');
    // fast: (3,000 x $1 + 300 x $5 + 3,000 x $0.10 + 500 x $1.25) / 1M; smart: (4,000 x $3 + 1,000 x $15 + 1,000 x $0.30) / 1M.
    expect(fromEvents[15]).toMatch(/ \$0\.0054$/);
    expect(fromEvents[16]).toMatch(/ \$0\.0273$/);
    expect(fromEvents[17]).toMatch(/ \$0\.0327$/);
    const alone = formatSummaryTable(twoModelResult(false)).split('\n');
    expect(alone[15]).toMatch(/ unknown$/);
    expect(alone[17]).toMatch(/ unknown$/);
  });

  it('says none for a run that called no tools, and lists at most ten failures', () => {
    const result = twoModelResult(true);
    for (let i = 0; i < 12; i++) result.tasks[`f${i}`] = task(`f${i}`, 'fast', 'failed', use(0, 0), 1, 0);
    const text = formatSummaryTable(result, events.filter((e) => !e.type.startsWith('tool:')));
    expect(text).toContain('\ntools        none\n');
    expect(text.split('\n').filter((l) => l.startsWith('failed '))).toHaveLength(10);
    expect(text.endsWith('... and 3 more failed')).toBe(true);
  });

  it('counts a map that expanded as a container, apart from its items, the tasks (from the tasks, not from totals given)', () => {
    const item = (id: string) => task(id, 'fast', 'completed', use(100, 10), 1, 0.0002);
    const mp: TaskResult = { ...task('mp', 'fast', 'completed', use(0, 0), 0, 0), attempts: 0, container: true, subtasks: ['mp/0', 'mp/1'] };
    const result: RunResult = {
      runId: 'r2',
      status: 'completed',
      tasks: { mp, 'mp/0': item('mp/0'), 'mp/1': item('mp/1') },
      // As a result from elsewhere may say it: the container counted as a task, with 2 attempts.
      totals: { tasks: 3, completed: 3, failed: 0, skipped: 0, cancelled: 0, containers: 0, attempts: 4, requests: 2, retries: 0, usage: use(200, 20), durationMs: 10, costUsd: 0.0004 },
    };
    const lines = formatSummaryTable(result).split('\n');
    expect(lines.slice(1, 9)).toEqual([
      'tasks        2',
      '  completed  2',
      '  failed     0',
      '  skipped    0',
      '  cancelled  0',
      'containers   1 (1 completed; maps and reduces that expanded: their items and groups are the tasks)',
      'attempts     2',
      'requests     2',
    ]);
    expect(lines.find((l) => l.startsWith('total'))).toBe('total             2         2    200      20           0            0  $0.000400');
  });

  it('says how many item outputs a map with dedupe dropped', () => {
    const result = twoModelResult(true);
    result.tasks.a = { ...result.tasks.a!, subtasks: ['a/0', 'a/1', 'a/2', 'a/3'], dropped: 3 };
    expect(formatSummaryTable(result)).toMatch(/\nduplicates +a: 3 of 4 item outputs dropped as duplicates\nrequests /);
    expect(formatSummaryTable(twoModelResult(true))).not.toContain('duplicates');
  });
});
