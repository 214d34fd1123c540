/**
 * The `execute_tool` spans of a run's trace (telemetry.ts). The tool bus reports results per
 * execution, not per caller, so a span cannot be ended by its own result: it ends at the first
 * result of its tool after it (a shared call with the execution it joined), or at the latest
 * when its attempt's next model call starts or the attempt ends (`endOf`).
 */
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import { otel } from './otel.js';
import type { RunEvent } from '../machines/protocol.js';

/** One attempt's span and context, and its execute_tool spans still open. */
export interface AttemptSpans {
  span: Span;
  ctx: Context;
  tools: Set<Span>;
}

interface OpenTool {
  span: Span;
  attempt: AttemptSpans;
  shared: boolean;
}

type EventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

export class ToolSpans {
  /** Open spans by tool name, oldest first. */
  private readonly open = new Map<string, OpenTool[]>();
  /** The tools' types (`gen_ai.tool.type`) by name, once the run's tools are known. */
  private readonly types = new Map<string, string>();
  /** What the latest failed execution of each tool threw (redacted), for its span's exception. */
  private readonly errors = new Map<string, string>();

  constructor(
    private readonly tracer: Tracer,
    private readonly redact: <T>(value: T) => T = (value) => value,
  ) {}

  /** The run's tools and their servers: an in-process tool is a `function`, an MCP server's an `extension` (it runs outside, against its own systems). */
  serve(tools: readonly { name: string; server: string }[]): void {
    for (const t of tools) this.types.set(t.name, t.server === 'local' ? 'function' : 'extension');
  }

  /** A tool execution failed with this message: the next failed result of the tool records it. */
  failedWith(name: string, message: string): void {
    this.errors.set(name, this.redact(message));
  }

  /** A call went to the bus: its span opens under `parent` (a cached answer's, or one with no attempt to end it, closes at once). */
  called(event: EventOf<'tool:called'>, attempt: AttemptSpans | undefined, parent: Context, at: number): void {
    const attributes: Attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': event.name,
      'swarmstate.task.id': event.taskId,
      'swarmstate.tool.shared': event.shared,
    };
    const type = this.types.get(event.name);
    if (type !== undefined) attributes['gen_ai.tool.type'] = type;
    if (event.callId !== undefined) attributes['gen_ai.tool.call.id'] = event.callId;
    if (event.cached) attributes['swarmstate.tool.cached'] = true;
    const span = this.tracer.startSpan(`execute_tool ${event.name}`, { startTime: at, attributes }, parent);
    if (event.cached || !attempt) {
      span.end(at);
      return;
    }
    attempt.tools.add(span);
    const open = this.open.get(event.name);
    const entry = { span, attempt, shared: event.shared };
    if (open) open.push(entry);
    else this.open.set(event.name, [entry]);
  }

  /** An execution's result (or a batch's: `batch` executions) ends the oldest open spans of its tool. */
  result(event: EventOf<'tool:result'>, at: number): void {
    const open = this.open.get(event.name);
    if (!open) return;
    let executions = event.batch ?? 1;
    const message = event.isError ? this.errors.get(event.name) : undefined;
    if (event.isError) this.errors.delete(event.name);
    const rest: OpenTool[] = [];
    for (const entry of open) {
      // A shared call waits for an execution already running: it ends with the next result.
      if (entry.shared || executions > 0) {
        if (!entry.shared) executions--;
        if (event.isError) {
          const type = event.timedOut ? 'timeout' : event.cancelled ? 'cancelled' : 'tool_error';
          entry.span.setAttribute('error.type', type);
          entry.span.recordException({ name: type, message: message ?? type }, at);
          entry.span.setStatus({ code: otel().SpanStatusCode.ERROR, message: type });
        }
        entry.attempt.tools.delete(entry.span);
        entry.span.end(at);
      } else rest.push(entry);
    }
    if (rest.length > 0) this.open.set(event.name, rest);
    else this.open.delete(event.name);
  }

  /** A call the task may not make: a span of its own, failed, that never reached the bus. */
  denied(event: EventOf<'tool:denied'>, parent: Context, at: number): void {
    const span = this.tracer.startSpan(
      `execute_tool ${event.name}`,
      { startTime: at, attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': event.name, 'swarmstate.task.id': event.taskId, 'error.type': 'tool_denied' } },
      parent,
    );
    const type = this.types.get(event.name);
    if (type !== undefined) span.setAttribute('gen_ai.tool.type', type);
    span.recordException({ name: 'tool_denied', message: event.reason }, at);
    span.setStatus({ code: otel().SpanStatusCode.ERROR, message: 'tool_denied' });
    span.end(at);
  }

  /** The attempt moved on (its next model call, or its end): its calls still open end now. */
  endOf(attempt: AttemptSpans, at: number): void {
    if (attempt.tools.size === 0) return;
    for (const span of attempt.tools) span.end(at);
    for (const [name, open] of this.open) {
      const rest = open.filter((o) => !attempt.tools.has(o.span));
      if (rest.length > 0) this.open.set(name, rest);
      else this.open.delete(name);
    }
    attempt.tools.clear();
  }
}
