/**
 * Map and reduce tasks end to end, over HTTP against the simulated provider: a map's items become
 * sub-tasks and its output their outputs in item order; dedupe drops duplicates before a reduce
 * reads them (and says how many); a reduce merges in groups of fanIn, splits a group whose inputs
 * would not fit the model's input budget (nothing cut, every input reaches the root), and starts a
 * group as soon as its own inputs are done.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startSim, type RunEvent, type SimServer } from '../../src/index.js';
import { toModelOutput } from '../../src/providers/scripted.js';
import type { ProviderRequest } from '../../src/providers/types.js';
import { estimateRequestTokens } from '../../machines/tokens.js';
import { recordingProvider } from '../helpers/recordingProvider.js';

type Ev<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

let sim: SimServer;
let dir: string;
beforeAll(async () => {
  sim = await startSim({ seed: 3 });
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-mapreduce-'));
});
afterAll(async () => {
  await sim.close();
});

const textOf = (r: ProviderRequest) => r.messages.flatMap((m) => m.content).map((b) => (b.type === 'text' ? b.text : '')).join('');

/** Runs a plan against the simulator (groups of a reduce may be answered by `script`), recording every request. */
async function runPlan(plan: Record<string, unknown>, script?: (r: ProviderRequest) => string | undefined, source?: string) {
  const { provider, requests } = recordingProvider(sim.url, script ? (r) => {
    const text = script(r);
    return text === undefined ? undefined : Promise.resolve(toModelOutput(r, text, 0));
  } : undefined);
  const swarm = createSwarm({ store: false, providers: { p: provider }, backoff: { baseMs: 1, maxMs: 2 } });
  const run = swarm.run({ providers: { p: { type: 'sim' } }, ...plan }, source !== undefined ? { source } : {});
  const events: RunEvent[] = [];
  run.events.on('*', (_t: string, e: RunEvent) => events.push(e));
  try {
    return { result: await run.result, events, requests };
  } finally {
    await swarm.close();
  }
}

const models = { m: { provider: 'p', model: 'claude-haiku-4-5', maxTokens: 64 } };

