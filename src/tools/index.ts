/** Tools of a run: in-process function tools, MCP servers, and argument validation. */
export * from './local.js';
export { ToolDefinitionError, type AiSdkToolCallOptions, type AiSdkToolLike, type SwarmTool, type SwarmToolEntry, type SwarmTools } from './define.js';
export type { McpServerConfig, ToolAnnotations, ToolInfo, ToolResult, ToolSource } from './types.js';
export { connectMcpServer, toToolResult, type McpConnectOptions, type McpSourceStats, type McpToolSource } from './mcp.js';
export { createArgsValidator, type ArgsValidator } from './validate.js';
