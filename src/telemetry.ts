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
 * Attributes follow the OpenTelemetry GenAI semantic conventions v1.41.0 (`gen_ai.*`,
 * `server.*`, `error.type`; telemetryNames.ts) plus ours (`swarmstate.*`). Every value comes from
 * the already-redacted events (key ids `<provider>:<fingerprint>`, never a key) or, for a model
 * call's settings and (opt-in, `captureContent`) its messages, from the call itself, redacted
 * the same way. The GenAI client metrics come from the same events (telemetryMetrics.ts).
 *
 * Start and end times are the events' times on the swarm's clock. The `execute_tool` spans and
 * when each ends (the bus reports results per execution, not per caller) are telemetryTools.ts.
 */
import type { Attributes, Context, Meter, Span, Tracer } from '@opentelemetry/api';
import { otel } from './otel.js';
import type { ModelCallInput, ModelCallOutput, RunEvent } from '../machines/protocol.js';
import type { Plan } from './plan/index.js';
import { callAttributes, ChatSpans, failed, usageAttributes, type CallNaming, type SentSettings } from './telemetryChat.js';
import { GenAiMetrics } from './telemetryMetrics.js';
import { aiSdkProviderName, aiSdkSourceProvider, latestGenAiOnly, serverOf } from './telemetryNames.js';
import { ToolSpans, type AttemptSpans } from './telemetryTools.js';

/** The tracer of runs when createSwarm is given none: the global one (a no-op until an SDK is registered). */
export function defaultTracer(): Tracer {
  return otel().trace.getTracer('swarmstate');
}

/** How a run's telemetry is made (src/run/start.ts gives what createSwarm was told). */
export interface TelemetryOptions {
  /** The context the run was started in: the caller's active span becomes the run's parent. */
  parent?: Context;
  /** The meter of the GenAI metrics: default the global one (nothing until a MeterProvider is registered); `false`: none. */
  meter?: Meter | false;
  /** Record prompts and outputs on chat spans (`gen_ai.input.messages`, ...). Default false. */
  captureContent?: boolean;
  /** The run's redaction, applied to captured content. */
  redact?: <T>(value: T) => T;
  /** Where `OTEL_SEMCONV_STABILITY_OPT_IN` is read. Default process.env. */
  env?: Record<string, string | undefined>;
  /** The objects given to createSwarm per provider name or type (an `ai-sdk` provider's model names its provider). */
  sources?: Record<string, unknown>;
}

interface TaskSpans {
  id: string;
  span: Span;
  ctx: Context;
  attempts: Map<number, AttemptSpans>;
}

/** One run's spans and metrics. `record` every event (redacted, in order), `close` when the run is over. */
export class RunTracer {
  private run: Span | undefined;
  private runCtx: Context;
  private readonly parent: Context;
  private readonly tasks = new Map<string, TaskSpans>();
  /** Every task's context, kept after its span ended: a planner's sub-tasks are its children. */
  private readonly taskCtx = new Map<string, Context>();
  private readonly chats: ChatSpans | undefined;
  private readonly tools: ToolSpans | undefined;
  private readonly metrics: GenAiMetrics | undefined;
  private readonly naming: CallNaming;
  /** False once the run span does not record (no SDK, or not sampled): spans are then skipped. */
  private spansOn: boolean;

  constructor(
    private readonly tracer: Tracer | undefined,
    private readonly runId: string,
    private readonly plan: Pick<Plan, 'providers'>,
    options: TelemetryOptions = {},
  ) {
    this.parent = options.parent ?? otel().context.active();
    this.runCtx = this.parent;
    this.naming = namingOf(runId, plan, options);
    this.spansOn = tracer !== undefined;
    this.chats = tracer ? new ChatSpans(tracer, this.naming) : undefined;
    this.tools = tracer ? new ToolSpans(tracer, this.naming.redact) : undefined;
    this.metrics = GenAiMetrics.of(options.meter);
  }

  /** False when nothing records (no SDK, not sampled, or the run is over): skip `record`. */
  get active(): boolean {
    return this.spansOn || this.metrics !== undefined;
  }

  /** Whether a model call should hand over its settings and content (`details`): its span records. */
  get wantsDetails(): boolean {
    return this.spansOn;
  }

  /** A model call's settings (and content, when captured), from the call itself: before its outcome event. */
  details(call: ModelCallInput, sent: SentSettings, out: ModelCallOutput | undefined): void {
    if (!this.spansOn) return;
    try {
      this.chats?.details(call, sent, out);
    } catch {
      // As in record().
    }
  }

  /** The run's tools and their servers (`gen_ai.tool.type`), once its MCP servers are connected. */
  toolServers(tools: readonly { name: string; server: string }[]): void {
    this.tools?.serve(tools);
  }

  /** A tool execution failed with this (redacted) message: its span's exception, at its result. */
  toolFailed(name: string, message: string): void {
    if (this.spansOn) this.tools?.failedWith(name, message);
  }

  record(event: RunEvent, at: number): void {
    try {
      if (this.metrics) this.measure(this.metrics, event, at);
      if (this.spansOn) this.apply(event, at);
    } catch {
      // Tracing is an observer: a broken exporter or SDK must not fail the run.
    }
  }

  private measure(metrics: GenAiMetrics, event: RunEvent, at: number): void {
    switch (event.type) {
      case 'model:request':
        metrics.started(`${event.taskId}|${event.attempt}`, at, callAttributes(this.naming, event));
        return;
      case 'model:response':
        metrics.ended(`${event.taskId}|${event.attempt}`, at, {
          usage: event.usage,
          ...(event.response?.model !== undefined ? { responseModel: event.response.model } : {}),
          ...(event.response?.provider !== undefined ? { provider: aiSdkProviderName(event.response.provider) } : {}),
        });
        return;
      case 'model:error':
        metrics.ended(`${event.taskId}|${event.attempt}`, at, { errorType: event.error.code });
        return;
      case 'task:completed':
      case 'task:failed':
        metrics.dropAttempt(`${event.taskId}|${event.attempt}`);
        return;
      default:
        return;
    }
  }