describe('map', () => {
  it('runs one sub-task per item of a file (relative to the plan), named by key, and outputs their outputs in item order', async () => {
    const products = [
      { sku: 'A1', name: 'lamp', tags: ['home'] },
      { sku: 'B2', name: 'desk', tags: ['office'] },
      { sku: 'C3', name: 'chair', tags: [] },
    ];
    writeFileSync(join(dir, 'products.jsonl'), products.map((p) => JSON.stringify(p)).join('\n') + '\n');
    const { result, requests, events } = await runPlan(
      {
        models,
        tasks: [
          { id: 'brief', model: 'm', prompt: 'brief [[sim:reply BE SHORT]]' },
          { id: 'describe', kind: 'map', key: 'sku', items: { file: 'products.jsonl' }, deps: ['brief'], model: 'm', prompt: '{{brief}}: describe {{item.name}} ({{item}}) [[sim:reply {"sku":"{{item.sku}}","len":{{item.tags}}}]]' },
        ],
      },
      undefined,
      join(dir, 'plan.json'),
    );
    expect(result.status).toBe('completed');
    expect(result.tasks.describe!.subtasks).toEqual(['describe/A1', 'describe/B2', 'describe/C3']);
    expect(result.tasks.describe!.output).toEqual([
      { sku: 'A1', len: ['home'] },
      { sku: 'B2', len: ['office'] },
      { sku: 'C3', len: [] },
    ]);
    // The map itself called no model; each item's prompt has its dep placed and the item filled in.
    expect(requests.map((r) => r.meta.taskId).sort()).toEqual(['brief', 'describe/A1', 'describe/B2', 'describe/C3']);
    const lamp = textOf(requests.find((r) => r.meta.taskId === 'describe/A1')!);
    expect(lamp).toContain(`BE SHORT: describe lamp (${JSON.stringify(products[0])})`);
    expect(events.find((e): e is Ev<'task:planned'> => e.type === 'task:planned')).toMatchObject({ taskId: 'describe', subtasks: ['describe/A1', 'describe/B2', 'describe/C3'] });
  });

  it('reads its items from a task\'s JSON array output, and fails with a clear error when the output is not one', async () => {
    const { result } = await runPlan({
      models,
      tasks: [
        { id: 'list', model: 'm', prompt: 'list [[sim:reply ["x","y"] ]]' },
        { id: 'each', kind: 'map', items: { from: 'list' }, model: 'm', prompt: 'do {{item}} [[sim:reply done-{{item}}]]' },
        { id: 'prose', model: 'm', prompt: 'prose [[sim:reply not a list]]' },
        { id: 'bad', kind: 'map', items: { from: 'prose' }, model: 'm', prompt: 'do {{item}}' },
        { id: 'after', model: 'm', deps: ['bad'], prompt: 'after' },
        { id: 'many', kind: 'map', items: { from: 'list' }, maxItems: 1, model: 'm', prompt: 'do {{item}}' },
      ],
    });
    expect(result.status).toBe('partial');
    expect(result.tasks.each!.output).toEqual(['done-x', 'done-y']);
    // The items' prompts do not carry the list they came from.
    expect(result.tasks.bad).toMatchObject({ status: 'failed', error: { code: 'invalid_plan', message: expect.stringContaining('the output of "prose" is not JSON') } });
    expect(result.tasks.after!.status).toBe('skipped');
    expect(result.tasks.many!.error!.message).toContain('2 items, more than maxItems (1)');
  });

  it('dedupe drops later duplicate outputs (by field, or by normalized text), says how many, and a reduce reads only the kept ones', async () => {
    const values = ['a', 'b', 'a', 'c', 'b', 'a'];
    const { result, events, requests } = await runPlan({
      models,
      tasks: [
        { id: 'byField', kind: 'map', dedupe: 'k', items: { values }, model: 'm', prompt: 'x {{item}} [[sim:reply {"k":"{{item}}","at":"{{item}}"}]]' },
        { id: 'byText', kind: 'map', dedupe: 'text', items: { values: ['One  thing', 'one thing', 'two'] }, model: 'm', prompt: 'y [[sim:reply {{item}}]]' },
        { id: 'sum', kind: 'reduce', over: 'byField', fanIn: 8, model: 'm', prompt: 'merge {{inputs}} [[sim:reply merged]]' },
      ],
    });
    expect(result.status).toBe('completed');
    expect(result.tasks.byField!.dropped).toBe(3);
    expect(result.tasks.byField!.output).toEqual([{ k: 'a', at: 'a' }, { k: 'b', at: 'b' }, { k: 'c', at: 'c' }]);
    expect(result.tasks.byText!.dropped).toBe(1);
    expect(result.tasks.byText!.output).toEqual(['One  thing', 'two']);
    const deduped = events.filter((e): e is Ev<'task:deduped'> => e.type === 'task:deduped');
    expect(deduped).toEqual(expect.arrayContaining([expect.objectContaining({ taskId: 'byField', items: 6, kept: 3, dropped: 3 }), expect.objectContaining({ taskId: 'byText', items: 3, kept: 2, dropped: 1 })]));
    // The reduce merged the three kept outputs in one call.
    const merges = requests.filter((r) => r.meta.taskId === 'sum');
    expect(merges).toHaveLength(1);
    expect(textOf(merges[0]!).match(/<input n=/g)).toHaveLength(3);
    expect(result.tasks.sum!.output).toBe('merged');
  });
});

describe('slots', () => {
  it('a map or reduce taken while every slot is busy never lets another task past maxInFlight', async () => {
    const swarm = createSwarm({ store: false });
    const run = swarm.run({
      providers: { p: { type: 'sim', sim: { ttftMs: 100 } } },
      models: { a: { ...models.m, maxInFlight: 1 }, b: models.m },
      defaults: { maxInFlight: 1 },
      tasks: [
        { id: 'x', model: 'a', prompt: 'x' },
        { id: 'm', kind: 'map', items: { values: [1, 2] }, model: 'b', prompt: 'item {{item}}' },
        // Ready while x runs (the map expanded), on x's model, which is at its cap: set aside.
        { id: 'r', kind: 'reduce', over: 'm', model: 'a', prompt: 'merge {{inputs}}' },
        { id: 'y', model: 'b', prompt: 'y' },
      ],
    });
    const running = new Set<string>();
    let most = 0;
    run.events.on('*', (_t: string, e: RunEvent) => {
      if (e.type === 'task:started') most = Math.max(most, running.add(e.taskId).size);
      if (e.type === 'task:completed' || e.type === 'task:failed' || e.type === 'task:cancelled') running.delete(e.taskId);
    });
    const result = await run.result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(most).toBe(1);
  });
});

