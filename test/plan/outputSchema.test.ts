/**
 * Output schemas and patterns that a plan may hold and a model's answer meets (src/plan/structured.ts,
 * outputSchema.ts, userPattern.ts): a schema with `$id` compiles the same every time and beside
 * another with the same `$id`; a schema too deep, or whose `$ref`s loop without reaching a value,
 * is a plan error with its path (never a stack overflow); patterns run in linear time (RE2), or,
 * with lookaround or backreferences, with a time bound; one that does not compile is refused.
 */
import { describe, expect, it } from 'vitest';
import { validatePlan } from '../../src/plan/index.js';
import { checkOutput } from '../../src/plan/structured.js';
import { userPattern } from '../../src/plan/userPattern.js';

function plan(tasks: unknown[]) {
  return { providers: { p: { type: 'sim' } }, models: { m: { provider: 'p', model: 'x' } }, tasks };
}

function lines(tasks: unknown[]): string[] {
  const result = validatePlan(plan(tasks), { env: {} });
  return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
}

/** The same schema as a new object each time, as it comes back from the journal or an actor's input. */
const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** `{type: object, properties: {a: ...}}` nested `levels` times around a string. */
function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < levels; i++) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

describe('a schema with $id', () => {
  const withId = { $id: 'https://example.com/product', type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };

  it('passes validate, then checks every answer (each check given a fresh copy of the schema)', () => {
    expect(lines([{ id: 'a', model: 'm', prompt: 'A', output: { schema: copy(withId) } }])).toEqual([]);
    for (let i = 0; i < 3; i++) expect(checkOutput('{"name": "lamp"}', { schema: copy(withId) })).toEqual({ ok: true, text: '{"name":"lamp"}' });
    expect(checkOutput('{"name": 1}', { schema: copy(withId) })).toEqual({ ok: false, code: 'invalid_output', problems: ['the JSON at /name must be string'] });
  });

  it('two tasks sharing a $id schema make a valid plan', () => {
    expect(
      lines([
        { id: 'a', model: 'm', prompt: 'A', output: { schema: copy(withId) } },
        { id: 'b', model: 'm', prompt: 'B', output: { schema: copy(withId) } },
      ]),
    ).toEqual([]);
  });

  it('two different schemas with the same $id each check their own answers', () => {
    const text = { $id: 'urn:example:answer', type: 'string' };
    const number = { $id: 'urn:example:answer', type: 'number' };
    expect(checkOutput('"x"', { schema: copy(text) })).toEqual({ ok: true, text: '"x"' });
    expect(checkOutput('1', { schema: copy(number) })).toEqual({ ok: true, text: '1' });
    expect(checkOutput('1', { schema: copy(text) })).toEqual({ ok: false, code: 'invalid_output', problems: ['the JSON must be string'] });
  });

  it('a $ref to a nested $id resolves inside its own schema, however often it is compiled', () => {
    const schema = {
      $id: 'https://example.com/root',
      definitions: { sku: { $id: 'https://example.com/sku', type: 'string', minLength: 2 } },
      type: 'object',
      properties: { sku: { $ref: 'https://example.com/sku' } },
    };
    expect(lines([{ id: 'a', model: 'm', prompt: 'A', output: { schema: copy(schema) } }, { id: 'b', model: 'm', prompt: 'B', output: { schema: copy(schema) } }])).toEqual([]);
    expect(checkOutput('{"sku": "AB"}', { schema: copy(schema) })).toEqual({ ok: true, text: '{"sku":"AB"}' });
    expect(checkOutput('{"sku": "A"}', { schema: copy(schema) })).toEqual({ ok: false, code: 'invalid_output', problems: ['the JSON at /sku must NOT have fewer than 2 characters'] });
  });
});

describe('a schema too deep, or looping', () => {
  it('refuses a schema nested past 64 levels with the path where it passes them, and takes one at 64', () => {
    const path = 'tasks[0].output.schema' + '.properties.a'.repeat(32) + '.properties';
    expect(lines([{ id: 'a', model: 'm', prompt: 'A', output: { schema: nested(1000) } }])).toEqual([`${path}: nested more than 64 levels deep: flatten the schema (a deeper one could overflow the stack of every check)`]);
    expect(lines([{ id: 'a', model: 'm', prompt: 'A', output: { schema: nested(33) } }])).toEqual([`${path}: nested more than 64 levels deep: flatten the schema (a deeper one could overflow the stack of every check)`]);
    // 32 levels of {properties: {a: ...}} are 64 levels of JSON: the most that is taken.
    expect(lines([{ id: 'a', model: 'm', prompt: 'A', output: { schema: nested(32) } }])).toEqual([]);
  });

  it('refuses $refs that loop without reaching a value, naming the $ref that closes the loop', () => {
    expect(
      lines([
        { id: 'a', model: 'm', prompt: 'A', output: { schema: { definitions: { a: { $ref: '#/definitions/b' }, b: { $ref: '#/definitions/a' } }, $ref: '#/definitions/a' } } },
        { id: 'b', model: 'm', prompt: 'B', output: { schema: { $ref: '#' } } },
        { id: 'c', model: 'm', prompt: 'C', output: { schema: { anyOf: [{ type: 'string' }, { $ref: '#' }] } } },
        { id: 'd', model: 'm', prompt: 'D', output: { schema: { $defs: { x: { allOf: [{ $ref: 'urn:example:self#/$defs/x' }] } }, $id: 'urn:example:self', $ref: '#/$defs/x' } } },
      ]),
    ).toEqual([
      'tasks[0].output.schema.definitions.b["$ref"]: a $ref cycle that never reaches a value (#/definitions/a -> #/definitions/b -> #/definitions/a): checking an answer would never end',
      'tasks[1].output.schema["$ref"]: a $ref cycle that never reaches a value (# -> #): checking an answer would never end',
      'tasks[2].output.schema.anyOf[1]["$ref"]: a $ref cycle that never reaches a value (# -> #/anyOf/1 -> #): checking an answer would never end',
      'tasks[3].output.schema["$defs"].x.allOf[0]["$ref"]: a $ref cycle that never reaches a value (#/$defs/x -> #/$defs/x/allOf/0 -> #/$defs/x): checking an answer would never end',
    ]);
  });

  it('takes a recursive schema whose $ref goes through a value (a tree), and checks a deep answer without throwing', () => {
    const tree = { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } }, required: ['name'] };
    expect(lines([{ id: 'a', model: 'm', prompt: 'A', output: { schema: tree } }])).toEqual([]);
    expect(checkOutput('{"name": "a", "children": [{"name": "b", "children": []}]}', { schema: tree })).toEqual({ ok: true, text: '{"name":"a","children":[{"name":"b","children":[]}]}' });
    // An answer nested 20,000 levels deep: a clear invalid output, not a stack overflow.
    const deep = '{"name":"x","children":['.repeat(20_000) + '{"name":"y"}' + ']}'.repeat(20_000);
    expect(checkOutput(deep, { schema: tree })).toEqual({ ok: false, code: 'invalid_output', problems: ['the JSON is nested too deeply to check: answer with a flatter value'] });
  });
});

