/**
 * The tools of one run: the embedder's in-process tools and the tools of the plan's MCP servers,
 * connected when the run starts and closed when it ends. This is what `src/swarm.ts` hands the
 * tool bus (`executeTool`, `executeBatch`) and the providers (tool specs).
 *
 * Trust: MCP annotations are hints from the server. A tool is shareable (deduplicated, cached)
 * only when its server is `trusted` and it says read-only and not open-world, or when the plan
 * lists it in `tools.shareable`. In-process tools are the embedder's own: their hints count.
 */
import type { BusTool, ToolResult } from '../../machines/protocol.js';
import type { Plan, PlanIssue } from '../plan/index.js';
import type { ToolSpec } from '../providers/types.js';
import { isShareable, toolOutputText, type ToolDefinition } from './local.js';
import type { McpServerConfig, ToolInfo, ToolSource } from './types.js';
import { shownUrl } from './urls.js';
import { createArgsValidator } from './validate.js';

interface Entry {
  spec: ToolSpec;
  bus: BusTool;
  local?: ToolDefinition;
  remote?: { source: ToolSource; tool: string };
  validate: (args: unknown) => string | undefined;
}

export class RunTools {
  private constructor(
    private readonly entries: Map<string, Entry>,
    private readonly sources: ToolSource[],
  ) {}

  /** Connects every MCP server of the plan (in parallel) and lists its tools. */
  static async open(plan: Plan, local: readonly ToolDefinition[], env: Record<string, string | undefined>): Promise<RunTools> {
    const entries = new Map<string, Entry>();
    const shareableByPlan = new Set(plan.tools.shareable);
    for (const def of local) {
      const shareable = isShareable(def) || shareableByPlan.has(def.name);
      // Made JSON Schema by createSwarm (define.ts).
      const inputSchema = (def.inputSchema ?? { type: 'object' }) as Record<string, unknown>;
      entries.set(def.name, {
        spec: { name: def.name, description: def.description ?? '', inputSchema },
        // Cached (and not clearing the cache) only when read-only: `shareable` alone means
        // concurrent identical calls may share one run, not that results may be reused later.
        bus: {
          name: def.name,
          server: 'local',
          shareable,
          readOnly: def.annotations?.readOnlyHint === true || shareableByPlan.has(def.name),
          batch: def.batchHandler !== undefined,
        },
        local: def,
        validate: createArgsValidator(inputSchema, def.name),
      });
    }
    const servers = Object.entries(plan.tools.servers);
    // The MCP client loads only for a plan with servers: it is a third of a second of imports.
    const { connectMcpServer } = servers.length > 0 ? await import('./mcp.js') : { connectMcpServer: undefined };
    const settled = await Promise.allSettled(servers.map(([name, spec]) =>
        // The bus owns the per-call deadline (plan.tools.callTimeoutMs); the connection only bounds
        // how many calls run at once on the server.
        connectMcpServer!(name, configOf(spec, env), { concurrency: plan.tools.serverConcurrency, callTimeoutMs: Infinity }),
      ));
    const sources: ToolSource[] = [];
    const failures: string[] = [];
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') sources.push(s.value);
      else failures.push(`tools.servers.${servers[i]![0]}: cannot connect: ${connectFailure(servers[i]![1], s.reason, env)}`);
    });
    if (failures.length > 0) {
      await Promise.allSettled(sources.map((x) => x.close()));
      throw new ToolSetupError(failures.map((f) => ({ path: f.slice(0, f.indexOf(':')), message: f.slice(f.indexOf(':') + 2) })));
    }
    for (const source of sources) {
      const trusted = plan.tools.servers[source.server]!.trusted;
      for (const info of source.list()) {
        const readOnly = info.annotations?.readOnlyHint === true && trusted;
        const shareable = (readOnly && info.annotations?.openWorldHint !== true) || shareableByPlan.has(info.name);
        entries.set(info.name, {
          spec: specOf(info),
          bus: { name: info.name, server: source.server, shareable, readOnly: readOnly || shareable, batch: false },
          remote: { source, tool: info.tool },
          validate: createArgsValidator(info.inputSchema, info.name),
        });
      }
    }
    return new RunTools(entries, sources);
  }

  /** Tasks that name a tool no source has, found once the servers are listed. */
  problems(plan: Plan): PlanIssue[] {
    const out: PlanIssue[] = [];
    plan.tasks.forEach((t, i) =>
      t.tools.forEach((name, j) => {
        if (!this.entries.has(name)) out.push({ path: `tasks[${i}].tools[${j}]`, message: `server "${name.split('.')[0]}" has no tool "${name.slice(name.indexOf('.') + 1)}"` });
      }),
    );
    return out;
  }

  busTools(): BusTool[] {
    return [...this.entries.values()].map((e) => e.bus);
  }

  spec(name: string): ToolSpec | undefined {
    return this.entries.get(name)?.spec;
  }

  /**
   * Estimated tokens the definitions of these tools add to every request that offers them: their
   * UTF-8 size / 4, so that 4x the estimate bounds them (budgets reserve that bound).
   */
  specTokens(names: readonly string[]): number {
    let bytes = 0;
    for (const name of names) {
      const spec = this.entries.get(name)?.spec;
      if (spec) bytes += Buffer.byteLength(spec.name + (spec.description ?? '') + JSON.stringify(spec.inputSchema));
    }
    return Math.ceil(bytes / 4);
  }

  /** One call: arguments checked against the tool's schema first. Rejects with the error text. */
  async execute(name: string, args: unknown, signal: AbortSignal, idempotencyKey?: string, toolCallId?: string): Promise<string> {
    const entry = this.entries.get(name);
    if (!entry) throw new Error(`unknown tool "${name}"`);
    const invalid = entry.validate(args);
    if (invalid) throw new Error(invalid);
    if (entry.local) return toolOutputText(await entry.local.handler(args, { signal, ...(idempotencyKey ? { idempotencyKey } : {}), ...(toolCallId ? { toolCallId } : {}) }));
    const result = await entry.remote!.source.call(entry.remote!.tool, args, { signal, ...(idempotencyKey ? { idempotencyKey } : {}) });
    if (result.isError) throw new Error(result.content);
    return result.content;
  }

  /** Many calls of a tool with a batch handler; invalid calls get their error without running. */
  async executeBatch(name: string, calls: unknown[], signal: AbortSignal): Promise<ToolResult[]> {
    const entry = this.entries.get(name);
    if (!entry?.local?.batchHandler) return Promise.all(calls.map((args) => this.execute(name, args, signal).then(ok, fail)));
    const checks = calls.map((args) => entry.validate(args));
    const valid = calls.filter((_, i) => checks[i] === undefined);
    const outputs = valid.length > 0 ? await entry.local.batchHandler(valid, { signal }) : [];
    let k = 0;
    return checks.map((problem) => {
      if (problem) return { content: problem, isError: true };
      if (k >= outputs.length) return { content: `batch handler of "${name}" returned ${outputs.length} results for ${valid.length} calls`, isError: true };
      const out = outputs[k++];
      return out instanceof Error ? { content: out.message, isError: true } : { content: toolOutputText(out), isError: false };
    });
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.sources.map((s) => s.close()));
  }
}

