/**
 * OpenTelemetry spans of a run, built from its event stream (as the journal is), so the
 * machines stay pure and a run without a tracing SDK does nothing more than before:
 *
 *   swarmstate.run
 *   └─ task <id>                       queued → completed / failed / skipped / cancelled
 *      │                               (a planner's sub-tasks: task spans under the planner's)
 *      └─ invoke_agent <id>            one per attempt (route, model)
 *         ├─ chat <model>              model:request → model:response / model:error
 *         └─ execute_tool <tool>       tool:called → the tool's result
 *
 * Attributes follow the OpenTelemetry GenAI semantic conventions (`gen_ai.*`, `error.type`)
 * plus ours (`swarmstate.*`). Every value comes from the already-redacted events: key ids
 * (`<provider>:<fingerprint>`), never a key; no prompt or output text.
 *
 * Start and end times are the events' times on the swarm's clock. The `execute_tool` spans and
 * when each ends (the bus reports results per execution, not per caller) are telemetryTools.ts.
 */
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import { otel } from './otel.js';
import type { ErrorInfo, RunEvent, Usage } from '../machines/protocol.js';
import type { Plan } from './plan/index.js';
import { ToolSpans, type AttemptSpans } from './telemetryTools.js';

/** The tracer of runs when createSwarm is given none: the global one (a no-op until an SDK is registered). */
export function defaultTracer(): Tracer {
  return otel().trace.getTracer('swarmstate');
}

interface TaskSpans {
  id: string;
  span: Span;
  ctx: Context;
  attempts: Map<number, AttemptSpans>;
}

/** One run's spans. `record` every event (redacted, in order), `close` when the run is over. */
export class RunTracer {
  private run: Span | undefined;
  private runCtx: Context;
  private readonly tasks = new Map<string, TaskSpans>();
  /** Every task's context, kept after its span ended: a planner's sub-tasks are its children. */
  private readonly taskCtx = new Map<string, Context>();
  /** Open chat spans by `task|attempt`, oldest first. */
  private readonly chats = new Map<string, Span[]>();
  private readonly tools: ToolSpans;
  /** False once the run span does not record (no SDK, or not sampled): every event is then ignored. */
  private on = true;

  constructor(
    private readonly tracer: Tracer,
    private readonly runId: string,
    private readonly plan: Pick<Plan, 'providers'>,
    /** The context the run was started in: the caller's active span becomes the run's parent. */
    private readonly parent: Context = otel().context.active(),
  ) {
    this.runCtx = parent;
    this.tools = new ToolSpans(tracer);
  }

  /** False when nothing records (no SDK, not sampled, or the run is over): skip `record`. */
  get active(): boolean {
    return this.on;
  }

  record(event: RunEvent, at: number): void {
    if (!this.on) return;
    try {
      this.apply(event, at);
    } catch {
      // Tracing is an observer: a broken exporter or SDK must not fail the run.
    }
  }

  /** Ends every span still open (a run that stopped without its final events). */
  close(at: number, error?: unknown): void {
    if (!this.on) return;
    try {
      for (const task of this.tasks.values()) this.endTask(task, at);
      this.tasks.clear();
      if (this.run) {
        if (error !== undefined) {
          const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : 'internal';
          this.run.setAttribute('error.type', code);
          this.run.setStatus({ code: otel().SpanStatusCode.ERROR, message: code });
        }
        this.run.end(at);
        this.run = undefined;
      }
    } catch {
      // As in record().
    }
    this.on = false;
  }

