import { Ajv } from 'ajv';
import { describe, expect, it, vi } from 'vitest';
import { createArgsValidator } from '../../src/tools/index.js';

const readSchema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { path: { type: 'string' }, encoding: { enum: ['utf8', 'base64'] }, limit: { type: 'integer', minimum: 1 } },
  required: ['path'],
};

describe('createArgsValidator', () => {
  it('accepts valid arguments', () => {
    const check = createArgsValidator(readSchema, 'fs.read');
    expect(check({ path: 'a.ts' })).toBeUndefined();
    expect(check({ path: 'a.ts', encoding: 'utf8', limit: 3 })).toBeUndefined();
  });

  it('names the tool, the path and the rule for a wrong type', () => {
    const check = createArgsValidator(readSchema, 'fs.read');
    expect(check({ path: 1 })).toBe('invalid arguments for "fs.read": /path must be string');
  });

  it('reports a missing required property', () => {
    const check = createArgsValidator(readSchema, 'fs.read');
    expect(check({})).toBe(`invalid arguments for "fs.read": must have required property 'path'`);
    expect(check(undefined)).toBe('invalid arguments for "fs.read": must be object');
  });

  it('reports every problem at once, enums with their allowed values', () => {
    const check = createArgsValidator(readSchema, 'fs.read');
    expect(check({ encoding: 'latin1', limit: 0 })).toBe(
      `invalid arguments for "fs.read": must have required property 'path'; /encoding must be one of "utf8", "base64"; /limit must be >= 1`,
    );
  });

  it('allows extra properties unless the schema forbids them, then names the extra one', () => {
    expect(createArgsValidator(readSchema, 'fs.read')({ path: 'a', extra: true })).toBeUndefined();
    const closed = createArgsValidator({ ...readSchema, additionalProperties: false }, 'fs.read');
    expect(closed({ path: 'a', extra: true })).toBe(`invalid arguments for "fs.read": must NOT have additional property 'extra'`);
  });

  it('understands draft 2020-12 schemas (the MCP default) and drops a $schema ajv does not know', () => {
    const modern = createArgsValidator(
      {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }] } },
      },
      'x.y',
    );
    // prefixItems exists only in 2020-12: a draft-07 validator would let this through.
    expect(modern({ pair: ['a', 'b'] })).toBe('invalid arguments for "x.y": /pair/1 must be number');
    const draft4 = createArgsValidator({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'object', required: ['q'] }, 'x.y');
    expect(draft4.schemaError).toBeUndefined();
    expect(draft4({})).toBe(`invalid arguments for "x.y": must have required property 'q'`);
  });

  it('ignores unknown formats and keywords instead of failing', () => {
    const check = createArgsValidator({ type: 'object', properties: { url: { type: 'string', format: 'made-up' } }, 'x-vendor': 1 }, 'x.y');
    expect(check.schemaError).toBeUndefined();
    expect(check({ url: 'anything' })).toBeUndefined();
  });

  it('does not crash on a bad schema: it accepts anything and remembers why', () => {
    for (const bad of [{ type: 'nonsense' }, { $ref: '#/definitions/missing' }, null, 'object', [1, 2]]) {
      const check = createArgsValidator(bad, 'x.y');
      expect(check({ anything: 1 })).toBeUndefined();
      expect(check.schemaError).toEqual(expect.any(String));
    }
  });

  it('takes boolean schemas: true accepts all, false nothing', () => {
    expect(createArgsValidator(true)({ a: 1 })).toBeUndefined();
    expect(createArgsValidator(false, 'x.y')({})).toBe('invalid arguments for "x.y": boolean schema is false');
  });

  it('compiles a schema object once, however many validators are made of it', () => {
    const schema = { type: 'object', properties: { n: { type: 'number' } } };
    const a = createArgsValidator(schema, 'a');
    const bad = { type: 'nonsense' };
    expect(createArgsValidator(bad).schemaError).toBe(createArgsValidator(bad).schemaError);
    // Counted, not timed: no compile for any of 2,000 more validators of the same schema object.
    const compile = vi.spyOn(Ajv.prototype, 'compile');
    try {
      for (let i = 0; i < 2000; i++) createArgsValidator(schema, 'a');
      // A copy (the same server listed again by the next run) shares the compiled one too.
      createArgsValidator(JSON.parse(JSON.stringify(schema)) as object, 'a');
      expect(compile).not.toHaveBeenCalled();
      createArgsValidator({ ...schema, required: ['n'] }, 'a'); // another schema is compiled: the spy does see compiles
      expect(compile).toHaveBeenCalledTimes(1);
    } finally {
      compile.mockRestore();
    }
    expect(a({ n: 'x' })).toBe('invalid arguments for "a": /n must be number');
  });
});

/** The same schema as a new object each time, as a server's tools/list gives it to each run. */
const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

