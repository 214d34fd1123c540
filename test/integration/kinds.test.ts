/**
 * Planner and review tasks end to end, over HTTP against the simulated provider: a planner's
 * JSON answer becomes sub-tasks that join the DAG (checked like a plan, renamed under the
 * planner, depth-bounded), and a review task sends its target back with findings at most
 * `maxRounds` times.
 */
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm, type RunEvent } from '../../src/index.js';

type Ev<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

const base = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast', price: { input: 1, output: 5 } }, big: { provider: 'sim', model: 'sim-big', price: { input: 3, output: 15 } } },
};

const subtasks = JSON.stringify([
  { id: 'a', model: 'fast', prompt: 'part a' },
  { id: 'b', model: 'big', prompt: 'part b' },
  { id: 'c', model: 'fast', deps: ['a', 'b'], prompt: 'join {{a}} and {{b}}' },
]);

async function runPlan(plan: unknown, listen?: (events: RunEvent[]) => void) {
  const swarm = createSwarm({ seed: 1, backoff: { baseMs: 1, maxMs: 2 } });
  const run = swarm.run(plan);
  const events: RunEvent[] = [];
  run.events.on('*', (_type: string, e: RunEvent) => events.push(e));
  listen?.(events);
  try {
    return { result: await run.result, events };
  } finally {
    await swarm.close();
  }
}

describe('planner tasks', () => {
  it('turns a JSON answer into sub-tasks that join the DAG, and the next task reads their results', async () => {
    const { result, events } = await runPlan({
      ...base,
      tasks: [
        { id: 'brief', model: 'fast', prompt: 'brief [[sim:reply the brief]]' },
        { id: 'plan', kind: 'plan', model: 'big', deps: ['brief'], prompt: `split the work [[sim:reply ${subtasks} ]]` },
        { id: 'report', model: 'fast', deps: ['plan'], prompt: 'write it up [[sim:reply REPORT]]' },
      ],
    });
    expect(result.status).toBe('completed');
    expect(Object.keys(result.tasks).sort()).toEqual(['brief', 'plan', 'plan/a', 'plan/b', 'plan/c', 'report']);
    expect(result.tasks.plan!.subtasks).toEqual(['plan/a', 'plan/b', 'plan/c']);
    expect(result.tasks['plan/b']!.model).toBe('big');
    expect(result.tasks['plan/c']!.parent).toBe('plan');
    const planned = events.find((e): e is Ev<'task:planned'> => e.type === 'task:planned')!;
    expect(planned).toMatchObject({ taskId: 'plan', subtasks: ['plan/a', 'plan/b', 'plan/c'], depth: 1 });
    // Order: the join starts after both parts, and the report only after the last sub-task (c).
    const startOf = (id: string) => events.findIndex((e) => e.type === 'task:started' && e.taskId === id);
    const doneOf = (id: string) => events.findIndex((e) => e.type === 'task:completed' && e.taskId === id);
    expect(startOf('plan/c')).toBeGreaterThan(doneOf('plan/a'));
    expect(startOf('plan/c')).toBeGreaterThan(doneOf('plan/b'));
    expect(startOf('report')).toBeGreaterThan(doneOf('plan/c'));
    expect(result.totals.tasks).toBe(6);
    expect(result.totals.completed).toBe(6);
    // Each sub-task was priced at its own model.
    expect(result.tasks['plan/b']!.costUsd).toBeGreaterThan(0);
  });

  it('rejects an invalid answer with every problem, tries again, and fails the planner (skipping its dependents) when it stays invalid', async () => {
    const bad = JSON.stringify([
      { id: 'x', prompt: 'no model' },
      { id: 'y', model: 'nope', prompt: 'unknown model', deps: ['zzz'] },
      { id: 'z', model: 'fast', kind: 'plan', prompt: 'too deep' },
    ]);
    const { result, events } = await runPlan({
      ...base,
      defaults: { maxRetries: 1 },
      tasks: [
        { id: 'plan', kind: 'plan', model: 'big', prompt: `plan [[sim:reply ${bad} ]]` },
        { id: 'after', model: 'fast', deps: ['plan'], prompt: 'after' },
        { id: 'other', model: 'fast', prompt: 'unrelated [[sim:reply fine]]' },
      ],
    });
    const rejected = events.filter((e): e is Ev<'task:plan-rejected'> => e.type === 'task:plan-rejected');
    expect(rejected).toHaveLength(2); // the first try and the one retry
    const issues = rejected[0]!.issues.join('\n');
    expect(issues).toContain('tasks[0].model');
    expect(issues).toContain('tasks[1].model');
    expect(issues).toContain('unknown task "zzz"');
    expect(issues).toContain('tasks[2].kind');
    expect(result.tasks.plan!.status).toBe('failed');
    expect(result.tasks.plan!.error!.code).toBe('invalid_plan');
    expect(result.tasks.after!.status).toBe('skipped');
    expect(result.tasks.other!.status).toBe('completed');
    expect(result.status).toBe('partial');
  });

  it('lets sub-tasks plan only while the depth stays under limits.maxDepth', async () => {
    // Sub-task prompts cannot carry simulator directives inside a directive: a scripted provider answers by task.
    const replies: Record<string, string> = {
      top: JSON.stringify([{ id: 'sub', kind: 'plan', model: 'fast', prompt: 'plan the leaves' }]),
      'top/sub': JSON.stringify([{ id: 'leaf', model: 'fast', prompt: 'do it' }]),
      'top/sub/leaf': 'LEAF',
    };
    const provider = createScriptedProvider({ reply: (req) => replies[req.meta.taskId] ?? 'nothing' });
    const plan = (maxDepth: number) => ({
      providers: { p: { type: 'anthropic', keys: ['sk-test'] } },
      models: { fast: { provider: 'p', model: 'claude-haiku-4-5' } },
      limits: { maxDepth },
      defaults: { maxRetries: 0 },
      tasks: [{ id: 'top', kind: 'plan', model: 'fast', prompt: 'plan' }],
    });
    const swarm = createSwarm({ providers: { p: provider } });
    const deep = await swarm.run(plan(2)).result;
    expect(deep.status).toBe('completed');
    expect(deep.tasks['top/sub']!.subtasks).toEqual(['top/sub/leaf']);
    expect(deep.tasks['top/sub/leaf']!.output).toBe('LEAF');

    const flat = await swarm.run(plan(1)).result;
    await swarm.close();
    expect(flat.tasks.top!.status).toBe('failed');
    expect(flat.tasks.top!.error!.message).toContain('sub-tasks at depth 1 cannot plan (limits.maxDepth is 1)');
  });
});

