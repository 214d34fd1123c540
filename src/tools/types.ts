/**
 * What the tool bus's effects see of a tool server: a list of tools and a way to call them.
 * An MCP server (mcp.ts) is one ToolSource; the in-process tools (local.ts) are another.
 */
import type { ToolResult } from '../../machines/protocol.js';

export type { ToolResult };

/** MCP tool annotations. They are hints from the server: untrusted unless the config says so. */
export interface ToolAnnotations {
  readOnlyHint?: boolean;
  openWorldHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  title?: string;
}

/** One tool as a source lists it. */
export interface ToolInfo {
  /** As the model calls it: `<server>.<tool>` for MCP tools. */
  name: string;
  /** The server's own name for it (what goes on the wire). */
  tool: string;
  server: string;
  description?: string;
  /** JSON Schema of the arguments. */
  inputSchema: Record<string, unknown>;
  annotations?: ToolAnnotations;
}

/** A server of tools: listed once when it connects, then called many times at once. */
export interface ToolSource {
  readonly server: string;
  /** The tools as they were listed (after a restart, as they were listed again). */
  list(): ToolInfo[];
  /**
   * Calls `tool` (the server's own name). Resolves with the result, errors included
   * (`isError: true`); rejects only with an AbortError when `signal` aborts. `timeoutMs` counts
   * from this call, time spent waiting for a free slot included.
   */
  call(tool: string, args: unknown, opts: { signal: AbortSignal; timeoutMs?: number }): Promise<ToolResult>;
  /** Ends the server process or session. Calls still running get an error result. */
  close(): Promise<void>;
}

/**
 * How to reach an MCP server: a command to spawn (stdio) or the URL of a Streamable HTTP
 * endpoint. A stdio server gets only a small safe environment plus `env`: never the whole
 * `process.env`, which holds the run's API keys.
 */
export type McpServerConfig =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }
  | { url: string; headers?: Record<string, string> };
