/**
 * Whether what a plan function returned is JSON (as `SwarmFunction` says, src/fn/types.ts), and if
 * not, one line naming the first place it is not, in document order, and what to return instead.
 * `JSON.stringify` would not say: it drops `undefined` and functions, turns NaN into null and a
 * Map into `{}`, and calls `toJSON` on a Date, so the journal would hold another value than the
 * one the function returned.
 */
import { types } from 'node:util';

/** Deeper than this is refused: a value this deep is a bug, and every reader of it recurses. */
export const MAX_JSON_DEPTH = 1000;

/** One step of the walk: a value to read from its parent (read when its turn comes, so a throwing getter is met in order). */
interface Step {
  readonly parent: unknown;
  readonly key: string | number | undefined;
  readonly at: PathNode | undefined;
  readonly depth: number;
}

/** A path as a chain to the root: shared by siblings, written out only for the one line said. */
interface PathNode {
  readonly up: PathNode | undefined;
  readonly key: string | number;
}

/** Leaving an object or array: it is no longer an ancestor (a value met twice beside itself is no cycle). */
interface Exit {
  readonly exit: object;
}

/**
 * Undefined when `value` is JSON: `null`, a boolean, a finite number, a string, or an array or a
 * plain object of those, at most MAX_JSON_DEPTH levels deep, without cycles. Otherwise one line,
 * e.g. `$.orders[2].at is a Date (return its toISOString())`. Walks without recursion.
 *
 * @example
 * jsonProblem({ n: NaN }) // '$.n is NaN'
 */
export function jsonProblem(value: unknown): string | undefined {
  const ancestors = new Set<object>();
  const stack: (Step | Exit)[] = [{ parent: undefined, key: undefined, at: undefined, depth: 0 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if ('exit' in top) {
      ancestors.delete(top.exit);
      continue;
    }
    let v: unknown;
    if (top.key === undefined) v = value;
    else {
      try {
        v = (top.parent as Record<string | number, unknown>)[top.key];
      } catch (error) {
        return `${pathText(top.at)} could not be read: ${firstLine(error)}`;
      }
    }
    if (top.depth > MAX_JSON_DEPTH) return `$ is nested more than ${MAX_JSON_DEPTH} levels deep (at ${pathText(top.at, 8)})`;
    const problem = scalarProblem(v, top.key);
    if (problem !== undefined) return `${pathText(top.at)} ${problem}`;
    if (typeof v !== 'object' || v === null) continue;
    if (ancestors.has(v)) return `${pathText(top.at)} is a cycle (it contains itself)`;
    const kind = objectProblem(v);
    if (kind !== undefined) return `${pathText(top.at)} ${kind}`;
    ancestors.add(v);
    stack.push({ exit: v });
    const depth = top.depth + 1;
    // Children go on the stack last first, so they are read in document order.
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ parent: v, key: i, at: { up: top.at, key: i }, depth });
    } else {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) stack.push({ parent: v, key: keys[i]!, at: { up: top.at, key: keys[i]! }, depth });
    }
  }
  return undefined;
}

/** What is wrong with a value that is not an object, or undefined when it is JSON (or an object). */
function scalarProblem(v: unknown, key: string | number | undefined): string | undefined {
  switch (typeof v) {
    case 'undefined':
      return `is undefined (${key === undefined ? 'return null or a value' : typeof key === 'number' ? 'use null' : 'leave the field out, or use null'})`;
    case 'function':
      return 'is a function';
    case 'symbol':
      return 'is a symbol';
    case 'bigint':
      return 'is a BigInt (return a number, or a string of its digits)';
    case 'number':
      return Number.isFinite(v) ? undefined : `is ${String(v)}`;
    default:
      return undefined;
  }
}

/** What is wrong with an object, or undefined for an array or a plain object (of any realm) with string keys only. */
function objectProblem(v: object): string | undefined {
  if (Array.isArray(v)) return undefined;
  // node:util's checks see through Symbol.toStringTag and work across realms.
  if (types.isDate(v)) return 'is a Date (return its toISOString())';
  if (types.isMap(v)) return 'is a Map (return a plain object, or an array of entries)';
  if (types.isSet(v)) return 'is a Set (return an array)';
  if (types.isPromise(v)) return 'is a Promise (await it)';
  if (types.isRegExp(v)) return 'is a RegExp (return its source)';
  if (types.isNativeError(v)) return 'is an Error (return its message)';
  if (types.isTypedArray(v)) return `is a ${(v as Uint8Array)[Symbol.toStringTag]} (return an array of numbers, or a base64 string)`;
  if (types.isAnyArrayBuffer(v)) return 'is an ArrayBuffer (return an array of numbers, or a base64 string)';
  const proto = Object.getPrototypeOf(v) as { constructor?: unknown } | null;
  if (proto !== null && !isObjectPrototype(proto)) {
    const name = typeof proto.constructor === 'function' ? (proto.constructor as { name?: unknown }).name : undefined;
    return `is an instance of ${typeof name === 'string' && name !== '' ? name : 'a class'} (return a plain object)`;
  }
  if (Object.getOwnPropertySymbols(v).some((s) => Object.prototype.propertyIsEnumerable.call(v, s))) {
    return 'has a field keyed by a symbol (JSON keys are strings)';
  }
  return undefined;
}

/** `Object.prototype` of this realm or another (a value made in a vm context or a worker is plain too). */
function isObjectPrototype(proto: { constructor?: unknown }): boolean {
  if (proto === Object.prototype) return true;
  return Object.getPrototypeOf(proto) === null && typeof proto.constructor === 'function' && (proto.constructor as { name?: unknown }).name === 'Object';
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `$.orders[2]["a b"]`; with `limit`, the first `limit` steps and `…`. */
function pathText(at: PathNode | undefined, limit?: number): string {
  const keys: (string | number)[] = [];
  for (let node = at; node !== undefined; node = node.up) keys.push(node.key);
  keys.reverse();
  const shown = limit !== undefined && keys.length > limit ? keys.slice(0, limit) : keys;
  let text = '$';
  for (const key of shown) text += typeof key === 'number' ? `[${key}]` : IDENTIFIER.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  return shown.length < keys.length ? `${text}…` : text;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0]!;
}
