/**
 * `createSwarm({ tools })`: an array of tools or a record of them by name, each one of ours
 * (`handler`) or an AI SDK `tool()` (`execute`), its input schema JSON Schema, zod or an AI SDK
 * wrapper (schema.ts). All become ToolDefinitions with a JSON Schema here, when the swarm is
 * created: a definition that cannot work is refused then, every problem at once, not when a
 * model first calls it.
 */
import type { PlanIssue } from '../plan/index.js';
import { kindOf } from '../plan/issues.js';
import type { ToolCallContext, ToolDefinition, ToolInputSchema } from './local.js';
import { toolInputOf, type ParseOutcome, type ToolInput } from './schema.js';
import { createArgsValidator } from './validate.js';

/**
 * An AI SDK tool (`tool({ description, inputSchema, execute })` from `ai`), as far as swarmstate
 * reads one: it runs through `execute`, given the abort signal and the model's id of the call.
 * `messages` is always empty (a swarm's conversation is not in the AI SDK's message format).
 * swarmstate's own `annotations` and `shareable` may be added to it.
 */
export interface AiSdkToolLike {
  description?: string | undefined;
  inputSchema?: ToolInputSchema | undefined;
  execute?: ((input: never, options: AiSdkToolCallOptions) => unknown) | undefined;
  type?: string | undefined;
  annotations?: ToolDefinition['annotations'];
  shareable?: boolean | undefined;
}

/** What an AI SDK tool's `execute` is given besides its input. */
export interface AiSdkToolCallOptions {
  toolCallId: string;
  messages: never[];
  abortSignal?: AbortSignal;
}

/** One tool in an array: it says its name. */
export type SwarmTool = ToolDefinition<never> | (AiSdkToolLike & { name: string });
/** One tool in a record: the key is its name. */
export type SwarmToolEntry = Omit<ToolDefinition<never>, 'name'> & { name?: string } | AiSdkToolLike;
/** The `tools` of createSwarm: an array, or a record by name (the AI SDK's `tools` shape). */
export type SwarmTools = readonly SwarmTool[] | { readonly [name: string]: SwarmToolEntry };

/** Tool definitions createSwarm cannot use: each with its name and what is wrong. */
export class ToolDefinitionError extends TypeError {
  readonly code = 'TOOLS_INVALID';
  constructor(readonly issues: PlanIssue[]) {
    const n = issues.length;
    super(`createSwarm({ tools }): ${n} problem${n === 1 ? '' : 's'}, fix ${n === 1 ? 'it' : 'them'}:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}`);
    this.name = 'ToolDefinitionError';
  }
}

/**
 * The tools given to createSwarm as ToolDefinitions with JSON Schemas. Throws a
 * ToolDefinitionError listing every definition that cannot work.
 *
 * @example
 * toolDefinitions({ weather: tool({ description: 'Weather', inputSchema: z.object({ city: z.string() }), execute }) });
 * // [{ name: 'weather', description: 'Weather', inputSchema: { type: 'object', ... }, handler }]
 */
export function toolDefinitions(given: unknown): ToolDefinition[] {
  if (given === undefined) return [];
  const issues: PlanIssue[] = [];
  let entries: { path: string; name: unknown; tool: unknown }[];
  if (Array.isArray(given)) {
    entries = given.map((tool, i) => ({ path: `tools[${i}]`, name: isObject(tool) ? tool.name : undefined, tool }));
  } else if (isObject(given)) {
    entries = Object.entries(given).map(([key, tool]) => {
      const path = `tools.${key}`;
      if (isObject(tool) && tool.name !== undefined && tool.name !== key) issues.push({ path, message: `its name is ${JSON.stringify(tool.name)}, not its key ${JSON.stringify(key)}: in a record the key is the name (drop name, or make them the same)` });
      return { path, name: key, tool };
    });
  } else {
    throw new ToolDefinitionError([{ path: 'tools', message: `tools is ${kindOf(given)}: give an array of tools (each with its name) or an object of tools by name` }]);
  }
  const out: ToolDefinition[] = [];
  const seen = new Map<string, string>();
  for (const { path, name, tool } of entries) {
    const where = typeof name === 'string' && name !== '' && !path.endsWith(`.${name}`) ? `${path} ("${name}")` : path;
    const problems: string[] = [];
    const def = definitionOf(name, tool, problems);
    if (typeof name === 'string' && name !== '') {
      const first = seen.get(name);
      if (first !== undefined) problems.push(`the name "${name}" is taken by ${first}: tool names must differ`);
      else seen.set(name, path);
    }
    for (const message of problems) issues.push({ path: where, message });
    if (def && problems.length === 0) out.push(def);
  }
  if (issues.length > 0) throw new ToolDefinitionError(issues);
  return out;
}