describe('map resumed', () => {
  it('a deduped map that completed before the run stopped keeps dropping its duplicates for the reduce that resumes', async () => {
    const db = join(dir, 'dedupe-resume.db');
    const plan = {
      providers: { p: { type: 'sim' } },
      models,
      tasks: [
        { id: 'byField', kind: 'map', dedupe: 'k', items: { values: ['a', 'b', 'a', 'c', 'b', 'a'] }, model: 'm', prompt: 'x {{item}} [[sim:reply {"k":"{{item}}"}]]' },
        { id: 'sum', kind: 'reduce', over: 'byField', model: 'm', prompt: 'merge {{inputs}} [[sim:reply merged]]' },
      ],
    };
    // First life: the reduce's call hangs until the run is cancelled (the map has completed by then).
    const hang = recordingProvider(sim.url, (r) => (r.meta.taskId === 'sum' ? new Promise((_, reject) => r.signal.addEventListener('abort', () => reject(new Error('aborted')))) : undefined));
    const first = createSwarm({ store: db, providers: { p: hang.provider } });
    const run = first.run(plan);
    run.events.on('task:started', (e) => {
      if (e.taskId === 'sum') run.cancel('stop here');
    });
    expect((await run.result).tasks.byField!.status).toBe('completed');
    await first.close();

    const again = recordingProvider(sim.url);
    const second = createSwarm({ store: db, providers: { p: again.provider } });
    const result = await second.resume(run.id).result;
    await second.close();
    expect(result.status).toBe('completed');
    expect(again.requests.map((r) => r.meta.taskId)).toEqual(['sum']);
    expect(textOf(again.requests[0]!).match(/<input n=/g)).toHaveLength(3);
    expect(result.tasks.byField!.dropped).toBe(3);
  });
});

describe('placeholders are filled once, in one pass', () => {
  it('places a dep\'s answer as it is: {{item...}} and {{inputs}} in it are neither filled nor an error, and an item is not read for placeholders', async () => {
    const { result, requests } = await runPlan(
      {
        models,
        tasks: [
          { id: 'brief', model: 'm', prompt: 'brief' },
          { id: 'describe', kind: 'map', items: { values: [{ name: 'lamp' }, { name: '{{brief}}' }] }, deps: ['brief'], model: 'm', prompt: '{{brief}} / {{item.name}} [[sim:reply ok]]' },
          { id: 'sum', kind: 'reduce', over: 'describe', deps: ['brief'], model: 'm', prompt: '{{brief}} / {{inputs}} [[sim:reply merged]]' },
        ],
      },
      // The plan may not write these placeholders where nothing fills them; a model's answer may.
      (r) => (r.meta.taskId === 'brief' ? 'Keep {{item.title}}, {{item.name}} and {{inputs}} as written' : undefined),
    );
    expect(result.status).toBe('completed');
    const text = (id: string) => textOf(requests.find((r) => r.meta.taskId === id)!);
    expect(text('describe/0')).toBe('Keep {{item.title}}, {{item.name}} and {{inputs}} as written / lamp [[sim:reply ok]]');
    expect(text('describe/1')).toBe('Keep {{item.title}}, {{item.name}} and {{inputs}} as written / {{brief}} [[sim:reply ok]]');
    // The reduce was taken before its map's items were done: it runs as its one group.
    expect(text('sum/L1/0')).toBe('Keep {{item.title}}, {{item.name}} and {{inputs}} as written / <input n="1">\nok\n</input>\n<input n="2">\nok\n</input> [[sim:reply merged]]');
  });
});

