/**
 * What an MCP connection (mcp.ts) needs around the SDK client: a FIFO of call slots, the paged
 * tool listing, an MCP result as a ToolResult, a polite session end, and abort helpers.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ToolResult } from '../../machines/protocol.js';
import type { ToolInfo } from './types.js';

/** A FIFO semaphore: `limit` holders at once, the rest wait in order; a waiter can leave on abort. */
export class Slots {
  active = 0;
  max = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  get queued(): number {
    return this.waiting.length;
  }

  acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.active < this.limit && this.waiting.length === 0) {
      this.take();
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener('abort', leave);
        this.take();
        resolve();
      };
      const leave = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', leave, { once: true });
      this.waiting.push(grant);
    });
  }

  release(): void {
    this.active--;
    this.waiting.shift()?.();
  }

  private take(): void {
    this.active++;
    this.max = Math.max(this.max, this.active);
  }
}

/** Every page of `tools/list`, as ToolInfo; tools that only run as MCP tasks are left out. */
export async function listAllTools(client: Client, server: string, timeout: number): Promise<ToolInfo[]> {
  const tools: ToolInfo[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout });
    for (const t of page.tools) {
      if (t.execution?.taskSupport === 'required') continue;
      const title = t.title ?? t.annotations?.title;
      const annotations = t.annotations || title !== undefined ? { ...t.annotations, ...(title !== undefined ? { title } : {}) } : undefined;
      tools.push({
        name: `${server}.${t.name}`,
        tool: t.name,
        server,
        ...(t.description !== undefined ? { description: t.description } : {}),
        inputSchema: t.inputSchema as Record<string, unknown>,
        ...(annotations ? { annotations } : {}),
      });
    }
    cursor = page.nextCursor;
    // A server that hands back a cursor it gave before would have us list forever.
    if (cursor !== undefined && seen.has(cursor)) throw new Error(`tools/list returned cursor ${JSON.stringify(cursor)} twice`);
    if (cursor !== undefined) seen.add(cursor);
  } while (cursor !== undefined);
  return tools;
}

type ContentPart = { type: string; [key: string]: unknown };

/**
 * The result text: text parts as they are, other parts summarized (`[image image/png, 1234 bytes]`),
 * one per line; structuredContent as JSON when no part carries text.
 */
export function toToolResult(result: { content?: unknown; structuredContent?: unknown; isError?: unknown; toolResult?: unknown }): ToolResult {
  const parts = Array.isArray(result.content) ? (result.content as ContentPart[]) : [];
  const lines = parts.map(partText);
  const hasText = parts.some((p) => p.type === 'text' || (p.type === 'resource' && typeof (p.resource as { text?: unknown })?.text === 'string'));
  if (!hasText && result.structuredContent !== undefined) lines.unshift(JSON.stringify(result.structuredContent));
  // Servers on the 2024-10-07 protocol answer with `toolResult` instead of content.
  if (parts.length === 0 && result.structuredContent === undefined && result.toolResult !== undefined) lines.push(JSON.stringify(result.toolResult));
  return { content: lines.join('\n'), isError: result.isError === true };
}

function partText(part: ContentPart): string {
  switch (part.type) {
    case 'text':
      return String(part.text ?? '');
    case 'image':
    case 'audio':
      return `[${part.type} ${String(part.mimeType ?? 'unknown')}, ${base64Bytes(part.data)} bytes]`;
    case 'resource_link':
      return `[resource link ${String(part.uri)}${typeof part.name === 'string' ? ` (${part.name})` : ''}]`;
    case 'resource': {
      const r = (part.resource ?? {}) as { uri?: unknown; mimeType?: unknown; text?: unknown; blob?: unknown };
      if (typeof r.text === 'string') return `[resource ${String(r.uri)}]\n${r.text}`;
      return `[resource ${String(r.uri)}${typeof r.mimeType === 'string' ? ` ${r.mimeType}` : ''}, ${base64Bytes(r.blob)} bytes]`;
    }
    default:
      return `[${String(part.type)} content]`;
  }
}

function base64Bytes(data: unknown): number {
  if (typeof data !== 'string') return 0;
  const clean = data.replace(/\s/g, '');
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - padding);
}

/** Ends a client's session (HTTP: DELETE it) and its transport (stdio: the process). Never throws. */
export async function endSession(client: Client): Promise<void> {
  const transport = client.transport;
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    await transport.terminateSession().catch(() => {});
  }
  await client.close().catch(() => {});
}

/** `promise`, or a rejection with the signal's reason as soon as it aborts. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

export function abortError(name: string, reason: unknown): Error {
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  const why = reason === undefined ? '' : `: ${messageOf(reason)}`;
  const error = new Error(`call to ${name} was aborted${why}`, { cause: reason });
  error.name = 'AbortError';
  return error;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
