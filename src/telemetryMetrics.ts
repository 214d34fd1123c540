/**
 * The GenAI client metrics of a run's model calls (OpenTelemetry GenAI conventions v1.41.0):
 * `gen_ai.client.token.usage` (histogram, `{token}`, one record per token type: `input`,
 * `output`) and `gen_ai.client.operation.duration` (histogram, seconds, with `error.type` when
 * the call failed), through the API's meter. With no MeterProvider registered the API's meter
 * is its no-op one: `GenAiMetrics.of` then gives nothing, and a run records nothing.
 */
import type { Attributes, Histogram, Meter } from '@opentelemetry/api';
import { otel } from './otel.js';
import type { Usage } from '../machines/protocol.js';

/** The conventions' bucket boundaries of each histogram. */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

export class GenAiMetrics {
  private readonly tokens: Histogram;
  private readonly duration: Histogram;
  /** Calls in flight by `task|attempt`, oldest first: when each started and its attributes. */
  private readonly open = new Map<string, { at: number; attributes: Attributes }[]>();

  private constructor(meter: Meter) {
    this.tokens = meter.createHistogram('gen_ai.client.token.usage', {
      unit: '{token}',
      description: 'Number of input and output tokens used.',
      advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
    });
    this.duration = meter.createHistogram('gen_ai.client.operation.duration', {
      unit: 's',
      description: 'GenAI operation duration.',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    });
  }

  /** The metrics of a run on `meter` (default: the global one); none when it is the API's no-op meter or `false`. */
  static of(meter: Meter | false | undefined): GenAiMetrics | undefined {
    if (meter === false) return undefined;
    const api = otel();
    const m = meter ?? api.metrics.getMeter('swarmstate');
    return m === api.createNoopMeter() ? undefined : new GenAiMetrics(m);
  }

  /** A call left: its attributes (operation, provider, request model, server) until it ends. */
  started(key: string, at: number, attributes: Attributes): void {
    const open = this.open.get(key);
    if (open) open.push({ at, attributes });
    else this.open.set(key, [{ at, attributes }]);
  }

  /** The oldest call in flight of `key` ended: its duration, and its tokens when it answered. */
  ended(key: string, at: number, outcome: { usage: Usage; responseModel?: string; provider?: string } | { errorType: string }): void {
    const open = this.open.get(key);
    const call = open?.shift();
    if (open?.length === 0) this.open.delete(key);
    if (!call) return;
    const attributes: Attributes = { ...call.attributes };
    if ('errorType' in outcome) attributes['error.type'] = outcome.errorType;
    else {
      if (outcome.responseModel !== undefined) attributes['gen_ai.response.model'] = outcome.responseModel;
      if (outcome.provider !== undefined) attributes['gen_ai.provider.name'] = outcome.provider;
    }
    this.duration.record(Math.max(0, at - call.at) / 1000, attributes);
    if ('errorType' in outcome) return;
    const u = outcome.usage;
    // As on the span: every prompt token is input, cached ones included.
    this.tokens.record(u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens, { ...attributes, 'gen_ai.token.type': 'input' });
    this.tokens.record(u.outputTokens, { ...attributes, 'gen_ai.token.type': 'output' });
  }

  /** An attempt ended: its calls still in flight were abandoned (no duration for them). */
  dropAttempt(key: string): void {
    this.open.delete(key);
  }
}
