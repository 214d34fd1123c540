/**
 * jsonProblem (src/fn/json.ts): what a plan function returned is JSON, or one line naming the
 * first place it is not and what is there. Pure: every case is a literal value and a literal line.
 */
import { describe, expect, it } from 'vitest';
import { jsonProblem } from '../../src/fn/json.js';

class Foo {
  x = 1;
}

describe('jsonProblem', () => {
  it.each([
    ['null', null],
    ['a boolean', false],
    ['a finite number', -0.5],
    ['a string', 'ok'],
    ['an empty array', []],
    ['an empty object', {}],
    ['nested plain values', { orders: [{ id: 1, at: '2024-01-01T00:00:00.000Z', tags: ['a'], paid: true, note: null }] }],
    ['an object without a prototype', Object.assign(Object.create(null) as object, { a: 1 })],
    ['one object reached twice (not a cycle)', (() => { const shared = { n: 1 }; return { a: shared, b: [shared, shared] }; })()],
  ])('accepts %s', (_what, value) => {
    expect(jsonProblem(value)).toBeUndefined();
  });

  it.each([
    ['a Date, with what to return instead', { orders: [{}, {}, { at: new Date(0) }] }, '$.orders[2].at is a Date (return its toISOString())'],
    ['undefined at the top', undefined, '$ is undefined (return null or a value)'],
    ['undefined in an object', { a: 1, b: undefined }, '$.b is undefined (leave the field out, or use null)'],
    ['undefined in an array', [1, undefined], '$[1] is undefined (use null)'],
    ['a hole in an array', [1, , 3], '$[1] is undefined (use null)'],
    ['a function', { a: () => 1 }, '$.a is a function'],
    ['a symbol', { s: Symbol('x') }, '$.s is a symbol'],
    ['NaN', { n: Number.NaN }, '$.n is NaN'],
    ['Infinity', { n: [Infinity] }, '$.n[0] is Infinity'],
    ['-Infinity', -Infinity, '$ is -Infinity'],
    ['a BigInt', { big: 10n }, '$.big is a BigInt (return a number, or a string of its digits)'],
    ['a Map', { x: new Map() }, '$.x is a Map (return a plain object, or an array of entries)'],
    ['a Set', { x: new Set([1]) }, '$.x is a Set (return an array)'],
    ['a class instance', { p: new Foo() }, '$.p is an instance of Foo (return a plain object)'],
    ['an instance of an anonymous class', { p: new (class {})() }, '$.p is an instance of a class (return a plain object)'],
    ['a typed array', { bytes: new Uint8Array(2) }, '$.bytes is a Uint8Array (return an array of numbers, or a base64 string)'],
    ['an Error', { e: new Error('boom') }, '$.e is an Error (return its message)'],
    ['a RegExp', { r: /x/ }, '$.r is a RegExp (return its source)'],
    ['a Promise', { later: Promise.resolve(1) }, '$.later is a Promise (await it)'],
    ['a boxed string', { s: new String('x') }, '$.s is an instance of String (return a plain object)'],
    ['a field that is not an identifier, quoted', { 'a b': { 'c-d': [undefined] } }, '$["a b"]["c-d"][0] is undefined (use null)'],
    ['a symbol key', { [Symbol('k')]: 1 }, '$ has a field keyed by a symbol (JSON keys are strings)'],
  ])('names %s', (_what, value, line) => {
    expect(jsonProblem(value)).toBe(line);
  });

  it('names a cycle where it closes', () => {
    const self: Record<string, unknown> = { a: 1 };
    self.self = self;
    expect(jsonProblem(self)).toBe('$.self is a cycle (it contains itself)');
    const list: unknown[] = [1];
    list.push({ back: list });
    expect(jsonProblem({ list })).toBe('$.list[1].back is a cycle (it contains itself)');
  });

  it('names the first problem in document order', () => {
    expect(jsonProblem({ a: [1, { b: new Date(0) }], c: undefined })).toBe('$.a[1].b is a Date (return its toISOString())');
  });

  it('names a field whose getter throws', () => {
    const value = Object.defineProperty({}, 'bad', { enumerable: true, get: () => { throw new Error('nope'); } });
    expect(jsonProblem(value)).toBe('$.bad could not be read: nope');
  });

  it('bounds the depth without overflowing the stack: 1,000 levels are JSON, 1,001 are not, 100,000 say so at once', () => {
    const nest = (n: number) => {
      let v: unknown = 0;
      for (let i = 0; i < n; i++) v = [v];
      return v;
    };
    // 1,000 arrays around a number: the number is at depth 1,000.
    expect(jsonProblem(nest(1000))).toBeUndefined();
    expect(jsonProblem(nest(1001))).toBe('$ is nested more than 1000 levels deep (at $[0][0][0][0][0][0][0][0]…)');
    let deep: Record<string, unknown> = {};
    const root = deep;
    for (let i = 0; i < 100_000; i++) deep = (deep.a = {}) as Record<string, unknown>;
    expect(jsonProblem(root)).toBe('$ is nested more than 1000 levels deep (at $.a.a.a.a.a.a.a.a…)');
  });

  it('checks a wide value without recursion: 100,000 fields, the last one bad', () => {
    const wide: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) wide[`k${i}`] = i;
    expect(jsonProblem(wide)).toBeUndefined();
    wide.k99999 = Number.NaN;
    expect(jsonProblem(wide)).toBe('$.k99999 is NaN');
  });
});
