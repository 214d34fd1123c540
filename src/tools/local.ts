/**
 * In-process function tools: what an embedder registers with `createSwarm({ tools })`.
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
  /** JSON Schema of the arguments, as offered to the model. */
  inputSchema?: Record<string, unknown>;
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
  handler: (args: Args, context: { signal: AbortSignal; idempotencyKey?: string }) => unknown | Promise<unknown>;
  /**
   * Optional: many calls at once (the bus gathers calls that arrive within its batch window).
   * Returns one result per call, in order; an Error in the array is that call's error result.
   */
  batchHandler?: (calls: Args[], context: { signal: AbortSignal }) => Promise<unknown[]>;
}

export function isShareable(tool: ToolDefinition): boolean {
  if (tool.shareable !== undefined) return tool.shareable;
  return tool.annotations?.readOnlyHint === true && tool.annotations.openWorldHint !== true;
}

export function toolOutputText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}
