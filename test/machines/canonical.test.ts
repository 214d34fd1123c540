import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, toolCallKey } from '../../machines/canonical.js';

/** The same value with the keys of every object in reverse order. */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .reverse()
        .map((k) => [k, reverseKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

describe('canonicalJson', () => {
  it('gives the same string whatever the key order', () => {
    expect(canonicalJson({ a: 1, b: 2 })).toBe(canonicalJson({ b: 2, a: 1 }));
    expect(canonicalJson({ b: 2, a: 1 })).toBe('{"a":1,"b":2}');
  });

  it('sorts keys at every depth but keeps array order', () => {
    expect(canonicalJson({ z: [{ y: 1, x: 2 }, 3, 'b', 'a'], a: { d: null, c: true } })).toBe(
      '{"a":{"c":true,"d":null},"z":[{"x":2,"y":1},3,"b","a"]}',
    );
  });

  it('drops undefined, function and symbol properties like JSON.stringify, and nulls them in arrays', () => {
    expect(canonicalJson({ a: undefined, b: () => 1, c: Symbol('s'), d: 1 })).toBe('{"d":1}');
    expect(canonicalJson([undefined, () => 1, 2])).toBe('[null,null,2]');
  });

  it('writes non-finite numbers as null, honours toJSON and unboxes primitives', () => {
    expect(canonicalJson([NaN, Infinity, -0])).toBe('[null,null,0]');
    expect(canonicalJson({ when: new Date(0) })).toBe('{"when":"1970-01-01T00:00:00.000Z"}');
    expect(canonicalJson({ n: new Number(3), s: new String('x'), b: new Boolean(false) })).toBe('{"b":false,"n":3,"s":"x"}');
  });

  it('returns "null" for a top-level value JSON cannot hold', () => {
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson(() => 1)).toBe('null');
  });

  it('escapes strings and keys exactly as JSON does', () => {
    const value = { 'k"\n\u0000': 'v\\"\u2028' };
    expect(canonicalJson(value)).toBe(JSON.stringify(value));
  });

  it('writes a shared (non-cyclic) object each time it appears', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"x":1},"b":[{"x":1}]}');
  });

  it('throws a clear error on a cycle, naming where it closes', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.child = { parent: a };
    expect(() => canonicalJson(a)).toThrow(TypeError);
    expect(() => canonicalJson(a)).toThrow(/cyclic structure \(\$\.child\.parent refers back/);
    const list: unknown[] = [];
    list.push(list);
    expect(() => canonicalJson(list)).toThrow(/\$\[0\]/);
  });

  it('throws a clear error on a BigInt', () => {
    expect(() => canonicalJson({ n: 1n })).toThrow(/BigInt \(at \$\.n\)/);
  });

  it('parses back to what JSON.stringify would give, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { seed: 42, numRuns: 300 },
    );
  });

  it('does not depend on key order, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(reverseKeys(value))).toBe(canonicalJson(value));
      }),
      { seed: 42, numRuns: 300 },
    );
  });
});

describe('toolCallKey', () => {
  it('is the name, a NUL and the canonical arguments', () => {
    expect(toolCallKey('read_file', { path: 'a', limit: 2 })).toBe('read_file\u0000{"limit":2,"path":"a"}');
  });

  it('tells apart the same arguments to different tools and different arguments to one tool', () => {
    expect(toolCallKey('a', { x: 1 })).not.toBe(toolCallKey('b', { x: 1 }));
    expect(toolCallKey('a', { x: 1 })).not.toBe(toolCallKey('a', { x: 2 }));
    expect(toolCallKey('a', [1, 2])).not.toBe(toolCallKey('a', [2, 1]));
  });
});