  private apply(event: RunEvent, at: number): void {
    switch (event.type) {
      case 'run:started': {
        this.run = this.tracer.startSpan(
          'swarmstate.run',
          { startTime: at, kind: otel().SpanKind.INTERNAL, attributes: { 'swarmstate.run.id': this.runId, 'swarmstate.run.tasks': event.tasks, ...(event.resumed ? { 'swarmstate.run.resumed': true } : {}) } },
          this.parent,
        );
        if (!this.run.isRecording()) {
          this.on = false;
          return;
        }
        this.runCtx = otel().trace.setSpan(this.parent, this.run);
        return;
      }
      case 'task:queued':
        this.taskOf(event.taskId, at);
        return;
      case 'task:started': {
        const task = this.taskOf(event.taskId, at);
        for (const [n, open] of task.attempts) if (n !== event.attempt) this.endAttempt(task, n, open, at);
        if (task.attempts.has(event.attempt)) return;
        // A function step is a tool the run calls itself, not an agent.
        const fn = event.fn;
        const span = this.tracer.startSpan(
          fn !== undefined ? `execute_tool ${fn}` : `invoke_agent ${event.taskId}`,
          {
            startTime: at,
            attributes: {
              ...(fn !== undefined
                ? { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': fn, 'gen_ai.tool.type': 'function' }
                : { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': event.taskId }),
              'swarmstate.task.id': event.taskId,
              'swarmstate.attempt': event.attempt,
              'swarmstate.model': event.model,
              ...(event.route ? { 'swarmstate.route': event.route } : {}),
            },
          },
          task.ctx,
        );
        task.attempts.set(event.attempt, { span, ctx: otel().trace.setSpan(task.ctx, span), tools: new Set() });
        return;
      }
      case 'task:retry':
        this.attemptOf(event.taskId, event.attempt)?.span.addEvent('retry', { 'swarmstate.retry': event.retry, 'swarmstate.delay_ms': event.delayMs, 'error.type': event.error.code }, at);
        return;
      case 'task:fallback':
        this.attemptOf(event.taskId, event.attempt)?.span.addEvent('fallback', { 'swarmstate.from': event.from, 'swarmstate.to': event.to }, at);
        return;
      case 'task:compacted':
        this.attemptOf(event.taskId, event.attempt)?.span.addEvent('compacted', { 'swarmstate.mode': event.mode, 'swarmstate.tokens_before': event.tokensBefore, 'swarmstate.tokens_after': event.tokensAfter }, at);
        return;
      case 'task:completed': {
        const task = this.tasks.get(event.taskId);
        if (!task) return;
        const attempt = task.attempts.get(event.attempt);
        if (attempt) {
          attempt.span.setAttributes(usageAttributes(event.usage));
          this.endAttempt(task, event.attempt, attempt, at);
        }
        task.span.setAttribute('swarmstate.task.status', 'completed');
        this.endTask(task, at);
        this.tasks.delete(event.taskId);
        return;
      }
      case 'task:failed': {
        const task = this.tasks.get(event.taskId);
        if (!task) return;
        const attempt = task.attempts.get(event.attempt);
        if (attempt) {
          failed(attempt.span, event.error);
          this.endAttempt(task, event.attempt, attempt, at);
        }
        if (event.willRetry) return;
        task.span.setAttribute('swarmstate.task.status', 'failed');
        failed(task.span, event.error);
        this.endTask(task, at);
        this.tasks.delete(event.taskId);
        return;
      }
      case 'task:skipped':
      case 'task:cancelled': {
        const task = this.taskOf(event.taskId, at);
        task.span.setAttribute('swarmstate.task.status', event.type === 'task:skipped' ? 'skipped' : 'cancelled');
        if (event.type === 'task:skipped') {
          task.span.setAttribute('swarmstate.skip_reason', event.reason);
          if (event.cause !== undefined) task.span.setAttribute('swarmstate.skip_cause', event.cause);
        }
        this.endTask(task, at);
        this.tasks.delete(event.taskId);
        return;
      }
      case 'model:request': {
        const attempt = this.attemptOf(event.taskId, event.attempt);
        // The agent waits for every tool result before its next model call.
        if (attempt) this.tools.endOf(attempt, at);
        const span = this.tracer.startSpan(
          `chat ${event.model}`,
          {
            startTime: at,
            kind: otel().SpanKind.CLIENT,
            attributes: {
              'gen_ai.operation.name': 'chat',
              'gen_ai.provider.name': this.providerName(event.provider),
              // The older name of the same attribute, still read by some backends.
              'gen_ai.system': this.providerName(event.provider),
              'gen_ai.request.model': event.model,
              'swarmstate.provider': event.provider,
              'swarmstate.key.id': event.keyId,
              'swarmstate.route': `${event.provider}/${event.model}`,
              'swarmstate.task.id': event.taskId,
              'swarmstate.attempt': event.attempt,
              'swarmstate.turn': event.turn,
            },
          },
          attempt?.ctx ?? this.tasks.get(event.taskId)?.ctx ?? this.runCtx,
        );
        const key = `${event.taskId}|${event.attempt}`;
        const open = this.chats.get(key);
        if (open) open.push(span);
        else this.chats.set(key, [span]);
        return;
      }
      case 'model:response':
      case 'model:error': {
        const key = `${event.taskId}|${event.attempt}`;
        const open = this.chats.get(key);
        const span = open?.shift();
        if (open?.length === 0) this.chats.delete(key);
        if (!span) return;
        if (event.type === 'model:response') {
          span.setAttributes(usageAttributes(event.usage));
          if (event.costUsd !== undefined) span.setAttribute('swarmstate.cost_usd', event.costUsd);
        } else failed(span, event.error);
        span.end(at);
        return;
      }
      case 'tool:called': {
        const attempt = this.currentAttempt(event.taskId);
        this.tools.called(event, attempt, attempt?.ctx ?? this.tasks.get(event.taskId)?.ctx ?? this.runCtx, at);
        return;
      }
      case 'tool:result':
        this.tools.result(event, at);
        return;
      case 'tool:denied':
        this.tools.denied(event, this.currentAttempt(event.taskId)?.ctx ?? this.runCtx, at);
        return;
      case 'breaker:open':
        this.run?.addEvent('breaker.open', { 'swarmstate.route': event.route, 'swarmstate.failures': event.failures }, at);
        return;
      case 'key:revoked':
        this.run?.addEvent('key.revoked', { 'swarmstate.key.id': event.keyId }, at);
        return;
      case 'run:cancelled':
        this.run?.addEvent('cancelled', { 'swarmstate.reason': event.reason }, at);
        return;
      case 'run:completed': {
        const run = this.run;
        if (!run) return;
        run.setAttribute('swarmstate.run.status', event.status);
        if (event.status === 'failed' || event.status === 'budget_exceeded') {
          run.setAttribute('error.type', event.status);
          run.setStatus({ code: otel().SpanStatusCode.ERROR, message: event.status });
        }
        this.close(at);
        return;
      }
      default:
        return;
    }
  }

  private providerName(provider: string): string {
    const type = this.plan.providers[provider]?.type as string | undefined;
    // Well-known names where the convention has one; ours otherwise.
    return type === 'anthropic' || type === 'openai' ? type : `swarmstate.${type ?? 'unknown'}`;
  }

  private taskOf(taskId: string, at: number): TaskSpans {
    let task = this.tasks.get(taskId);
    if (!task) {
      // A planner's sub-task (`<planner>/<id>`) goes under the planner's task span.
      const slash = taskId.lastIndexOf('/');
      const planner = slash > 0 ? taskId.slice(0, slash) : undefined;
      const parent = (planner !== undefined ? this.taskCtx.get(planner) : undefined) ?? this.runCtx;
      const attributes: Attributes = { 'swarmstate.task.id': taskId, ...(planner !== undefined ? { 'swarmstate.task.parent': planner } : {}) };
      const span = this.tracer.startSpan(`task ${taskId}`, { startTime: at, attributes }, parent);
      task = { id: taskId, span, ctx: otel().trace.setSpan(parent, span), attempts: new Map() };
      this.tasks.set(taskId, task);
      this.taskCtx.set(taskId, task.ctx);
    }
    return task;
  }

  private attemptOf(taskId: string, attempt: number): AttemptSpans | undefined {
    return this.tasks.get(taskId)?.attempts.get(attempt);
  }

  /** The task's latest open attempt (tool events carry no attempt number). */
  private currentAttempt(taskId: string): AttemptSpans | undefined {
    const attempts = this.tasks.get(taskId)?.attempts;
    if (!attempts || attempts.size === 0) return undefined;
    return [...attempts.values()].at(-1);
  }

  private endAttempt(task: TaskSpans, n: number, attempt: AttemptSpans, at: number): void {
    this.tools.endOf(attempt, at);
    // A call still open when its attempt ended was abandoned (cancelled, timed out).
    const key = `${task.id}|${n}`;
    for (const span of this.chats.get(key) ?? []) span.end(at);
    this.chats.delete(key);
    attempt.span.end(at);
    task.attempts.delete(n);
  }

  private endTask(task: TaskSpans, at: number): void {
    for (const [n, attempt] of task.attempts) this.endAttempt(task, n, attempt, at);
    task.span.end(at);
  }
}

function usageAttributes(usage: Usage): Attributes {
  return {
    // The conventions count every prompt token as input, cached ones included.
    'gen_ai.usage.input_tokens': usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
    'gen_ai.usage.cache_read.input_tokens': usage.cacheReadTokens,
    'gen_ai.usage.cache_creation.input_tokens': usage.cacheWriteTokens,
  };
}

function failed(span: Span, error: ErrorInfo): void {
  span.setAttribute('error.type', error.code);
  if (error.status !== undefined) span.setAttribute('http.response.status_code', error.status);
  if (error.retryAfterMs !== undefined) span.setAttribute('swarmstate.retry_after_ms', error.retryAfterMs);
  span.setAttribute('swarmstate.error.retryable', error.retryable);
  span.setStatus({ code: otel().SpanStatusCode.ERROR, message: error.code });
}
