/**
 * Structured outputs in the simulator, through the official SDKs over real HTTP: a request with
 * a JSON Schema (OpenAI `response_format`, Anthropic `output_config.format`) is answered with
 * JSON that follows it; `[[sim:invalid N]]` makes the first N such answers not JSON; a malformed
 * format is a 400 in the protocol's words.
 */
import Anthropic, { BadRequestError as AnthropicBadRequest } from '@anthropic-ai/sdk';
import OpenAI, { BadRequestError } from 'openai';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { useSims } from './helpers.js';
import { sampleValue } from '../../src/sim/structured.js';

const sim = useSims();

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 12, maxLength: 20 },
    kind: { type: 'string', enum: ['book', 'pen'] },
    price: { type: 'number', exclusiveMinimum: 0, maximum: 100 },
    count: { type: 'integer', minimum: 3 },
    tags: { type: 'array', items: { type: 'string' }, minItems: 2, maxItems: 3 },
    dims: { type: 'object', properties: { w: { type: 'number' }, ok: { type: 'boolean' }, note: { type: ['string', 'null'] } }, required: ['w', 'ok', 'note'], additionalProperties: false },
    pick: { anyOf: [{ type: 'integer' }, { type: 'string' }] },
  },
  required: ['name', 'kind', 'price', 'count', 'tags', 'dims', 'pick'],
  additionalProperties: false,
};
const valid = new Ajv({ strict: false }).compile(schema);

describe('structured outputs in the simulator', () => {
  it('OpenAI SDK: response_format json_schema is answered with JSON that follows the schema, streamed or not', async () => {
    const s = await sim({});
    const client = new OpenAI({ apiKey: 'any', baseURL: `${s.url}/v1`, maxRetries: 0 });
    const params = {
      model: 'gpt-sim',
      messages: [{ role: 'user' as const, content: 'Describe the product.' }],
      response_format: { type: 'json_schema' as const, json_schema: { name: 'product', schema, strict: true } },
    };
    const plain = await client.chat.completions.create(params);
    const value = JSON.parse(plain.choices[0]!.message.content!);
    expect(valid(value)).toBe(true);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(JSON.parse(text)).toEqual(value);
    expect(s.stats().log.map((e) => e.outputSchema)).toEqual([schema, schema]);
  });

  it('Anthropic SDK: output_config.format is answered with JSON that follows the schema', async () => {
    const s = await sim({});
    const client = new Anthropic({ apiKey: 'any', baseURL: s.url, maxRetries: 0 });
    const message = await client.messages.create({
      model: 'claude-sim',
      max_tokens: 512,
      messages: [{ role: 'user', content: 'Describe the product.' }],
      output_config: { format: { type: 'json_schema', schema } },
    });
    const block = message.content[0]!;
    expect(block.type).toBe('text');
    const value = JSON.parse(block.type === 'text' ? block.text : '');
    expect(valid(value)).toBe(true);
    expect(value).toMatchObject({ kind: 'book', count: 3, price: 1, tags: ['sim tags 1', 'sim tags 2'], dims: { w: 1, ok: true, note: 'sim note' }, pick: 1 });
    expect(s.stats().log[0]!.outputSchema).toEqual(schema);
  });

  it('[[sim:invalid N]]: the first N answers carrying the directive text are not JSON, the next one follows the schema', async () => {
    const s = await sim({});
    const client = new OpenAI({ apiKey: 'any', baseURL: `${s.url}/v1`, maxRetries: 0 });
    const ask = (extra: string) =>
      client.chat.completions.create({
        model: 'gpt-sim',
        messages: [{ role: 'user', content: `Describe. [[sim:invalid 2 p1]]${extra}` }],
        response_format: { type: 'json_schema', json_schema: { name: 'product', schema } },
      });
    const answers: string[] = [];
    for (const extra of ['', ' again', ' and again']) answers.push((await ask(extra)).choices[0]!.message.content!);
    expect(() => JSON.parse(answers[0]!)).toThrow();
    expect(() => JSON.parse(answers[1]!)).toThrow();
    expect(valid(JSON.parse(answers[2]!))).toBe(true);
  });

  it('refuses a malformed format in each protocol\'s words', async () => {
    const s = await sim({});
    const openai = new OpenAI({ apiKey: 'any', baseURL: `${s.url}/v1`, maxRetries: 0 });
    await expect(
      openai.chat.completions.create({ model: 'gpt-sim', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'bad name!', schema } } }),
    ).rejects.toBeInstanceOf(BadRequestError);
    const anthropic = new Anthropic({ apiKey: 'any', baseURL: s.url, maxRetries: 0 });
    await expect(
      anthropic.messages.create({ model: 'claude-sim', max_tokens: 64, messages: [{ role: 'user', content: 'x' }], output_config: { format: { type: 'json_schema', schema: 'object' as unknown as Record<string, unknown> } } }),
    ).rejects.toBeInstanceOf(AnthropicBadRequest);
  });

  it('caps what it builds: 1,000 items an array, 10,000 values and 10,000 characters a string in all, whatever minItems and minLength ask', async () => {
    expect((sampleValue({ type: 'array', minItems: 100_000, items: { type: 'integer' } }) as unknown[]).length).toBe(1000);
    expect((sampleValue({ type: 'array', minItems: 3e7, items: { type: 'string' } }) as unknown[]).length).toBe(1000);
    expect((sampleValue({ type: 'string', minLength: 3e9 }) as string).length).toBe(10_000);
    // 1,000 arrays of 1,000: the values run out after 10,000 (the outer array and 9,999 inside it).
    const nested = sampleValue({ type: 'array', minItems: 1000, items: { type: 'array', minItems: 1000, items: { type: 'integer' } } }) as number[][];
    expect(nested.flat().length + nested.length + 1).toBe(10_000);
    // Through HTTP: an answer, not a crashed server.
    const s = await sim({});
    const client = new OpenAI({ apiKey: 'any', baseURL: `${s.url}/v1`, maxRetries: 0 });
    const answer = await client.chat.completions.create({
      model: 'gpt-sim',
      messages: [{ role: 'user', content: 'List.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'list', schema: { type: 'array', minItems: 3e7, items: { type: 'integer' } } } },
    });
    expect(JSON.parse(answer.choices[0]!.message.content!)).toHaveLength(1000);
  });
});
