/**
 * `connectMcpServer` as the package exports it: the MCP client (mcp.ts and the MCP SDK) loads on
 * the first connection, not with `import 'swarmstate'`.
 */
import type { McpConnectOptions, McpToolSource } from './mcp.js';
import type { McpServerConfig } from './types.js';

/** Connects to one MCP server and lists its tools: see mcp.ts for the details. */
export async function connectMcpServer(server: string, config: McpServerConfig, opts: McpConnectOptions = {}): Promise<McpToolSource> {
  const mcp = await import('./mcp.js');
  return mcp.connectMcpServer(server, config, opts);
}
