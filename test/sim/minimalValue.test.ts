/**
 * The simulator's minimal tool arguments (`[[sim:tool NAME]]` without arguments, `[[sim:tools]]`,
 * tool_choice any/tool) are built synchronously from a schema the caller sent: they are capped
 * like structured-output samples (1,000 items an array, 10,000 values, 10,000 characters a
 * string), follow local `$ref`s, and end on a schema that refers to itself.
 */
import { describe, expect, it } from 'vitest';
import { minimalValue } from '../../src/sim/model.js';

/** Every value in a JSON value, itself included. */
function countValues(value: unknown): number {
  let n = 0;
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    n += 1;
    if (Array.isArray(v)) stack.push(...v);
    else if (v !== null && typeof v === 'object') stack.push(...Object.values(v));
  }
  return n;
}

describe('minimalValue: bounded', () => {
  it('caps a string at 10,000 characters, whatever minLength asks', () => {
    const value = minimalValue({ type: 'string', minLength: 1e9 }, 0) as string;
    expect(value.length).toBe(10_000);
    expect(value.startsWith('simxxx')).toBe(true);
  });

  it('caps an array at 1,000 items, whatever minItems asks', () => {
    expect(minimalValue({ type: 'array', minItems: 1e10, items: { type: 'integer' } }, 0)).toEqual(Array.from({ length: 1000 }, () => 0));
  });

  it('caps the whole value at 10,000 values: nested minItems do not multiply', () => {
    const value = minimalValue({ type: 'array', minItems: 1000, items: { type: 'array', minItems: 1000, items: { type: 'integer' } } }, 0) as number[][];
    expect(value[0]).toHaveLength(1000);
    expect(countValues(value)).toBeLessThanOrEqual(10_000);
    expect(value.length).toBeLessThan(1000);
  });

  it('follows a local $ref, so a recursive tree schema gets a valid value', () => {
    const tree = {
      $ref: '#/definitions/node',
      definitions: {
        node: {
          type: 'object',
          required: ['name', 'children'],
          properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/definitions/node' } } },
        },
      },
    };
    expect(minimalValue(tree, 0)).toEqual({ name: 'sim', children: [] });
    expect(minimalValue({ type: 'array', minItems: 2, items: { $ref: '#/$defs/a~1b' }, $defs: { 'a/b': { const: 'x' } } }, 0)).toEqual(['x', 'x']);
  });

  it('ends on a schema that requires itself, and on a $ref to itself', () => {
    const chain = { type: 'object', required: ['next'], properties: { next: { $ref: '#' } } };
    // Each step (a property, a $ref) is one level; past 12 levels the value is {}.
    expect(minimalValue(chain, 0)).toEqual({ next: { next: { next: { next: { next: { next: { next: {} } } } } } } });
    expect(minimalValue({ $ref: '#' }, 0)).toEqual({});
    expect(minimalValue({ anyOf: [{ $ref: '#' }] }, 0)).toEqual({});
  });
});
