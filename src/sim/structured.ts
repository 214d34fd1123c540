/**
 * Structured outputs in the simulator: the schema a request asks its answer to follow (OpenAI
 * `response_format` json_schema, Anthropic `output_config.format`), and a deterministic value
 * that follows it (every declared property, the first enum value, minimum sizes).
 */
import { SimHttpError } from './types.js';

/** OpenAI: `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`; other types carry no schema. */
export function openAIOutputSchema(raw: unknown): Record<string, unknown> | undefined {
  if (raw === undefined || raw === null) return undefined;
  const format = asRecord(raw, "'response_format'");
  if (format.type === 'text' || format.type === 'json_object') return undefined;
  if (format.type !== 'json_schema') throw invalid("Invalid value for 'response_format.type': expected 'text', 'json_object' or 'json_schema'");
  const spec = asRecord(format.json_schema, "'response_format.json_schema'");
  if (typeof spec.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(spec.name)) {
    throw invalid("Invalid 'response_format.json_schema.name': a-z, A-Z, 0-9, underscores and dashes, at most 64 characters");
  }
  return spec.schema === undefined ? {} : asRecord(spec.schema, "'response_format.json_schema.schema'");
}

/** Anthropic: `output_config: {format: {type: "json_schema", schema}}`. */
export function anthropicOutputSchema(raw: unknown): Record<string, unknown> | undefined {
  if (raw === undefined || raw === null) return undefined;
  const config = asRecord(raw, 'output_config');
  if (config.format === undefined || config.format === null) return undefined;
  const format = asRecord(config.format, 'output_config.format');
  if (format.type !== 'json_schema') throw invalid("output_config.format.type: Input should be 'json_schema'");
  return asRecord(format.schema, 'output_config.format.schema');
}

/** A value the schema accepts, the same every time: what the simulated model answers with. */
export function sampleValue(schema: unknown, name = 'value', depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > 12) return {};
  const s = schema as Record<string, unknown>;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if ('default' in s) return s.default;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = s[key];
    if (Array.isArray(options) && options.length > 0) return sampleValue(options[0], name, depth + 1);
  }
  const types = Array.isArray(s.type) ? s.type.filter((t) => t !== 'null') : [s.type];
  const type = types[0] ?? (s.properties ? 'object' : s.items ? 'array' : undefined);
  switch (type) {
    case 'string': {
      const min = typeof s.minLength === 'number' ? s.minLength : 0;
      const max = typeof s.maxLength === 'number' ? s.maxLength : Infinity;
      return `sim ${name}`.padEnd(min, '.').slice(0, max);
    }
    case 'integer':
    case 'number': {
      const min = typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : undefined;
      const max = typeof s.maximum === 'number' ? s.maximum : typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum - 1 : undefined;
      const value = min ?? Math.min(1, max ?? 1);
      return type === 'integer' ? Math.ceil(value) : value;
    }
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array': {
      const min = typeof s.minItems === 'number' ? s.minItems : 1;
      const max = typeof s.maxItems === 'number' ? s.maxItems : Infinity;
      const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : [];
      const n = Math.min(Math.max(min, prefix.length), max);
      return Array.from({ length: n }, (_, i) => sampleValue(i < prefix.length ? prefix[i] : s.items, `${name} ${i + 1}`, depth + 1));
    }
    case 'object':
    default: {
      const properties = (s.properties && typeof s.properties === 'object' ? s.properties : {}) as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(properties)) out[key] = sampleValue(properties[key], key, depth + 1);
      const required = Array.isArray(s.required) ? (s.required as unknown[]) : [];
      for (const key of required) if (typeof key === 'string' && !(key in out)) out[key] = 'sim';
      return out;
    }
  }
}

function asRecord(raw: unknown, what: string): Record<string, unknown> {
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) return raw as Record<string, unknown>;
  throw invalid(`${what}: expected an object`);
}

function invalid(message: string): SimHttpError {
  return new SimHttpError('invalid_request', message);
}
