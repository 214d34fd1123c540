/**
 * An MCP server as a ToolSource, on the official SDK client.
 *
 * One connection per server carries many calls at once: JSON-RPC batching left the spec in
 * 2025-06-18, so the bus batches by concurrency (up to `concurrency` `tools/call` requests in
 * flight, the rest wait in FIFO order). Each call gets its own AbortController, so an abort or a
 * timeout cancels exactly that request (the SDK sends `notifications/cancelled`).
 *
 * A stdio server that dies is restarted once (reconnect, list again); after a second death its
 * tools answer every call at once with an error result that names the server.
 *
 * The config's `env` and `headers` values are secrets (tokens, mostly): they are replaced by
 * `[redacted tools.servers.<server>.env.<NAME>]` in everything this connection hands back (tool
 * results, error texts, the stderr it keeps or passes on), so a server that prints or echoes its
 * token ("rejected token ghp_...") does not carry it to the model, the events or the journal.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ToolResult } from '../../machines/protocol.js';
import { Redactor } from '../keys.js';
import type { McpServerConfig, ToolInfo, ToolSource } from './types.js';
import { abortError, endSession, listAllTools, messageOf, Slots, toToolResult, untilAborted } from './mcpHelpers.js';
import { shownUrl, urlSecrets } from './urls.js';

export { toToolResult } from './mcpHelpers.js';

/** The `_meta` field of a tool call that names its logical call across retries and resumes. */
export const IDEMPOTENCY_META = 'swarmstate/idempotency-key';

export interface McpConnectOptions {
  /** Calls in flight on this connection; more wait in FIFO order. Default 8. */
  concurrency?: number;
  /** Restart the server once if it dies. Default true for stdio, false for HTTP. */
  restart?: boolean;
  /** The client name sent in `initialize`. Default `swarmstate`. */
  clientName?: string;
  /** Limit of `initialize` and of each `tools/list` page. Default 30 s. */
  connectTimeoutMs?: number;
  /** Timeout of a call that gives none. Default 60 s (the SDK's default); `Infinity` for none. */
  callTimeoutMs?: number;
  /**
   * Sees a stdio server's stderr as it comes, secrets redacted: the last few characters of a chunk
   * that could begin a secret wait for the next chunk (or the stream's end), so a secret split
   * across two chunks is never handed over in halves. By default stderr is only kept (last 8 KB)
   * for error messages.
   */
  onStderr?: (text: string) => void;
}

/** Counters of one source, for tests and the run report. */
export interface McpSourceStats {
  /** `tools/call` requests sent and not yet answered. */
  inFlight: number;
  /** Calls waiting for a free slot. */
  queued: number;
  /** The most calls ever holding a slot at once: never above `concurrency`. */
  maxInFlight: number;
  /** Times the server died (the process exited or the transport closed) while in use. */
  crashes: number;
}

export interface McpToolSource extends ToolSource {
  readonly state: 'ready' | 'restarting' | 'unavailable' | 'closed';
  readonly stats: McpSourceStats;
  /** The last few KB the server wrote to stderr (stdio only). */
  stderrTail(): string;
}

const STDERR_KEEP = 8192;
const STDERR_IN_MESSAGES = 1000;
/** setTimeout overflows above this; also what we hand the SDK so that its own timer never fires first. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Connects to an MCP server and lists its tools (following pagination). Tools that require
 * MCP task-based execution are left out: this client calls tools directly.
 *
 * @example
 * const fs = await connectMcpServer('fs', { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '.'] });
 * fs.list().map((t) => t.name); // ['fs.read_file', ...]
 * const r = await fs.call('read_file', { path: 'README.md' }, { signal, timeoutMs: 10_000 });
 * await fs.close();
 */
export async function connectMcpServer(server: string, config: McpServerConfig, opts: McpConnectOptions = {}): Promise<McpToolSource> {
  if (typeof server !== 'string' || server === '' || server.includes('.')) {
    throw new TypeError(`MCP server name must be a non-empty string without dots (tools are called "<server>.<tool>"), got ${JSON.stringify(server)}`);
  }
  const concurrency = opts.concurrency ?? 8;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError(`concurrency of MCP server "${server}" must be a positive integer, got ${concurrency}`);
  const source = new McpConnection(server, config, concurrency, opts);
  await source.start();
  return source;
}

interface Session {
  client: Client;
  tools: ToolInfo[];
}

/** Raised inside a call when the server cannot take calls any more; becomes an error result. */
class Unavailable extends Error {}

