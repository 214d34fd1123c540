/**
 * `when` (machines/when.ts): a condition on deps' outputs, evaluated on values given here, and
 * what the plan's checks know of one statically (never true).
 */
import { describe, expect, it } from 'vitest';
import { describeCondition, holds, jsonEqual, neverTrue, testsOf, valueAt, whyFalse, type Condition, type OutputOf } from '../../machines/when.js';

const outputs: Record<string, unknown> = {
  classify: { urgency: 'high', score: 2, tags: ['a', 'b'], meta: { lang: 'en', reviewed: null }, items: [{ id: 'x1' }, { id: 'x2' }] },
  text: 'plain answer',
  list: [1, 2, 3],
};
/** `failed` has no output (it did not complete). */
const outputOf: OutputOf = (task) => (Object.hasOwn(outputs, task) ? { value: outputs[task] } : undefined);
const check = (cond: Condition) => holds(cond, outputOf);

describe('a test on one dep', () => {
  it('equals compares deep JSON at a dotted path (array indexes as numbers), whole output without one', () => {
    expect(check({ task: 'classify', path: 'urgency', equals: 'high' })).toBe(true);
    expect(check({ task: 'classify', path: 'urgency', equals: 'low' })).toBe(false);
    expect(check({ task: 'classify', path: 'items.1.id', equals: 'x2' })).toBe(true);
    expect(check({ task: 'classify', path: 'tags', equals: ['a', 'b'] })).toBe(true);
    expect(check({ task: 'classify', path: 'tags', equals: ['b', 'a'] })).toBe(false);
    expect(check({ task: 'classify', path: 'meta', equals: { reviewed: null, lang: 'en' } })).toBe(true);
    expect(check({ task: 'classify', path: 'meta', equals: { lang: 'en' } })).toBe(false);
    expect(check({ task: 'classify', path: 'meta.reviewed', equals: null })).toBe(true);
    expect(check({ task: 'classify', path: 'score', equals: '2' })).toBe(false);
    expect(check({ task: 'text', equals: 'plain answer' })).toBe(true);
    expect(check({ task: 'list', equals: [1, 2, 3] })).toBe(true);
  });

  it('in is one of the values; notEquals is not equals; exists is whether the path leads somewhere', () => {
    expect(check({ task: 'classify', path: 'urgency', in: ['high', 'critical'] })).toBe(true);
    expect(check({ task: 'classify', path: 'urgency', in: ['low'] })).toBe(false);
    expect(check({ task: 'classify', path: 'urgency', in: [] })).toBe(false);
    expect(check({ task: 'classify', path: 'urgency', notEquals: 'low' })).toBe(true);
    expect(check({ task: 'classify', path: 'urgency', notEquals: 'high' })).toBe(false);
    expect(check({ task: 'classify', path: 'meta.lang', exists: true })).toBe(true);
    expect(check({ task: 'classify', path: 'meta.reviewed', exists: true })).toBe(true);
    expect(check({ task: 'classify', path: 'meta.nope', exists: true })).toBe(false);
    expect(check({ task: 'classify', path: 'meta.nope', exists: false })).toBe(true);
    expect(check({ task: 'classify', path: 'items.2.id', exists: false })).toBe(true);
  });

  it('a value that is not there (a missing field, a dep that did not complete) equals nothing', () => {
    for (const task of ['failed', 'classify']) {
      const path = task === 'failed' ? 'urgency' : 'missing';
      expect(check({ task, path, equals: null }), task).toBe(false);
      expect(check({ task, path, in: [null, 'high'] }), task).toBe(false);
      expect(check({ task, path, notEquals: 'high' }), task).toBe(true);
      expect(check({ task, path, exists: false }), task).toBe(true);
      expect(check({ task, path, exists: true }), task).toBe(false);
    }
    expect(check({ task: 'failed', exists: false })).toBe(true);
    // A text has no fields; a field named like an index is no index of an array.
    expect(check({ task: 'text', path: 'length', exists: true })).toBe(false);
    expect(check({ task: 'list', path: 'length', exists: true })).toBe(false);
    expect(check({ task: 'list', path: '01', exists: true })).toBe(false);
    // Own fields only: nothing an object's prototype lends.
    expect(check({ task: 'classify', path: 'constructor', exists: true })).toBe(false);
  });
});