const ok = (content: string): ToolResult => ({ content, isError: false });
const fail = (error: unknown): ToolResult => ({ content: error instanceof Error ? error.message : String(error), isError: true });

function specOf(info: ToolInfo): ToolSpec {
  return { name: info.name, description: info.description ?? '', inputSchema: info.inputSchema };
}

/** The plan's server entry as a connection config, `{ env: NAME }` values read from `env`. */
function configOf(spec: Plan['tools']['servers'][string], env: Record<string, string | undefined>): McpServerConfig {
  const resolve = (values: Record<string, string | { env: string }> | undefined) =>
    values && Object.fromEntries(Object.entries(values).map(([k, v]) => [k, typeof v === 'string' ? v : (env[v.env] ?? '')]));
  if ('command' in spec) {
    const e = resolve(spec.env);
    return { command: spec.command, args: spec.args, ...(e ? { env: e } : {}), ...(spec.cwd ? { cwd: spec.cwd } : {}) };
  }
  const h = resolve(spec.headers);
  return { url: typeof spec.url === 'string' ? spec.url : (env[spec.url.env] ?? ''), ...(h ? { headers: h } : {}) };
}

/**
 * Why a server did not connect. A URL from the environment is not shown, not even without its
 * password and query values as the connection shows a URL: a token may be anywhere in it (a
 * path segment), and the message reaches the output and the journal.
 */
function connectFailure(spec: Plan['tools']['servers'][string], reason: unknown, env: Record<string, string | undefined>): string {
  const message = (reason as Error)?.message ?? String(reason);
  if (!('url' in spec) || typeof spec.url === 'string') return message;
  const url = env[spec.url.env] ?? '';
  // Validation saw it set; a worker's own environment may not have it.
  if (url === '') return `environment variable ${spec.url.env} (the server's url) is not set`;
  return message.replaceAll(shownUrl(url), `the URL in environment variable ${spec.url.env}`);
}

/** Tools that cannot be set up (a server that does not start, a tool it does not have). */
export class ToolSetupError extends Error {
  readonly code = 'TOOLS_UNAVAILABLE';
  constructor(readonly issues: PlanIssue[]) {
    super(`the plan's tools are not available:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}`);
    this.name = 'ToolSetupError';
  }
}