function definitionOf(name: unknown, tool: unknown, problems: string[]): ToolDefinition | undefined {
  if (!isObject(tool)) {
    problems.push(`a tool is an object with a handler (or an AI SDK tool() with execute), not ${kindOf(tool)}`);
    return undefined;
  }
  if (typeof name !== 'string' || name === '') problems.push(name === undefined ? 'it has no name: a tool in an array says its name (name: "lookup"), or give tools as an object by name' : `its name is ${kindOf(name)}: give a non-empty string`);
  const run = runnerOf(tool, problems);
  if (tool.inputSchema === undefined && tool.parameters !== undefined) problems.push('it has `parameters` (the AI SDK 4 name): call it inputSchema');
  const input = toolInputOf(tool.inputSchema);
  if ('problem' in input) problems.push(input.problem);
  else {
    const schemaError = createArgsValidator(input.jsonSchema, String(name)).schemaError;
    if (schemaError) problems.push(`inputSchema is not a JSON Schema ajv can check: ${schemaError}`);
  }
  if (tool.description !== undefined && typeof tool.description !== 'string') problems.push(`description is ${kindOf(tool.description)}, not a string`);
  if (tool.batchHandler !== undefined && typeof tool.batchHandler !== 'function') problems.push(`batchHandler is ${kindOf(tool.batchHandler)}, not a function`);
  if (problems.length > 0 || !run || 'problem' in input) return undefined;
  const def = tool as unknown as ToolDefinition;
  return {
    name: name as string,
    ...(def.description !== undefined ? { description: def.description } : {}),
    inputSchema: input.jsonSchema,
    ...(def.annotations !== undefined ? { annotations: def.annotations } : {}),
    ...(def.shareable !== undefined ? { shareable: def.shareable } : {}),
    handler: withParse(input, name as string, run),
    ...(def.batchHandler ? { batchHandler: batchWithParse(input, name as string, def.batchHandler.bind(tool)) } : {}),
  };
}

type Runner = (args: unknown, context: ToolCallContext) => unknown;

/** The function that runs the tool: ours (`handler`) as is, an AI SDK tool's `execute` adapted. */
function runnerOf(tool: Record<string, unknown>, problems: string[]): Runner | undefined {
  const { handler, execute } = tool;
  if (handler !== undefined && execute !== undefined) {
    problems.push('it has both handler and execute: give one (handler, or an AI SDK tool\'s execute)');
    return undefined;
  }
  // Called on the object given, as before (a handler may be a method using `this`).
  if (typeof handler === 'function') return (handler as Runner).bind(tool);
  if (handler !== undefined) {
    problems.push(`handler is ${kindOf(handler)}, not a function`);
    return undefined;
  }
  if (typeof execute === 'function') return aiSdkRunner((execute as (input: unknown, options: AiSdkToolCallOptions) => unknown).bind(tool));
  if (execute !== undefined) problems.push(`execute is ${kindOf(execute)}, not a function`);
  else if (tool.type === 'provider' || tool.type === 'provider-defined') problems.push('it is a provider-defined AI SDK tool (run by the model\'s provider): swarmstate runs tools that have an execute function');
  else problems.push('it has nothing to run: give handler (a function of the arguments) or, for an AI SDK tool(), execute');
  return undefined;
}

/** An AI SDK tool's execute: its options, and the last value of a streaming (async iterable) result. */
function aiSdkRunner(execute: (input: unknown, options: AiSdkToolCallOptions) => unknown): Runner {
  return async (args, { signal, toolCallId }) => {
    const result = await execute(args, { toolCallId: toolCallId ?? '', messages: [], abortSignal: signal });
    if (!isObject(result) || typeof (result as unknown as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator] !== 'function') return result;
    let last: unknown;
    for await (const value of result as unknown as AsyncIterable<unknown>) last = value;
    return last;
  };
}

/** The runner, given what the schema's own parse makes of the arguments (when it has one). */
function withParse(input: ToolInput, name: string, run: Runner): Runner {
  const { parse } = input;
  if (!parse) return run;
  return async (args, context) => {
    const parsed: ParseOutcome = await parse(args);
    if ('issues' in parsed) throw new Error(`invalid arguments for "${name}": ${parsed.issues}`);
    return run(parsed.value, context);
  };
}

function batchWithParse(input: ToolInput, name: string, batch: NonNullable<ToolDefinition['batchHandler']>): NonNullable<ToolDefinition['batchHandler']> {
  const { parse } = input;
  if (!parse) return batch;
  return async (calls, context) => {
    const parsed = await Promise.all(calls.map((args) => parse(args)));
    const valid = parsed.flatMap((p) => ('value' in p ? [p.value] : []));
    const outputs = valid.length > 0 ? await batch(valid, context) : [];
    let k = 0;
    // Outputs short of the valid calls are left out: the registry reports the shortfall.
    return parsed.flatMap((p) => ('issues' in p ? [new Error(`invalid arguments for "${name}": ${p.issues}`)] : k < outputs.length ? [outputs[k++]] : []));
  };
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
