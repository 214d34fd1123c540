/**
 * `validate` on map and reduce tasks: every problem with its path, before anything runs (items
 * that are not a list, a missing file, too many items, bad keys, a reduce over nothing or over an
 * unknown task, fanIn < 2, placeholders where nothing fills them). Real files in a temp folder.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { formatIssue, parseSubtasks, validatePlan, type PlanIssue } from '../../src/plan/index.js';
import { dedupeOutputs, planGroups } from '../../machines/mapReduce.js';
import { fillItem, itemsOfOutput, loadItemsFile } from '../../src/plan/mapreduce.js';
import { PlanExpander } from '../../src/planner.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'swarmstate-mr-validate-'));
  writeFileSync(join(dir, 'items.jsonl'), '{"sku":"a"}\n\n{"sku":"b"}\n');
  writeFileSync(join(dir, 'object.json'), '{"sku":"a"}');
  writeFileSync(join(dir, 'broken.jsonl'), '{"sku":"a"}\n{"sku":\n');
  writeFileSync(join(dir, 'broken.json'), '[\n  {"sku": "a"},\n  {"sku": "b",}\n]\n');
  writeFileSync(join(dir, 'lines.json'), '{"sku": "a"}\n{"sku" "b"}\n');
  writeFileSync(join(dir, 'keys.json'), JSON.stringify([{ sku: 'a' }, { sku: 'a' }, { sku: 'a b' }, { name: 'x' }]));
  writeFileSync(join(dir, 'empty.jsonl'), '\n\n');
});

function plan(tasks: unknown[]) {
  return { providers: { p: { type: 'sim' } }, models: { m: { provider: 'p', model: 'x' } }, tasks };
}

function lines(tasks: unknown[]): string[] {
  const result = validatePlan(plan(tasks), { baseDir: dir });
  return result.ok ? [] : result.issues.map((i: PlanIssue) => formatIssue(i));
}

describe('validate: map', () => {
  it('accepts a map over a JSONL file (relative to the base folder), inline values or a task, and a reduce over it', () => {
    const result = validatePlan(
      plan([
        { id: 'list', model: 'm', prompt: 'list' },
        { id: 'a', kind: 'map', items: { file: 'items.jsonl' }, key: 'sku', model: 'm', prompt: 'do {{item.sku}}' },
        { id: 'b', kind: 'map', items: { from: 'list' }, as: 'row', model: 'm', prompt: 'do {{row}}', dedupe: 'text' },
        { id: 'c', kind: 'map', items: { values: [1, 2] }, model: 'm', prompt: 'do {{item}}' },
        { id: 'r', kind: 'reduce', over: 'a', fanIn: 2, model: 'm', prompt: 'merge {{inputs}}' },
      ]),
      { baseDir: dir },
    );
    expect(result.ok ? [] : result.issues).toEqual([]);
  });

  it('reports a missing file, a file that is not a list, a broken JSONL line, too many items and bad keys, each with its path', () => {
    expect(
      lines([
        { id: 'a', kind: 'map', items: { file: 'nope.jsonl' }, model: 'm', prompt: 'x' },
        { id: 'b', kind: 'map', items: { file: 'object.json' }, model: 'm', prompt: 'x' },
        { id: 'c', kind: 'map', items: { file: 'broken.jsonl' }, model: 'm', prompt: 'x' },
        { id: 'd', kind: 'map', items: { file: 'items.jsonl' }, maxItems: 1, model: 'm', prompt: 'x' },
        { id: 'e', kind: 'map', items: { file: 'keys.json' }, key: 'sku', model: 'm', prompt: 'x' },
        { id: 'f', kind: 'map', model: 'm', prompt: 'x' },
        { id: 'g', kind: 'map', items: { rows: [] }, model: 'm', prompt: 'x' },
      ]),
    ).toEqual([
      'tasks[6].items: items is {"file": "items.jsonl"}, {"from": "<task id>"} or {"values": [...]}',
      `tasks[0].items.file: cannot read items file ${join(dir, 'nope.jsonl')}: no such file`,
      `tasks[1].items.file: items file ${join(dir, 'object.json')} holds JSON that is not an array (a map needs a JSON array, or JSONL: one item a line)`,
      `tasks[2].items.file: items file ${join(dir, 'broken.jsonl')} is not valid JSONL: line 2, column 8: Unexpected end of JSON input (a map needs a JSON array, or JSONL: one item a line)`,
      'tasks[3].items: 2 items, more than maxItems (1): raise maxItems or split the items',
      'tasks[4].items: item 1: key "a" is already item 0\'s (keys must be unique)',
      'tasks[4].items: item 2: key "a b" cannot name a task (letters, digits and _ . : / - only)',
      'tasks[4].items: item 3 has no string or number field "sku" (key)',
      'tasks[5].items: required: {"file": "items.jsonl"}, {"from": "<task id>"} or {"values": [...]}',
    ]);
  });

  it('places a syntax error of an items file by line and column: a JSON array as one document, other text line by line', () => {
    expect(
      lines([
        { id: 'a', kind: 'map', items: { file: 'broken.json' }, model: 'm', prompt: 'x' },
        { id: 'b', kind: 'map', items: { file: 'lines.json' }, model: 'm', prompt: 'x' },
      ]),
    ).toEqual([
      `tasks[0].items.file: items file ${join(dir, 'broken.json')} is not valid JSON: line 3, column 15: Expected double-quoted property name (a map needs a JSON array, or JSONL: one item a line)`,
      `tasks[1].items.file: items file ${join(dir, 'lines.json')} is not valid JSONL: line 2, column 8: Expected ':' after property name (a map needs a JSON array, or JSONL: one item a line)`,
    ]);
  });

  it('reports a map from an unknown task or one that cannot give an array, and map fields on other kinds', () => {
    expect(
      lines([
        { id: 'sum', kind: 'reduce', over: ['x'], model: 'm', prompt: 'merge' },
        { id: 'x', model: 'm', prompt: 'x' },
        { id: 'a', kind: 'map', items: { from: 'ghost' }, model: 'm', prompt: 'y' },
        { id: 'b', kind: 'map', items: { from: 'sum' }, model: 'm', prompt: 'y' },
        { id: 'c', model: 'm', prompt: 'y', dedupe: 'text', fanIn: 3 },
        { id: 'd', kind: 'map', items: { values: [] }, budgetUsd: 1, model: 'm', prompt: 'y' },
      ]),
    ).toEqual([
      'models.m.price: required when the plan has a budget: "x" is not in the built-in price table (USD per million tokens)',
      'tasks[2].items.from: unknown task "ghost"',
      'tasks[3].items.from: task "sum" cannot give a list of items: a reduce gives one merged text',
      'tasks[4].dedupe: only a task with "kind": "map" has this field',
      'tasks[4].fanIn: only a task with "kind": "reduce" has this field',
      "tasks[5].budgetUsd: a map calls no model itself: its sub-tasks' calls count against the run's and the models' budgets",
    ]);
  });

  it('reports {{item...}} outside a map (or under another name than `as`) and {{inputs}} outside a reduce', () => {
    expect(
      lines([
        { id: 'a', model: 'm', prompt: 'about {{item.name}}', system: 'merge {{inputs}}' },
        { id: 'b', kind: 'map', as: 'row', items: { values: [1] }, model: 'm', prompt: 'about {{item}}' },
        { id: 'c', kind: 'map', items: { from: 'a' }, model: 'm', prompt: 'each of {{a}}' },
        { id: 'd', kind: 'reduce', over: 'c', model: 'm', prompt: 'merge {{c}}' },
      ]),
    ).toEqual([
      'tasks[0].prompt: {{item.name}} is filled only in a task with "kind": "map" (one sub-task per item)',
      'tasks[0].system: {{inputs}} is filled only in a task with "kind": "reduce"',
      'tasks[1].prompt: {{item}}: this map names its item "row" (as), so write {{row...}}',
      'tasks[2].prompt: {{a}} is where the items come from: write {{item}} for each item instead',
      'tasks[3].prompt: {{c}} is what this reduce merges: write {{inputs}} instead',
    ]);
  });

  it('refuses map and reduce tasks in a planner\'s answer', () => {
    const answer = JSON.stringify([{ id: 'm', kind: 'map', items: { values: [1] }, model: 'm', prompt: 'x' }]);
    const parsed = validatePlan(plan([{ id: 'p', kind: 'plan', model: 'm', prompt: 'plan' }]));
    if (!parsed.ok) throw new Error('the plan should be valid');
    const checked = parseSubtasks(answer, { plan: parsed.plan, planner: { id: 'p', deps: [], depth: 0 }, existing: new Set(['p']), tools: [] });
    expect(checked).toEqual({ ok: false, issues: ['tasks[0].kind: a sub-task cannot be a map task (give the plan itself the map or reduce)'] });
  });
});

describe('validate: items.file is a regular file under 64 MiB', () => {
  it('refuses a device or a folder with its path, without reading it', () => {
    mkdirSync(join(dir, 'folder'), { recursive: true });
    expect(
      lines([
        { id: 'a', kind: 'map', items: { file: '/dev/null' }, model: 'm', prompt: 'x' },
        { id: 'b', kind: 'map', items: { file: '/dev/zero' }, model: 'm', prompt: 'x' },
        { id: 'c', kind: 'map', items: { file: '/dev/urandom' }, model: 'm', prompt: 'x' },
        { id: 'd', kind: 'map', items: { file: 'folder' }, model: 'm', prompt: 'x' },
      ]),
    ).toEqual([
      'tasks[0].items.file: items file /dev/null is not a regular file (a device, a FIFO or a folder): give a JSON or JSONL file',
      'tasks[1].items.file: items file /dev/zero is not a regular file (a device, a FIFO or a folder): give a JSON or JSONL file',
      'tasks[2].items.file: items file /dev/urandom is not a regular file (a device, a FIFO or a folder): give a JSON or JSONL file',
      `tasks[3].items.file: items file ${join(dir, 'folder')} is not a regular file (a device, a FIFO or a folder): give a JSON or JSONL file`,
    ]);
  });

  it.skipIf(process.platform === 'win32')('refuses a FIFO without waiting for a writer', () => {
    const fifo = join(dir, 'items.fifo');
    execFileSync('mkfifo', [fifo]);
    expect(lines([{ id: 'a', kind: 'map', items: { file: 'items.fifo' }, model: 'm', prompt: 'x' }])).toEqual([
      `tasks[0].items.file: items file ${fifo} is not a regular file (a device, a FIFO or a folder): give a JSON or JSONL file`,
    ]);
  });

  it('refuses a file one byte over 64 MiB before reading it', () => {
    // Sparse: its size is known at once, and nothing is written.
    const big = join(dir, 'big.jsonl');
    writeFileSync(big, '');
    truncateSync(big, 64 * 1024 * 1024 + 1);
    expect(lines([{ id: 'a', kind: 'map', items: { file: 'big.jsonl' }, model: 'm', prompt: 'x' }])).toEqual([
      `tasks[0].items.file: items file ${big} is 67108865 bytes, more than the 64 MiB (67108864 bytes) an items file may hold: split the items`,
    ]);
  });
});

describe('validate: names that would clash', () => {
  it('refuses a map item name ("as") that is also a dep\'s id, or the start of one, with its path', () => {
    expect(
      lines([
        { id: 'x', model: 'm', prompt: 'x' },
        { id: 'item', model: 'm', prompt: 'x' },
        { id: 'row.notes', model: 'm', prompt: 'x' },
        { id: 'a', kind: 'map', as: 'x', items: { values: [1] }, deps: ['x'], model: 'm', prompt: '{{x}}' },
        { id: 'b', kind: 'map', items: { values: [1] }, deps: ['x', 'item'], model: 'm', prompt: '{{item}}' },
        { id: 'c', kind: 'map', as: 'row', items: { values: [{ notes: 1 }] }, deps: ['row.notes'], model: 'm', prompt: '{{row.notes}}' },
        { id: 'd', kind: 'map', as: 'x', items: { from: 'x' }, model: 'm', prompt: 'each one' },
      ]),
    ).toEqual([
      'tasks[3].as: "x" is also the id of a dep of this map: {{x}} would place the dep\'s output, not the item; give the item another name',
      'tasks[4].deps[1]: "item" is also the name of this map\'s item ("as" unset): {{item}} would place this dep\'s output, not the item; set "as" to another name',
      'tasks[5].as: "row" is the start of dep "row.notes": {{row.notes}} would read the dep, not the item; give the item another name',
      'tasks[6].as: "x" is also the id of a dep of this map: {{x}} would place the dep\'s output, not the item; give the item another name',
    ]);
  });

  it('refuses a task id under a map\'s, a reduce\'s or a planner\'s own (the ids the run makes there), with its path', () => {
    expect(
      lines([
        { id: 'm', kind: 'map', items: { values: [1, 2] }, model: 'm', prompt: '{{item}}' },
        { id: 'm/0', model: 'm', prompt: 'x' },
        { id: 'r', kind: 'reduce', over: 'm', model: 'm', prompt: '{{inputs}}' },
        { id: 'r/L1/0', model: 'm', prompt: 'x' },
        { id: 'p', kind: 'plan', model: 'm', prompt: 'plan' },
        { id: 'p/a', model: 'm', prompt: 'x' },
        { id: 'q', model: 'm', prompt: 'x' },
        { id: 'q/a', model: 'm', prompt: 'an ordinary task may name its children so' },
      ]),
    ).toEqual([
      'tasks[1].id: "m/0" is under map "m", whose items the run names "m/<index>" or "m/<key>": choose an id outside "m/"',
      'tasks[3].id: "r/L1/0" is under reduce "r", whose groups the run names "r/L<level>/<n>": choose an id outside "r/"',
      'tasks[5].id: "p/a" is under planner "p", whose sub-tasks the run names "p/<id>": choose an id outside "p/"',
    ]);
  });

  it('refuses the same in a planner\'s answer: a sub-task under a sibling planner', () => {
    const parsed = validatePlan(plan([{ id: 'p', kind: 'plan', model: 'm', prompt: 'plan' }]));
    if (!parsed.ok) throw new Error('the plan should be valid');
    const planWithDepth = { ...parsed.plan, limits: { ...parsed.plan.limits, maxDepth: 2 } };
    const answer = JSON.stringify([{ id: 'q', kind: 'plan', model: 'm', prompt: 'plan more' }, { id: 'q/x', model: 'm', prompt: 'x' }]);
    expect(parseSubtasks(answer, { plan: planWithDepth, planner: { id: 'p', deps: [], depth: 0 }, existing: new Set(['p']), tools: [] })).toEqual({
      ok: false,
      issues: ['tasks[1].id: "q/x" is under planner "q", whose sub-tasks the run names "q/<id>": choose an id outside "q/"'],
    });
  });

  it('an expansion whose ids a task of the run already has fails that task clearly (not the run)', () => {
    const parsed = validatePlan(plan([{ id: 'm', kind: 'map', items: { values: ['a', 'b'] }, model: 'm', prompt: '{{item}}' }]));
    if (!parsed.ok) throw new Error('the plan should be valid');
    // A plan that passed before ids under a map's were refused (journaled by an older version).
    const old = { ...parsed.plan, tasks: [...parsed.plan.tasks, { ...parsed.plan.tasks[0]!, id: 'm/1', kind: 'task' as const, items: undefined }] };
    const expander = new PlanExpander(old, { toolNames: [] });
    expect(expander.expand({ taskId: 'm', attempt: 1, output: '', depth: 0, map: { prompt: '{{item}}', deps: [], outputs: [] } })).toEqual({
      ok: false,
      issues: ['its sub-task "m/1" would have the id of a task the run already has: rename that task'],
    });
  });
});

describe('validate: smaller map and reduce rules', () => {
  it('refuses a map that reads its items from itself, and a reduce over a map known to have no items', () => {
    expect(
      lines([
        { id: 'a', kind: 'map', items: { from: 'a' }, model: 'm', prompt: '{{item}}' },
        { id: 'none', kind: 'map', items: { values: [] }, model: 'm', prompt: '{{item}}' },
        { id: 'blank', kind: 'map', items: { file: 'empty.jsonl' }, model: 'm', prompt: '{{item}}' },
        { id: 'r1', kind: 'reduce', over: 'none', model: 'm', prompt: '{{inputs}}' },
        { id: 'r2', kind: 'reduce', over: 'blank', model: 'm', prompt: '{{inputs}}' },
      ]),
    ).toEqual([
      'tasks[0].items.from: a map cannot read its items from its own output',
      'tasks[3].over: map "none" has no items: a reduce over it would have nothing to merge',
      'tasks[4].over: map "blank" has no items: a reduce over it would have nothing to merge',
    ]);
  });

  it('reads a `from` output in a ```json fence as structured outputs do', () => {
    expect(itemsOfOutput('list', '```json\n["x", "y"]\n```')).toEqual({ ok: true, items: ['x', 'y'] });
    expect(itemsOfOutput('list', '  ["x"]  ')).toEqual({ ok: true, items: ['x'] });
    expect(itemsOfOutput('list', 'here: ["x"]')).toEqual({ ok: false, message: 'the output of "list" is not JSON, so it holds no list of items (give that task an output schema of type "array")' });
  });
});

describe('validate: reduce', () => {
  it('reports a reduce over nothing, over an unknown task, over one that gives no list, without over, with fanIn < 2, and a cycle through over', () => {
    expect(
      lines([
        { id: 'x', model: 'm', prompt: 'x' },
        { id: 'a', kind: 'reduce', over: [], model: 'm', prompt: '{{inputs}}' },
        { id: 'b', kind: 'reduce', over: 'ghost', model: 'm', prompt: '{{inputs}}' },
        { id: 'c', kind: 'reduce', model: 'm', prompt: '{{inputs}}' },
        { id: 'd', kind: 'reduce', over: 'a', fanIn: 1, model: 'm', prompt: '{{inputs}}' },
        { id: 'e', kind: 'reduce', over: 'f', model: 'm', prompt: '{{inputs}}' },
        { id: 'f', kind: 'map', items: { from: 'e' }, model: 'm', prompt: '{{item}}' },
      ]),
    ).toEqual([
      'tasks[4].fanIn: a reduce merges at least 2 inputs per call: fanIn must be an integer >= 2',
      'tasks[5].over: cycle: e -> f -> e',
      'tasks[1].over: a reduce over nothing: name a map, a task with a JSON array output, or at least one task',
      'tasks[2].over: unknown task "ghost"',
      'tasks[3].over: required: the map (or task with a JSON array output, or list of tasks) whose outputs this reduce merges',
      'tasks[4].over: task "a" cannot give a list of inputs: a reduce gives one merged text (to merge several tasks\' outputs, list them: "over": ["a", "b"])',
      'tasks[6].items.from: task "e" cannot give a list of items: a reduce gives one merged text',
    ]);
  });
});

describe('pure parts', () => {
  it('reads JSONL skipping blank lines, and fills {{item}} and {{item.a.b}} (missing fields are an error)', () => {
    expect(loadItemsFile(join(dir, 'items.jsonl'))).toEqual({ ok: true, items: [{ sku: 'a' }, { sku: 'b' }] });
    expect(fillItem('{{item.a.b}} / {{ item }} / {{other}}', 'item', { a: { b: 'deep' } })).toEqual({ ok: true, text: 'deep / {"a":{"b":"deep"}} / {{other}}' });
    expect(fillItem('{{item.zip}}', 'item', { a: 1 })).toEqual({ ok: false, message: '{{item.zip}}: the item has no field "zip"' });
  });

  it('dedupes by a nested field or normalized text, keeping the first; an output without the field is kept', () => {
    const out: Record<string, string> = { a: '{"k":{"v":1}}', b: '{"k":{"v":1},"x":2}', c: 'plain', d: '{"k":{"v":2}}' };
    expect(dedupeOutputs(['a', 'b', 'c', 'd'], (id) => out[id]!, 'k.v')).toEqual({ kept: ['a', 'c', 'd'], dropped: 1 });
    expect(dedupeOutputs(['a', 'b'], (id) => ({ a: ' Hello\n World ', b: 'hello world' })[id]!, 'text')).toEqual({ kept: ['a'], dropped: 1 });
  });

  it('plans no groups for no inputs (a map that gave nothing), and ends', () => {
    expect(planGroups('r', [], 16)).toEqual({ ok: true, groups: [] });
  });

  it('builds a tree of depth ceil(log_fanIn N), and splits by size when sizes are known', () => {
    const refs = Array.from({ length: 10_000 }, (_, i) => `m/${i}`);
    const tree = planGroups('r', refs, 16);
    expect(tree.ok).toBe(true);
    const groups = tree.ok ? tree.groups : [];
    const depth = Math.max(...groups.map((g) => Number(/\/L(\d+)\//.exec(g.id)![1])));
    expect(depth).toBe(Math.ceil(Math.log(10_000) / Math.log(16)));
    expect(groups.at(-1)!.id).toBe(`r/L${depth}/0`);
    expect(groups.filter((g) => g.id.startsWith('r/L1/')).flatMap((g) => g.inputs)).toEqual(refs);
    // Sizes 40 each, room 100: two a group.
    const split = planGroups('g', ['a', 'b', 'c', 'd', 'e'], 8, { of: () => 40, room: 100, outputsOfGroups: false });
    expect(split.ok && split.groups.map((g) => g.inputs)).toEqual([['a', 'b'], ['c', 'd'], ['e'], ['g/L1/0', 'g/L1/1', 'g/L1/2']]);
    expect(planGroups('g', ['a'], 8, { of: () => 200, room: 100, outputsOfGroups: false })).toMatchObject({ ok: false });
    expect(planGroups('g', ['a', 'b'], 8, { of: () => 60, room: 100, outputsOfGroups: true })).toMatchObject({ ok: false, message: expect.stringContaining('no two merged outputs fit') });
  });
});