class McpConnection implements McpToolSource {
  state: McpToolSource['state'] = 'ready';
  private session: Session | undefined;
  private tools: ToolInfo[] = [];
  private restarting: Promise<Session> | undefined;
  private unavailable = '';
  private crashes = 0;
  private inFlight = 0;
  private stderr = '';
  private readonly slots: Slots;
  private readonly isStdio: boolean;
  private readonly restart: boolean;
  /** The config's env and header values. */
  private readonly secrets = new Redactor();

  constructor(
    readonly server: string,
    private readonly config: McpServerConfig,
    concurrency: number,
    private readonly opts: McpConnectOptions,
  ) {
    this.slots = new Slots(concurrency);
    this.isStdio = 'command' in config;
    this.restart = opts.restart ?? this.isStdio;
    const settings = { env: 'env' in config ? config.env : undefined, headers: 'headers' in config ? config.headers : undefined };
    for (const [field, values] of Object.entries(settings)) {
      for (const [name, value] of Object.entries(values ?? {})) {
        if (typeof value === 'string') this.secrets.addSetting(value, `tools.servers.${server}.${field}.${name}`);
      }
    }
    // A URL's user, password and query values may be tokens (`?api_key=...`): secrets like the headers.
    if ('url' in config) for (const secret of urlSecrets(config.url)) this.secrets.addSetting(secret, `tools.servers.${server}.url`);
  }

  get stats(): McpSourceStats {
    return { inFlight: this.inFlight, queued: this.slots.queued, maxInFlight: this.slots.max, crashes: this.crashes };
  }

  stderrTail(): string {
    return this.stderr;
  }

  list(): ToolInfo[] {
    return [...this.tools];
  }

  async start(): Promise<void> {
    this.use(await this.open());
  }

