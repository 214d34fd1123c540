/**
 * Canonical JSON: one spelling per value, so two tool calls that mean the same thing get the same
 * key whatever order the model wrote their arguments in. Pure; no I/O.
 */

/**
 * JSON text of `value` with object keys sorted (by UTF-16 code units) at every depth. Arrays keep
 * their order. Otherwise it follows `JSON.stringify`: `toJSON` is honoured, properties whose value
 * is `undefined`, a function or a symbol are dropped (and become `null` inside arrays),
 * non-finite numbers become `null`, and a repeated (shared, not cyclic) object is written each
 * time. A top-level value JSON cannot hold (`undefined`, a function, a symbol) gives `'null'`, so
 * the result is always a string.
 *
 * @throws TypeError on a cycle (naming the path where it closes) or on a BigInt.
 * @example
 * canonicalJson({ b: 2, a: [3, { d: 1, c: undefined }] }) // '{"a":[3,{"d":1}],"b":2}'
 */
export function canonicalJson(value: unknown): string {
  return writeValue(value, '', [], '$') ?? 'null';
}

/**
 * The identity of a tool call: tool name, a NUL separator (no tool name contains one), and the
 * canonical arguments. Two calls with the same key would do the same thing.
 *
 * @throws TypeError when `args` cannot be written as JSON (see {@link canonicalJson}).
 * @example
 * toolCallKey('read_file', { path: 'a.ts', limit: 10 }) === toolCallKey('read_file', { limit: 10, path: 'a.ts' })
 */
export function toolCallKey(name: string, args: unknown): string {
  return name + '\u0000' + canonicalJson(args);
}

/**
 * One value, or `undefined` when JSON has no spelling for it (the caller drops or nulls it).
 * `ancestors` holds the objects on the path from the root: a value met again among them is a
 * cycle, while one met again elsewhere is only shared.
 */
function writeValue(input: unknown, key: string, ancestors: object[], path: string): string | undefined {
  let value = input;
  if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, key);
  }
  // Boxed primitives (new String('x')) are written as the primitive, as JSON.stringify does.
  if (value instanceof Number || value instanceof String || value instanceof Boolean) value = value.valueOf();

  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new TypeError(`canonicalJson: cannot write a BigInt (at ${path}); convert it to a string or number first`);
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';

  const object = value as object;
  if (ancestors.includes(object)) {
    throw new TypeError(`canonicalJson: cannot write a cyclic structure (${path} refers back to an enclosing value)`);
  }
  ancestors.push(object);
  try {
    if (Array.isArray(object)) {
      const items = object.map((item, i) => writeValue(item, String(i), ancestors, `${path}[${i}]`) ?? 'null');
      return `[${items.join(',')}]`;
    }
    const record = object as Record<string, unknown>;
    const members: string[] = [];
    for (const name of Object.keys(record).sort()) {
      const written = writeValue(record[name], name, ancestors, `${path}.${name}`);
      if (written !== undefined) members.push(`${JSON.stringify(name)}:${written}`);
    }
    return `{${members.join(',')}}`;
  } finally {
    ancestors.pop();
  }
}
