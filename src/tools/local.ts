/**
 * In-process function tools: what an embedder registers with `createSwarm({ tools })` (define.ts
 * takes these, AI SDK `tool()` objects, and a record of either by name).
 *
 * @example
 * const lookup: ToolDefinition = {
 *   name: 'lookup',
 *   description: 'Find a product by SKU',
 *   inputSchema: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
 *   annotations: { readOnlyHint: true },
 *   handler: async ({ sku }) => db.find(sku),
 * };
 */
export interface ToolDefinition<Args = any> {
  name: string;
  description?: string;
  /**
   * The arguments: JSON Schema (`type: "object"`), a zod 4 schema (`z.object({ ... })`), or an AI
   * SDK `jsonSchema(...)`. Offered to the model as JSON Schema; a zod schema's parse gives the
   * handler its value (defaults filled in). Default: any object.
   */
  inputSchema?: ToolInputSchema;
  /** MCP-style hints. For a tool you wrote yourself they are trusted. */
  annotations?: { readOnlyHint?: boolean; openWorldHint?: boolean; idempotentHint?: boolean; destructiveHint?: boolean };
  /**
   * May identical concurrent calls share one execution? Default: true for read-only tools that
   * are not open-world, false otherwise (a call with a side effect must run each time).
   */
  shareable?: boolean;
  /** Returns the result: a string as is, anything else as JSON. Throw for an error result. */
  /**
   * `context.idempotencyKey` (a journaled run, a tool that is not read-only): the same for every
   * execution of one logical call, so a repeat after a crash can be recognized and not redone.
   */
  handler: (args: Args, context: ToolCallContext) => unknown | Promise<unknown>;
  /**
   * Optional: many calls at once (the bus gathers calls that arrive within its batch window).
   * Returns one result per call, in order; an Error in the array is that call's error result.
   */
  batchHandler?: (calls: Args[], context: { signal: AbortSignal }) => Promise<unknown[]>;
}

/** What a handler is told of the call besides its arguments. */
export interface ToolCallContext {
  signal: AbortSignal;
  idempotencyKey?: string;
  /** The model's id of the call (of the first caller's, when identical calls share one run). */
  toolCallId?: string;
}

/** A Standard Schema (zod 4, valibot, arktype...), as far as swarmstate reads one. */
export interface StandardSchemaLike {
  readonly '~standard': { readonly vendor: string; readonly validate: (value: unknown) => unknown };
}

/** An AI SDK schema wrapper (`jsonSchema(...)`, `zodSchema(...)`): its JSON Schema on `.jsonSchema`. */
export interface AiSdkSchemaLike {
  readonly jsonSchema: unknown;
  readonly validate?: ((value: unknown) => unknown) | undefined;
}

/** What a tool's `inputSchema` may be (schema.ts reads each). */
export type ToolInputSchema = Record<string, unknown> | StandardSchemaLike | { readonly _zod: object } | AiSdkSchemaLike | (() => AiSdkSchemaLike);

export function isShareable(tool: ToolDefinition): boolean {
  if (tool.shareable !== undefined) return tool.shareable;
  return tool.annotations?.readOnlyHint === true && tool.annotations.openWorldHint !== true;
}

export function toolOutputText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}