describe('patterns: linear time, or a time bound', () => {
  it('validate refuses a pattern that does not compile, in accept and in the schema, with its path; lookaround and backreferences are taken', () => {
    expect(
      lines([
        { id: 'a', model: 'm', prompt: 'A', accept: { pattern: '([a-z' } },
        { id: 'b', model: 'm', prompt: 'B', output: { schema: { type: 'object', properties: { code: { type: 'string', pattern: '(a' } }, patternProperties: { 'x{2,1}': { type: 'string' } } } } },
        { id: 'c', model: 'm', prompt: 'C', accept: { pattern: '^(?![\\s\\S]*TODO)' }, output: { schema: { type: 'string', pattern: '^(a)\\1$' } } },
      ]),
    ).toEqual([
      expect.stringMatching(/^tasks\[0\]\.accept\.pattern: not a valid regular expression: .*Unterminated character class/),
      // A schema's own keywords first, then its sub-schemas'.
      expect.stringMatching(/^tasks\[1\]\.output\.schema\.patternProperties\["x\{2,1\}"\]: not a valid regular expression: .*out of order/),
      expect.stringMatching(/^tasks\[1\]\.output\.schema\.properties\.code\.pattern: not a valid regular expression: .*Unterminated group/),
    ]);
  });

  it('a backtracking pattern ends at once on a long answer: ^(a+)+$ on 10,000 characters runs in linear time', () => {
    const answer = 'a'.repeat(10_000) + 'b';
    expect(userPattern('^(a+)+$')).toMatchObject({ ok: true, linear: true });
    expect(checkOutput(answer, { pattern: '^(a+)+$' })).toEqual({ ok: false, code: 'rejected_output', problems: ['the answer does not match the pattern /^(a+)+$/'] });
    expect(checkOutput('a'.repeat(10_000), { pattern: '^(a+)+$' })).toEqual({ ok: true, text: 'a'.repeat(10_000) });
    const schema = { type: 'object', properties: { code: { type: 'string', pattern: '^(a+)+$' } } };
    expect(checkOutput(JSON.stringify({ code: answer }), { schema })).toEqual({ ok: false, code: 'invalid_output', problems: ['the JSON at /code must match pattern "^(a+)+$"'] });
  });

  it('a pattern with lookaround or a backreference runs on JavaScript\'s engine (bounded: test/integration/structured.test.ts)', () => {
    expect(userPattern('^(?![\\s\\S]*TODO)')).toMatchObject({ ok: true, linear: false });
    expect(checkOutput('all done', { pattern: '^(?![\\s\\S]*TODO)' })).toEqual({ ok: true, text: 'all done' });
    expect(checkOutput('a TODO left', { pattern: '^(?![\\s\\S]*TODO)' })).toMatchObject({ ok: false, code: 'rejected_output' });
    expect(checkOutput('"aa"', { schema: { type: 'string', pattern: '^(a)\\1$' } })).toEqual({ ok: true, text: '"aa"' });
    expect(checkOutput('"ab"', { schema: { type: 'string', pattern: '^(a)\\1$' } })).toMatchObject({ ok: false, code: 'invalid_output' });
  });

  it('a pattern too large for linear time runs with the time bound too', () => {
    expect(userPattern('a{1000}b{1000}c{1000}')).toMatchObject({ ok: true, linear: false });
    expect(checkOutput('a'.repeat(1000) + 'b'.repeat(1000) + 'c'.repeat(1000), { pattern: 'a{1000}b{1000}c{1000}' })).toMatchObject({ ok: true });
  });

  it('keeps the JavaScript escapes a plan writes (\\d, \\u00e9, \\/, named groups), and Unicode letters', () => {
    expect(userPattern('SKU-\\d+ caf\\u00e9 a\\/(?<x>b)')).toMatchObject({ ok: true, linear: true });
    expect(checkOutput('SKU-123 café a/b', { pattern: 'SKU-\\d+ caf\\u00e9 a\\/(?<x>b)' })).toMatchObject({ ok: true });
    expect(checkOutput('Ωμέγα', { pattern: '^\\p{L}+$' })).toMatchObject({ ok: true });
    expect(checkOutput('x', { pattern: '^\\d$' })).toMatchObject({ ok: false, code: 'rejected_output' });
  });
});
