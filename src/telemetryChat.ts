/**
 * The `chat` spans of a run's trace (telemetry.ts): one per model call, opened by its
 * `model:request` event, ended by its `model:response` / `model:error`, with the attributes of
 * the GenAI conventions' inference span (v1.41.0). What the events do not carry (the request's
 * settings, and with `captureContent` the messages) the call itself hands over (`details`,
 * from src/run/effects.ts) before its outcome event, redacted like everything else.
 */
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import { otel } from './otel.js';
import type { ErrorInfo, ModelCallInput, ModelCallOutput, RunEvent, Usage } from '../machines/protocol.js';
import { aiSdkProviderName, finishReason, inputMessages, outputMessages, systemInstructions } from './telemetryNames.js';

type EventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

/** What the spans of a run know of its providers, settings and options (telemetry.ts makes it). */
export interface CallNaming {
  /** `gen_ai.provider.name` of a plan provider's model. */
  providerName(provider: string, model: string): string;
  /** `server.address` / `server.port` of a plan provider. */
  server(provider: string): { address: string; port: number } | undefined;
  /** `gen_ai.conversation.id` of a task's calls. */
  conversation(taskId: string): string;
  /** Only the latest conventions (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental). */
  latestOnly: boolean;
  captureContent: boolean;
  redact: <T>(value: T) => T;
}

/** The settings a call was sent with (its ProviderRequest's). */
export interface SentSettings {
  maxTokens: number;
  temperature?: number;
  topP?: number;
  stopSequences?: string[];
}

interface OpenChat {
  span: Span;
  turn: number;
}

export class ChatSpans {
  /** Open chat spans by `task|attempt`, oldest first. */
  private readonly open = new Map<string, OpenChat[]>();

  constructor(
    private readonly tracer: Tracer,
    private readonly naming: CallNaming,
  ) {}

  request(event: EventOf<'model:request'>, parent: Context, at: number): void {
    const attributes = callAttributes(this.naming, event);
    // The name of v1.36.0 and before, for backends that read only it (not with the latest-only opt-in).
    if (!this.naming.latestOnly) attributes['gen_ai.system'] = attributes['gen_ai.provider.name'];
    Object.assign(attributes, {
      'gen_ai.conversation.id': this.naming.conversation(event.taskId),
      'swarmstate.provider': event.provider,
      'swarmstate.key.id': event.keyId,
      'swarmstate.route': `${event.provider}/${event.model}`,
      'swarmstate.task.id': event.taskId,
      'swarmstate.attempt': event.attempt,
      'swarmstate.turn': event.turn,
    });
    const span = this.tracer.startSpan(`chat ${event.model}`, { startTime: at, kind: otel().SpanKind.CLIENT, attributes }, parent);
    const key = `${event.taskId}|${event.attempt}`;
    const open = this.open.get(key);
    const entry = { span, turn: event.turn };
    if (open) open.push(entry);
    else this.open.set(key, [entry]);
  }

  /** What the call itself knows, handed over before its outcome event: settings, and content when captured. */
  details(call: ModelCallInput, sent: SentSettings, out: ModelCallOutput | undefined): void {
    const entry = this.open.get(`${call.taskId}|${call.attempt}`)?.find((o) => o.turn === call.turn);
    if (!entry) return;
    const attributes: Attributes = { 'gen_ai.request.max_tokens': sent.maxTokens };
    if (sent.temperature !== undefined) attributes['gen_ai.request.temperature'] = sent.temperature;
    if (sent.topP !== undefined) attributes['gen_ai.request.top_p'] = sent.topP;
    if (sent.stopSequences !== undefined && sent.stopSequences.length > 0) attributes['gen_ai.request.stop_sequences'] = [...sent.stopSequences];
    if (call.output?.schema) attributes['gen_ai.output.type'] = 'json';
    if (this.naming.captureContent) {
      const { redact } = this.naming;
      // Structured values are not span attributes (yet): JSON strings, as the conventions say then.
      if (call.system !== undefined) attributes['gen_ai.system_instructions'] = JSON.stringify(redact(systemInstructions(call.system)));
      attributes['gen_ai.input.messages'] = JSON.stringify(redact(inputMessages(call.messages)));
      if (out) attributes['gen_ai.output.messages'] = JSON.stringify(redact(outputMessages(out.content, out.stopReason)));
    }
    entry.span.setAttributes(attributes);
  }

  /** The call's outcome event: the response's attributes, or its error, and the span ends. */
  outcome(event: EventOf<'model:response'> | EventOf<'model:error'>, at: number): void {
    const key = `${event.taskId}|${event.attempt}`;
    const open = this.open.get(key);
    const index = open ? Math.max(0, open.findIndex((o) => o.turn === event.turn)) : -1;
    const entry = open && index >= 0 ? open.splice(index, 1)[0] : undefined;
    if (open?.length === 0) this.open.delete(key);
    if (!entry) return;
    const { span } = entry;
    if (event.type === 'model:response') {
      span.setAttributes(usageAttributes(event.usage));
      if (event.stopReason !== undefined) span.setAttribute('gen_ai.response.finish_reasons', [finishReason(event.stopReason)]);
      const response = event.response;
      if (response?.id !== undefined) span.setAttribute('gen_ai.response.id', response.id);
      if (response?.model !== undefined) span.setAttribute('gen_ai.response.model', response.model);
      if (response?.provider !== undefined) {
        const name = aiSdkProviderName(response.provider);
        span.setAttribute('gen_ai.provider.name', name);
        if (!this.naming.latestOnly) span.setAttribute('gen_ai.system', name);
      }
      if (event.costUsd !== undefined) span.setAttribute('swarmstate.cost_usd', event.costUsd);
    } else failed(span, event.error, at, true);
    span.end(at);
  }

  /** An attempt ended: a call still open was abandoned (cancelled, timed out). */
  endAttempt(taskId: string, attempt: number, at: number): void {
    const key = `${taskId}|${attempt}`;
    for (const { span } of this.open.get(key) ?? []) span.end(at);
    this.open.delete(key);
  }
}

/** The attributes a call's span and its metrics share, known when it leaves. */
export function callAttributes(naming: CallNaming, event: EventOf<'model:request'>): Attributes {
  const attributes: Attributes = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': naming.providerName(event.provider, event.model), 'gen_ai.request.model': event.model };
  const server = naming.server(event.provider);
  if (server) {
    attributes['server.address'] = server.address;
    attributes['server.port'] = server.port;
  }
  return attributes;
}

export function usageAttributes(usage: Usage): Attributes {
  return {
    // The conventions count every prompt token as input, cached ones included.
    'gen_ai.usage.input_tokens': usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
    'gen_ai.usage.cache_read.input_tokens': usage.cacheReadTokens,
    'gen_ai.usage.cache_creation.input_tokens': usage.cacheWriteTokens,
  };
}

/**
 * A failed operation's span: `error.type` (the error class), status ERROR, and (`exception`) the
 * error recorded as an exception event (`exception.type` = the class, `exception.message` = its
 * redacted message; no stack: it would say where in swarmstate, not what went wrong).
 */
export function failed(span: Span, error: ErrorInfo, at: number, exception: boolean): void {
  span.setAttribute('error.type', error.code);
  if (error.status !== undefined) span.setAttribute('http.response.status_code', error.status);
  if (error.retryAfterMs !== undefined) span.setAttribute('swarmstate.retry_after_ms', error.retryAfterMs);
  span.setAttribute('swarmstate.error.retryable', error.retryable);
  if (exception) span.recordException({ name: error.code, message: error.message }, at);
  span.setStatus({ code: otel().SpanStatusCode.ERROR, message: error.code });
}