describe('review tasks', () => {
  it('sends the work back with the findings, then approves; dependents wait for the approved version', async () => {
    const { result, events } = await runPlan({
      ...base,
      tasks: [
        { id: 'draft', model: 'fast', prompt: 'write the draft' },
        { id: 'check', kind: 'review', reviews: 'draft', model: 'big', prompt: 'review it [[sim:replies REVISE: cite sources || APPROVE]]' },
        { id: 'publish', model: 'fast', deps: ['draft'], prompt: 'publish {{draft}}' },
      ],
    });
    expect(result.status).toBe('completed');
    const reviews = events.filter((e): e is Ev<'task:reviewed'> => e.type === 'task:reviewed');
    expect(reviews.map((r) => [r.round, r.verdict, r.final])).toEqual([
      [1, 'revise', false],
      [2, 'approve', true],
    ]);
    expect(reviews[0]!.findings).toBe('cite sources');
    expect(result.tasks.check!.review).toEqual({ target: 'draft', rounds: 2, approved: true });
    expect(result.tasks.draft!.revisions).toBe(1);
    expect(result.tasks.draft!.attempts).toBe(2);
    // The second draft saw the findings and its first version; publish started after the approval.
    const draftStarts = events.filter((e) => e.type === 'task:started' && e.taskId === 'draft');
    expect(draftStarts).toHaveLength(2);
    const publishStart = events.findIndex((e) => e.type === 'task:started' && e.taskId === 'publish');
    const approval = events.findIndex((e) => e.type === 'task:reviewed' && e.verdict === 'approve');
    expect(publishStart).toBeGreaterThan(approval);
  });

  it('stops after maxRounds reviews: the last draft stands, marked unapproved', async () => {
    const { result, events } = await runPlan({
      ...base,
      tasks: [
        { id: 'draft', model: 'fast', prompt: 'write' },
        { id: 'check', kind: 'review', reviews: 'draft', maxRounds: 3, model: 'big', prompt: 'review [[sim:reply REVISE: never good enough]]' },
      ],
    });
    expect(result.status).toBe('completed');
    expect(events.filter((e) => e.type === 'task:reviewed')).toHaveLength(3);
    expect(events.filter((e) => e.type === 'task:started' && e.taskId === 'draft')).toHaveLength(3);
    expect(result.tasks.check!.review).toEqual({ target: 'draft', rounds: 3, approved: false });
    expect(result.tasks.draft!.revisions).toBe(2);
  });

  it('rejects review tasks that cannot work, before anything runs', () => {
    const swarm = createSwarm();
    expect(() =>
      swarm.run({
        ...base,
        tasks: [
          { id: 'a', model: 'fast', prompt: 'a' },
          { id: 'r1', kind: 'review', model: 'fast', prompt: 'r' },
          { id: 'r2', kind: 'review', reviews: 'a', model: 'fast', prompt: 'r' },
          { id: 'r3', kind: 'review', reviews: 'a', model: 'fast', prompt: 'r' },
          { id: 'b', model: 'fast', reviews: 'a', maxRounds: 2, prompt: 'b' },
          // c reads a, so it waits for a's review, which waits for c: a cycle.
          { id: 'c', model: 'fast', deps: ['a'], prompt: 'c' },
          { id: 'r4', kind: 'review', reviews: 'c', deps: ['c'], model: 'fast', prompt: 'r' },
          { id: 'd', model: 'fast', deps: ['e'], prompt: 'd' },
          { id: 'e', model: 'fast', prompt: 'e' },
          { id: 'r5', kind: 'review', reviews: 'e', deps: ['d'], model: 'fast', prompt: 'r' },
        ],
      }),
    ).toThrowError(
      expect.objectContaining({
        issues: expect.arrayContaining([
          { path: 'tasks[1].reviews', message: expect.stringContaining('required') },
          { path: 'tasks[3].reviews', message: expect.stringContaining('already has a reviewer') },
          { path: 'tasks[4].reviews', message: expect.stringContaining('only a task with "kind": "review"') },
          { path: 'tasks[4].maxRounds', message: expect.stringContaining('only a task with "kind": "review"') },
          expect.objectContaining({ message: expect.stringMatching(/cycle: .*r5/) }),
        ]),
      }),
    );
  });
});