  /**
   * @param idempotencyKey sent as `_meta["swarmstate/idempotency-key"]`: the same for every
   *   execution of one logical call (a resumed run that repeats a call whose result it never
   *   recorded sends the same key), so a server can recognize the repeat and not redo the effect.
   */
  async call(tool: string, args: unknown, { signal, timeoutMs, idempotencyKey }: { signal: AbortSignal; timeoutMs?: number; idempotencyKey?: string }): Promise<ToolResult> {
    const name = `${this.server}.${tool}`;
    if (signal.aborted) throw abortError(name, signal.reason);
    if (args !== undefined && args !== null && (typeof args !== 'object' || Array.isArray(args))) {
      return { content: `invalid arguments for "${name}": must be an object`, isError: true };
    }
    const limitMs = timeoutMs ?? this.opts.callTimeoutMs ?? 60_000;
    // One controller per call: the caller's abort and our timeout both cancel just this request.
    const controller = new AbortController();
    let timedOut = false;
    const onAbort = () => controller.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = Number.isFinite(limitMs)
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(new Error(`timed out after ${limitMs} ms`));
        }, Math.min(Math.max(limitMs, 0), MAX_TIMER_MS))
      : undefined;
    try {
      await this.slots.acquire(controller.signal);
      try {
        const client = await untilAborted(this.ready(), controller.signal);
        this.inFlight++;
        try {
          const params = { name: tool, arguments: (args ?? {}) as Record<string, unknown>, ...(idempotencyKey ? { _meta: { [IDEMPOTENCY_META]: idempotencyKey } } : {}) };
          const result = await client.callTool(params, undefined, {
            signal: controller.signal,
            timeout: MAX_TIMER_MS,
          });
          const out = toToolResult(result);
          return { ...out, content: this.secrets.redact(out.content) };
        } finally {
          this.inFlight--;
        }
      } finally {
        this.slots.release();
      }
    } catch (error) {
      if (signal.aborted) throw abortError(name, signal.reason);
      if (timedOut) return { content: `tool ${name} timed out after ${limitMs} ms`, isError: true };
      return { content: this.secrets.redact(this.failureText(name, error)), isError: true };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    const session = this.session ?? (await this.restarting?.catch(() => undefined));
    this.session = undefined;
    if (!session) return;
    await endSession(session.client);
  }

  // -------------------------------------------------------------------------------------------

  /** A fresh client: spawn or connect, initialize, list every page of tools. */
  private async open(): Promise<Session> {
    const timeout = this.opts.connectTimeoutMs ?? 30_000;
    const client = new Client({ name: this.opts.clientName ?? 'swarmstate', version: '0.1.0' }, { capabilities: {} });
    // Errors surface through the requests that hit them; the SDK's stray ones are not ours to print.
    client.onerror = () => {};
    try {
      await client.connect(this.transport(), { timeout });
      return { client, tools: await listAllTools(client, this.server, timeout) };
    } catch (error) {
      await endSession(client);
      const where = 'command' in this.config ? `command ${JSON.stringify(this.config.command)}` : shownUrl(this.config.url);
      // No `cause`: the error underneath may hold a setting in its own words.
      throw new Error(this.secrets.redact(`could not connect to MCP server "${this.server}" (${where}): ${messageOf(error)}${this.stderrNote()}`));
    }
  }

  private transport() {
    const config = this.config;
    if ('url' in config) {
      return new StreamableHTTPClientTransport(new URL(config.url), config.headers ? { requestInit: { headers: config.headers } } : {});
    }
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args ?? [],
      // The SDK's safe list (PATH, HOME, ...) plus what the config names: never the whole process.env.
      env: { ...getDefaultEnvironment(), ...config.env },
      stderr: 'pipe',
      ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
    });
    // A secret may be split across two chunks: the listener is handed only the settled part (whole
    // lines, and no secret can still end in what is to come); the rest waits for more or the end.
    let unsettled = '';
    const pass = (text: string) => {
      if (text === '') return;
      try {
        this.opts.onStderr?.(text);
      } catch {
        // A listener that throws must not take the stream (and the process) down with it.
      }
    };
    transport.stderr?.on('data', (chunk: Buffer) => {
      const text = unsettled + chunk.toString('utf8');
      const settled = this.secrets.settledLength(text, { lines: true });
      unsettled = text.slice(settled);
      const shown = this.secrets.redact(text.slice(0, settled));
      // Redacted again whole: a secret split across two chunks is found once both are in.
      this.stderr = this.secrets.redact(this.stderr + shown).slice(-STDERR_KEEP);
      pass(shown);
    });
    transport.stderr?.on('end', () => {
      const rest = this.secrets.redact(unsettled);
      unsettled = '';
      this.stderr = this.secrets.redact(this.stderr + rest).slice(-STDERR_KEEP);
      pass(rest);
    });
    return transport;
  }

  private use(session: Session): void {
    this.session = session;
    this.tools = session.tools;
    session.client.onclose = () => {
      if (this.session === session && this.state !== 'closed') this.lost();
    };
  }

  /** The connection ended without us closing it: the server died. Runs before in-flight calls are rejected. */
  private lost(): void {
    this.crashes++;
    this.session = undefined;
    const died = this.isStdio ? 'exited' : 'closed the connection';
    if (this.crashes > 1 || !this.restart) {
      const times = this.crashes > 1 ? ' twice' : '';
      this.giveUp(`server "${this.server}" ${died}${times}; its tools are unavailable for the rest of the run`);
      return;
    }
    this.state = 'restarting';
    this.restarting = this.open();
    this.restarting.then(
      (session) => {
        this.restarting = undefined;
        // When closed meanwhile, close() has this session and ends it.
        if (this.state !== 'closed') {
          this.state = 'ready';
          this.use(session);
        }
      },
      (error) => {
        this.restarting = undefined;
        if (this.state !== 'closed') this.giveUp(`server "${this.server}" ${died} and could not be restarted (${messageOf(error)}); its tools are unavailable for the rest of the run`);
      },
    );
  }

  private giveUp(message: string): void {
    this.state = 'unavailable';
    this.unavailable = message;
  }

  /** The client to send on, once a restart in progress is done; throws Unavailable when there is none. */
  private async ready(): Promise<Client> {
    if (this.state === 'closed') throw new Unavailable(`server "${this.server}" is closed`);
    if (this.state === 'unavailable') throw new Unavailable(this.unavailable);
    if (this.session) return this.session.client;
    try {
      return (await this.restarting!).client;
    } catch {
      throw new Unavailable(this.unavailable || `server "${this.server}" is unavailable`);
    }
  }

  private failureText(name: string, error: unknown): string {
    if (error instanceof Unavailable) return `tool ${name} failed: ${error.message}`;
    if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
      if (this.state === 'closed') return `tool ${name} failed: server "${this.server}" was closed while it ran`;
      const died = this.isStdio ? 'exited' : 'closed the connection';
      const next = this.state === 'restarting' ? '; the server is being restarted' : this.state === 'unavailable' ? `; ${this.unavailable}` : '';
      return `tool ${name} failed: server "${this.server}" ${died} while it ran${next}${this.stderrNote()}`;
    }
    return `tool ${name} failed: ${messageOf(error)}`;
  }

  private stderrNote(): string {
    const tail = this.stderr.trim().slice(-STDERR_IN_MESSAGES);
    return tail === '' ? '' : `\nserver stderr (last lines):\n${tail}`;
  }
}