  /** Ends every span still open (a run that stopped without its final events). */
  close(at: number, error?: unknown): void {
    if (!this.spansOn) return;
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
    this.spansOn = false;
  }

  private apply(event: RunEvent, at: number): void {
    switch (event.type) {
      case 'run:started': {
        this.run = this.tracer!.startSpan(
          'swarmstate.run',
          { startTime: at, kind: otel().SpanKind.INTERNAL, attributes: { 'swarmstate.run.id': this.runId, 'swarmstate.run.tasks': event.tasks, ...(event.resumed ? { 'swarmstate.run.resumed': true } : {}) } },
          this.parent,
        );
        if (!this.run.isRecording()) {
          this.spansOn = false;
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
        const span = this.tracer!.startSpan(
          fn !== undefined ? `execute_tool ${fn}` : `invoke_agent ${event.taskId}`,
          {
            startTime: at,
            attributes: {
              ...(fn !== undefined
                ? { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': fn, 'gen_ai.tool.type': 'function' }
                : { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': event.taskId, 'gen_ai.conversation.id': this.naming.conversation(event.taskId), ...this.agentModel(event.route) }),
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
          failed(attempt.span, event.error, at, true);
          this.endAttempt(task, event.attempt, attempt, at);
        }
        if (event.willRetry) return;
        task.span.setAttribute('swarmstate.task.status', 'failed');
        failed(task.span, event.error, at, false);
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
        if (attempt) this.tools!.endOf(attempt, at);
        this.chats!.request(event, attempt?.ctx ?? this.tasks.get(event.taskId)?.ctx ?? this.runCtx, at);
        return;
      }
      case 'model:response':
      case 'model:error':
        this.chats!.outcome(event, at);
        return;
      case 'tool:called': {
        const attempt = this.currentAttempt(event.taskId);
        this.tools!.called(event, attempt, attempt?.ctx ?? this.tasks.get(event.taskId)?.ctx ?? this.runCtx, at);
        return;
      }
      case 'tool:result':
        this.tools!.result(event, at);
        return;
      case 'tool:denied':
        this.tools!.denied(event, this.currentAttempt(event.taskId)?.ctx ?? this.runCtx, at);
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

  /** An attempt's provider and model, from its route (`<provider>/<model id>`). */
  private agentModel(route: string | undefined): Attributes {
    const slash = route?.indexOf('/') ?? -1;
    if (route === undefined || slash <= 0) return {};
    const provider = route.slice(0, slash);
    const model = route.slice(slash + 1);
    const attributes: Attributes = { 'gen_ai.provider.name': this.naming.providerName(provider, model), 'gen_ai.request.model': model };
    if (!this.naming.latestOnly) attributes['gen_ai.system'] = attributes['gen_ai.provider.name'];
    return attributes;
  }

  private taskOf(taskId: string, at: number): TaskSpans {
    let task = this.tasks.get(taskId);
    if (!task) {
      // A planner's sub-task (`<planner>/<id>`) goes under the planner's task span.
      const slash = taskId.lastIndexOf('/');
      const planner = slash > 0 ? taskId.slice(0, slash) : undefined;
      const parent = (planner !== undefined ? this.taskCtx.get(planner) : undefined) ?? this.runCtx;
      const attributes: Attributes = { 'swarmstate.task.id': taskId, ...(planner !== undefined ? { 'swarmstate.task.parent': planner } : {}) };
      const span = this.tracer!.startSpan(`task ${taskId}`, { startTime: at, attributes }, parent);
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
    this.tools!.endOf(attempt, at);
    // A call still open when its attempt ended was abandoned (cancelled, timed out).
    this.chats!.endAttempt(task.id, n, at);
    attempt.span.end(at);
    task.attempts.delete(n);
  }

  private endTask(task: TaskSpans, at: number): void {
    for (const [n, attempt] of task.attempts) this.endAttempt(task, n, attempt, at);
    task.span.end(at);
  }
}

/** What the spans of a run name (telemetryChat.ts): providers, servers, conversations, the opt-in and content capture. */
function namingOf(runId: string, plan: Pick<Plan, 'providers'>, options: TelemetryOptions): CallNaming {
  const names = new Map<string, string>();
  const sources = options.sources ?? {};
  return {
    providerName(provider, model) {
      const key = `${provider}\u0000${model}`;
      let name = names.get(key);
      if (name === undefined) {
        const type = plan.providers[provider]?.type as string | undefined;
        if (type === 'anthropic' || type === 'openai') name = type;
        else {
          // An AI SDK model says whose it is (`anthropic.messages`): that provider, not ours.
          const source = type === 'ai-sdk' ? (sources[provider] ?? sources['ai-sdk']) : undefined;
          const raw = source !== undefined ? aiSdkSourceProvider(source, model) : undefined;
          name = raw !== undefined ? aiSdkProviderName(raw) : `swarmstate.${type ?? 'unknown'}`;
        }
        names.set(key, name);
      }
      return name;
    },
    server(provider) {
      const spec = plan.providers[provider] as { type?: string; baseURL?: string } | undefined;
      return spec?.type ? serverOf(spec.type, spec.baseURL) : undefined;
    },
    conversation: (taskId) => `${runId}/${taskId}`,
    latestOnly: latestGenAiOnly(options.env),
    captureContent: options.captureContent === true,
    redact: options.redact ?? ((value) => value),
  };
}