describe('tool schemas with $id: one compiler per schema', () => {
  const withId = {
    $id: 'https://example.com/schemas/lookup-args',
    type: 'object',
    properties: { sku: { type: 'string', pattern: '^SKU-\\d+$' } },
    required: ['sku'],
  };

  it('two tools sharing a $id schema (or one server listed by two runs) both check their arguments', () => {
    const shop = createArgsValidator(copy(withId), 'shop.lookup');
    const stock = createArgsValidator(copy(withId), 'stock.lookup');
    const again = createArgsValidator(copy(withId), 'shop.lookup');
    for (const check of [shop, stock, again]) {
      expect(check.schemaError).toBeUndefined();
      expect(check({ sku: 'SKU-12' })).toBeUndefined();
    }
    expect(stock({ sku: 'twelve' })).toBe('invalid arguments for "stock.lookup": /sku must match pattern "^SKU-\\d+$"');
    expect(again({})).toBe(`invalid arguments for "shop.lookup": must have required property 'sku'`);
  });

  it('two different schemas with the same $id each check their own arguments', () => {
    const text = createArgsValidator({ $id: 'urn:example:args', type: 'object', properties: { q: { type: 'string' } } }, 'a.text');
    const number = createArgsValidator({ $id: 'urn:example:args', type: 'object', properties: { q: { type: 'number' } } }, 'a.number');
    expect(number.schemaError).toBeUndefined();
    expect(text({ q: 'x' })).toBeUndefined();
    expect(number({ q: 1 })).toBeUndefined();
    expect(number({ q: 'x' })).toBe('invalid arguments for "a.number": /q must be number');
    expect(text({ q: 1 })).toBe('invalid arguments for "a.text": /q must be string');
  });

  it('a $ref to a nested $id resolves inside its own schema, however many tools have it', () => {
    const schema = {
      $id: 'https://example.com/schemas/order',
      definitions: { sku: { $id: 'https://example.com/schemas/sku', type: 'string', minLength: 2 } },
      type: 'object',
      properties: { sku: { $ref: 'https://example.com/schemas/sku' } },
    };
    const checks = [createArgsValidator(copy(schema), 'a.order'), createArgsValidator(copy(schema), 'b.order')];
    for (const check of checks) expect(check({ sku: 'AB' })).toBeUndefined();
    expect(checks[1]!({ sku: 'A' })).toBe('invalid arguments for "b.order": /sku must NOT have fewer than 2 characters');
  });
});

describe('hostile arguments against a tool schema', () => {
  const catastrophic = { type: 'object', properties: { code: { type: 'string', pattern: '^(a+)+$' } } };

  it('^(a+)+$ is checked in linear time: never by JavaScript\'s backtracking engine on this thread', () => {
    // A bounded input (a backtracking engine takes some ms on it, not minutes) and a spy on the
    // engine: the unfixed check fails here rather than hanging (test/tools/hostileArgs.test.ts
    // sends 10,000 characters through a run).
    const ran: string[] = [];
    const test = vi.spyOn(RegExp.prototype, 'test');
    const exec = vi.spyOn(RegExp.prototype, 'exec');
    try {
      const check = createArgsValidator(copy(catastrophic), 'x.check');
      expect(check({ code: 'a'.repeat(20) + '!' })).toBe('invalid arguments for "x.check": /code must match pattern "^(a+)+$"');
      expect(check({ code: 'a'.repeat(10_000) })).toBeUndefined();
      for (const spy of [test, exec]) for (const re of spy.mock.contexts) ran.push((re as RegExp).source);
    } finally {
      test.mockRestore();
      exec.mockRestore();
    }
    expect(ran.filter((source) => source.includes('(a+)+'))).toEqual([]);
  });

  it('a pattern with a backreference is still checked (on the bounded engine)', () => {
    const check = createArgsValidator({ type: 'object', properties: { pair: { type: 'string', pattern: '^(a)\\1$' } } }, 'x.pair');
    expect(check({ pair: 'aa' })).toBeUndefined();
    expect(check({ pair: 'ab' })).toBe('invalid arguments for "x.pair": /pair must match pattern "^(a)\\1$"');
  });

  it('arguments nested past the stack are a failed check, not a thrown RangeError', () => {
    const tree = { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } } };
    const check = createArgsValidator(tree, 'x.tree');
    expect(check({ name: 'a', children: [{ name: 'b', children: [] }] })).toBeUndefined();
    let deep: Record<string, unknown> = { name: 'leaf' };
    for (let i = 0; i < 20_000; i++) deep = { name: 'x', children: [deep] };
    expect(check(deep)).toBe('invalid arguments for "x.tree": they are nested too deeply to check: send a flatter value');
  });

  it('a schema whose $refs loop without reaching a value does not compile (no check that never ends)', () => {
    const check = createArgsValidator({ type: 'object', properties: { a: { $ref: '#/properties/a' } } }, 'x.loop');
    expect(check.schemaError).toMatch(/^at #\/properties\/a\/\$ref: a \$ref cycle that never reaches a value/);
    expect(check({ a: 1 })).toBeUndefined();
  });
});
