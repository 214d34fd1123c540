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

/** Items one array of a sample holds at most, whatever `minItems` asks. */
export const MAX_SAMPLE_ITEMS = 1000;
/** Values (an array, each of its items, ...) one sample holds at most, in all. */
export const MAX_SAMPLE_VALUES = 10_000;
/** Characters a string of a sample holds at most, whatever `minLength` asks. */
export const MAX_SAMPLE_CHARS = 10_000;
/** Levels of schema (a property, an item, an option, a `$ref`) a sample follows; deeper it is `{}`. */
export const MAX_SAMPLE_DEPTH = 12;

/**
 * A value the schema accepts, the same every time: what the simulated model answers with. Built
 * synchronously, so it is capped (MAX_SAMPLE_ITEMS, MAX_SAMPLE_VALUES, MAX_SAMPLE_CHARS): a schema
 * asking for `minItems: 3e7` gets a shorter array, which then fails its check, as an answer
 * would, instead of a server that runs out of memory.
 */
export function sampleValue(schema: unknown, name = 'value', depth = 0, left: { values: number } = { values: MAX_SAMPLE_VALUES }): unknown {
  left.values -= 1;
  if (!schema || typeof schema !== 'object' || depth > MAX_SAMPLE_DEPTH) return {};
  const s = schema as Record<string, unknown>;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if ('default' in s) return s.default;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = s[key];
    if (Array.isArray(options) && options.length > 0) return sampleValue(options[0], name, depth + 1, left);
  }
  const types = Array.isArray(s.type) ? s.type.filter((t) => t !== 'null') : [s.type];
  const type = types[0] ?? (s.properties ? 'object' : s.items ? 'array' : undefined);
  switch (type) {
    case 'string': {
      const min = typeof s.minLength === 'number' ? Math.min(s.minLength, MAX_SAMPLE_CHARS) : 0;
      const max = typeof s.maxLength === 'number' ? s.maxLength : Infinity;
      return `sim ${name}`.padEnd(min, '.').slice(0, Math.min(max, MAX_SAMPLE_CHARS));
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
      const n = Math.min(Math.max(min, prefix.length), max, MAX_SAMPLE_ITEMS);
      const out: unknown[] = [];
      for (let i = 0; i < n && left.values > 0; i++) out.push(sampleValue(i < prefix.length ? prefix[i] : s.items, `${name} ${i + 1}`, depth + 1, left));
      return out;
    }
    case 'object':
    default: {
      const properties = (s.properties && typeof s.properties === 'object' ? s.properties : {}) as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(properties)) {
        if (left.values <= 0) break;
        out[key] = sampleValue(properties[key], key, depth + 1, left);
      }
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