describe('combinations', () => {
  const high: Condition = { task: 'classify', path: 'urgency', equals: 'high' };
  const en: Condition = { task: 'classify', path: 'meta.lang', equals: 'en' };
  const no: Condition = { task: 'classify', path: 'urgency', equals: 'low' };

  it('all, any and not', () => {
    expect(check({ all: [high, en] })).toBe(true);
    expect(check({ all: [high, no] })).toBe(false);
    expect(check({ any: [no, en] })).toBe(true);
    expect(check({ any: [no, { not: high }] })).toBe(false);
    expect(check({ not: no })).toBe(true);
    expect(check({ not: { all: [high, { any: [no, en] }] } })).toBe(false);
  });

  it('lists its tests with where each sits', () => {
    expect(testsOf({ all: [high, { not: { any: [no, en] } }] }).map((t) => t.at)).toEqual([
      ['all', 0],
      ['all', 1, 'not', 'any', 0],
      ['all', 1, 'not', 'any', 1],
    ]);
  });
});

describe('never true', () => {
  const some: Condition = { task: 'a', equals: 1 };
  const none: Condition = { task: 'a', in: [] };
  it('in: [], an all with one, an any of only such, a not of an always-true one', () => {
    expect(neverTrue(none)).toBe(true);
    expect(neverTrue({ all: [some, none] })).toBe(true);
    expect(neverTrue({ any: [none, { all: [none] }] })).toBe(true);
    expect(neverTrue({ not: { not: none } })).toBe(true);
    expect(neverTrue({ not: { any: [some, { not: none }] } })).toBe(true);
  });
  it('anything an output can make true is not', () => {
    expect(neverTrue(some)).toBe(false);
    expect(neverTrue({ any: [some, none] })).toBe(false);
    expect(neverTrue({ not: none })).toBe(false);
    expect(neverTrue({ not: some })).toBe(false);
    expect(neverTrue({ task: 'a', exists: false })).toBe(false);
  });
});

describe('words', () => {
  it('describes a condition and, when it is false, what its tests saw', () => {
    const cond: Condition = { all: [{ task: 'classify', path: 'urgency', in: ['low', 'normal'] }, { not: { task: 'failed', exists: false } }] };
    expect(describeCondition(cond)).toBe('all of (classify.urgency in ["low","normal"]; not (failed does not exist))');
    expect(whyFalse(cond, outputOf)).toBe('all of (classify.urgency in ["low","normal"]; not (failed does not exist)); classify.urgency is "high", "failed" did not complete');
    expect(whyFalse({ task: 'classify', path: 'nope', notEquals: 'x'.repeat(100) }, outputOf)).toBe(
      `classify.nope not equal to "${'x'.repeat(56)}...; classify.nope is absent`,
    );
  });
});

describe('helpers', () => {
  it('valueAt and jsonEqual', () => {
    expect(valueAt({ a: [{ b: 0 }] }, ['a', '0', 'b'])).toEqual({ value: 0 });
    expect(valueAt({ a: [] }, ['a', '0'])).toBeUndefined();
    expect(valueAt('text', [])).toEqual({ value: 'text' });
    expect(jsonEqual({ a: [1, { b: null }] }, { a: [1, { b: null }] })).toBe(true);
    expect(jsonEqual([1], { 0: 1 })).toBe(false);
    expect(jsonEqual({ a: undefined }, { b: undefined })).toBe(false);
    expect(jsonEqual(0, -0)).toBe(true);
  });
});