describe('items and inputs at the edges', () => {
  it('reads `from` items from an answer in a ```json fence; a reduce over a map that gave no items fails with invalid_plan', async () => {
    const { result } = await runPlan(
      {
        models,
        tasks: [
          { id: 'fenced', model: 'm', prompt: 'list' },
          { id: 'each', kind: 'map', items: { from: 'fenced' }, model: 'm', prompt: 'do {{item}} [[sim:reply done-{{item}}]]' },
          { id: 'none', model: 'm', prompt: 'list' },
          { id: 'nothing', kind: 'map', items: { from: 'none' }, model: 'm', prompt: 'do {{item}}' },
          { id: 'sum', kind: 'reduce', over: 'nothing', model: 'm', prompt: 'merge {{inputs}}' },
        ],
      },
      (r) => ({ fenced: '```json\n["x", "y"]\n```', none: '[]' })[r.meta.taskId],
    );
    expect(result.tasks.each!.output).toEqual(['done-x', 'done-y']);
    expect(result.tasks.nothing).toMatchObject({ status: 'completed', output: [] });
    expect(result.tasks.sum).toMatchObject({ status: 'failed', error: { code: 'invalid_plan', message: 'task "sum": nothing to reduce ("nothing" has no inputs)' } });
  });
});

describe('reduce', () => {
  it('splits groups whose inputs would not fit the input budget: nothing is cut and every input reaches the root', async () => {
    const N = 40;
    const filler = ' lorem ipsum dolor'.repeat(20);
    // Groups answer with the markers their prompt carries: the root's output shows what reached it.
    const { result, requests, events } = await runPlan(
      {
        // 700 tokens of context less 64 of answer: eight ~100-token item outputs do not fit one call.
        models: { m: { ...models.m, contextTokens: 700 } },
        defaults: { maxInFlight: 4 },
        tasks: [
          { id: 'describe', kind: 'map', items: { values: Array.from({ length: N }, (_, i) => i) }, model: 'm', prompt: `item {{item}} [[sim:reply MARK-{{item}}.${filler}]]` },
          { id: 'summary', kind: 'reduce', over: 'describe', fanIn: 8, model: 'm', prompt: 'Merge these: {{inputs}}' },
        ],
      },
      (r) => (r.meta.taskId.startsWith('summary') ? [...new Set(textOf(r).match(/MARK-\d+\./g) ?? [])].join(' ') : undefined),
    );
    expect(result.status).toBe('completed');
    const marks = Array.from({ length: N }, (_, i) => `MARK-${i}.`);
    expect(String(result.tasks.summary!.output).split(' ').sort()).toEqual([...marks].sort());
    // Every request fitted the budget: no compaction, and the estimate the agent checks stays under it.
    expect(events.filter((e) => e.type === 'task:compacted')).toEqual([]);
    for (const r of requests) expect(estimateRequestTokens(r.system, r.messages)).toBeLessThanOrEqual(700 - 64);
    // Groups were split below fanIn, and each item's output went into exactly one group's prompt.
    const merges = requests.filter((r) => r.meta.taskId.startsWith('summary'));
    expect(merges.some((r) => /^summary\/L1\/\d+\/L1\//.test(r.meta.taskId))).toBe(true);
    const firstLevel = merges.filter((r) => textOf(r).includes('lorem'));
    const seen = firstLevel.flatMap((r) => textOf(r).match(/MARK-\d+\./g) ?? []);
    expect(seen.sort()).toEqual([...marks].sort());
  });

  it('keeps item order past ten items in every group and in the final merge (26 items, fanIn 4)', async () => {
    const letters = 'abcdefghijklmnopqrstuvwxyz'.split('');
    // A group answers with its inputs in the order its prompt gives them.
    const inputsIn = (r: ProviderRequest) => [...textOf(r).matchAll(/<input n="\d+">\n([\s\S]*?)\n<\/input>/g)].map((m) => m[1]!);
    const { result, requests } = await runPlan(
      {
        models,
        tasks: [
          { id: 'describe', kind: 'map', items: { values: letters }, model: 'm', prompt: 'item {{item}} [[sim:reply {{item}}]]' },
          { id: 'summary', kind: 'reduce', over: 'describe', fanIn: 4, model: 'm', prompt: 'merge {{inputs}}' },
        ],
      },
      (r) => (r.meta.taskId.startsWith('summary') ? inputsIn(r).join(' ') : undefined),
    );
    expect(result.status).toBe('completed');
    const groups = Object.fromEntries(requests.filter((r) => r.meta.taskId.startsWith('summary')).map((r) => [r.meta.taskId, inputsIn(r)]));
    expect(groups).toEqual({
      'summary/L1/0': ['a', 'b', 'c', 'd'],
      'summary/L1/1': ['e', 'f', 'g', 'h'],
      'summary/L1/2': ['i', 'j', 'k', 'l'],
      'summary/L1/3': ['m', 'n', 'o', 'p'],
      'summary/L1/4': ['q', 'r', 's', 't'],
      'summary/L1/5': ['u', 'v', 'w', 'x'],
      'summary/L1/6': ['y', 'z'],
      'summary/L2/0': ['a b c d', 'e f g h', 'i j k l', 'm n o p'],
      'summary/L2/1': ['q r s t', 'u v w x', 'y z'],
      'summary/L3/0': ['a b c d e f g h i j k l m n o p', 'q r s t u v w x y z'],
    });
    expect(result.tasks.summary!.output).toBe('a b c d e f g h i j k l m n o p q r s t u v w x y z');
    expect(result.tasks.describe!.output).toEqual(letters);
  });

  it('a group starts as soon as its own inputs are done, before the map has finished', async () => {
    const { result, events } = await runPlan({
      models,
      defaults: { maxInFlight: 1 },
      tasks: [
        { id: 'describe', kind: 'map', items: { values: Array.from({ length: 32 }, (_, i) => i) }, model: 'm', prompt: 'item {{item}} [[sim:reply out-{{item}}]]' },
        { id: 'summary', kind: 'reduce', over: 'describe', fanIn: 4, model: 'm', prompt: 'merge {{inputs}} [[sim:reply merged]]' },
      ],
    });
    expect(result.status).toBe('completed');
    const startOf = (id: string) => events.findIndex((e) => e.type === 'task:started' && e.taskId === id);
    const doneOf = (id: string) => events.findIndex((e) => e.type === 'task:completed' && e.taskId === id);
    expect(startOf('summary/L1/0')).toBeGreaterThan(doneOf('describe/3'));
    expect(startOf('summary/L1/0')).toBeLessThan(doneOf('describe/31'));
    // 32 inputs by 4: 8 groups, then 2, then the root: depth ceil(log4 32) = 3.
    const groups = Object.keys(result.tasks).filter((id) => id.startsWith('summary/'));
    expect(groups.filter((id) => id.includes('/L1/'))).toHaveLength(8);
    expect(groups.filter((id) => id.includes('/L2/'))).toHaveLength(2);
    expect(groups.filter((id) => id.includes('/L3/'))).toEqual(['summary/L3/0']);
    expect(result.tasks.summary!.output).toBe('merged');
  });

  it('merges the elements of a task\'s JSON array output, or a list of tasks, and fails clearly on a single input too big to fit', async () => {
    const big = 'word '.repeat(800);
    const { result } = await runPlan({
      models: { m: models.m, long: { ...models.m, maxTokens: 2000 }, small: { ...models.m, contextTokens: 400 } },
      tasks: [
        { id: 'list', model: 'm', prompt: 'l [[sim:reply ["p","q","r"] ]]' },
        { id: 'a', model: 'm', prompt: 'a [[sim:reply A]]' },
        { id: 'b', model: 'm', prompt: 'b [[sim:reply B]]' },
        { id: 'overList', kind: 'reduce', over: 'list', fanIn: 2, model: 'm', prompt: 'm {{inputs}} [[sim:reply ok]]' },
        { id: 'overTasks', kind: 'reduce', over: ['a', 'b'], model: 'm', prompt: 'm {{inputs}} [[sim:reply ok2]]' },
        { id: 'huge', model: 'long', prompt: `h [[sim:reply ${big}]]` },
        { id: 'tooBig', kind: 'reduce', over: ['huge', 'a'], model: 'small', prompt: 'm {{inputs}}' },
      ],
    });
    expect(result.tasks.overList!.output).toBe('ok');
    expect(result.tasks['overList/L1/0']).toBeDefined();
    expect(result.tasks.overTasks!.output).toBe('ok2');
    expect(result.tasks.tooBig).toMatchObject({ status: 'failed', error: { code: 'context_overflow', message: expect.stringContaining('input "huge" alone is about') } });
  });
});
