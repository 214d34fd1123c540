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
      expect(compile).not.toHaveBeenCalled();
      createArgsValidator({ ...schema }, 'a'); // a new object is compiled: the spy does see compiles
      expect(compile).toHaveBeenCalledTimes(1);
    } finally {
      compile.mockRestore();
    }
    expect(a({ n: 'x' })).toBe('invalid arguments for "a": /n must be number');
  });
});
