/**
 * Where a run's calls are made, picked once when the run starts: here (the plan's provider
 * adapters and the run's tools) or, in a distributed run, on the workers (BullMQ jobs through
 * src/distributed). Like a queue's backend: the agents and the tool bus cannot tell which. What
 * is the same either way (tool names on the wire, the journal, redaction, deltas, output checks)
 * stays in effects.ts, around the transport.
 */
import type { ModelCallOutput, ToolResult } from '../../machines/protocol.js';
import type { Keyring } from '../keys.js';
import type { Provider, ProviderRequest } from '../providers/types.js';
import type { RunTools } from '../tools/registry.js';
import { inlineSecretPaths } from '../planSecrets.js';
import { PlanValidationError, type Plan } from '../plan/index.js';
import { unwrap, type Remote } from '../distributed/lazy.js';
import type { BatchJob, ModelJob, RunConfig, ToolJob } from '../distributed/protocol.js';

/** A model call as the run builds it: the provider request with the lease's key named by id only. */
export type ModelRequest = Omit<ProviderRequest, 'key' | 'signal' | 'onResponseStart' | 'onText'> & { keyId: string };

/** What a model call needs of its caller besides the request. */
export interface ModelCallIo {
  signal: AbortSignal;
  /** The run's clock (a distributed call dates its send from it). */
  now: () => number;
  /** Each piece of streamed text (only a call made here streams). */
  onText?: (text: string) => void;
  /** The response has begun (only a call made here says so). */
  onResponseStart?: () => void;
}

export interface CallTransport {
  /** One model call; its reply still has the wire's tool names. Rejects with a ProviderError (or what the adapter threw). */
  model(request: ModelRequest, io: ModelCallIo): Promise<ModelCallOutput>;
  /** One tool call; a tool's error rejects with its own words. */
  tool(name: string, args: unknown, signal: AbortSignal, idempotencyKey?: string, callId?: string): Promise<string>;
  /** One batch of a batching tool's calls. */
  batch(name: string, calls: unknown[], signal: AbortSignal): Promise<ToolResult[]>;
  /** The run is over: what the transport kept for it can go. */
  end(): void;
}

/** Calls made in this process: the adapters get the key's secret from the keyring. */
export function localTransport(adapters: Map<string, Provider>, keyring: Keyring, runTools: RunTools): CallTransport {
  return {
    model: ({ keyId, ...request }, io) =>
      adapters.get(request.provider)!.call({
        ...request,
        key: keyring.get(keyId),
        signal: io.signal,
        ...(io.onText ? { onText: io.onText } : {}),
        ...(io.onResponseStart ? { onResponseStart: io.onResponseStart } : {}),
      }),
    tool: (name, args, signal, idempotencyKey, callId) => runTools.execute(name, args, signal, idempotencyKey, callId),
    batch: (name, calls, signal) => runTools.executeBatch(name, calls, signal),
    end: () => {},
  };
}

/** How much later than measured a distributed call is taken to have reached the server (key windows err late). */
const SENT_AT_MARGIN_MS = 100;

/**
 * Calls made on the workers: each is a job, and a worker makes it with the key's secret from its
 * own environment; the outcome comes back through the job. Nothing streams and no response start
 * is signalled: the reply arrives whole.
 */
export function remoteTransport(calls: Remote, runId: string, config: RunConfig): CallTransport {
  return {
    async model(request, io) {
      const job: ModelJob = { kind: 'model', runId, config, ...request };
      const outcome = unwrap(await calls.call(job, io.signal)) as { model: ModelCallOutput; callMs?: number };
      // The call may have waited in the queue for a worker: the key's request bucket counts it
      // from when it really left (the worker's own measure of the call, so no clock is compared).
      // A margin keeps the estimate on the late side: a server counts arrivals by its own clock.
      if (outcome.callMs !== undefined) outcome.model.sentAt = io.now() - outcome.callMs + SENT_AT_MARGIN_MS;
      return outcome.model;
    },
    async tool(name, args, signal, idempotencyKey) {
      const job: ToolJob = { kind: 'tool', runId, config, name, args, ...(idempotencyKey ? { idempotencyKey } : {}) };
      const outcome = await calls.call(job, signal);
      // A tool's error is its own words (as from a tool run here), not a provider's.
      if (!outcome.ok) throw new Error(outcome.error.message);
      return (outcome as { text: string }).text;
    },
    async batch(name, batchCalls, signal) {
      const job: BatchJob = { kind: 'batch', runId, config, name, calls: batchCalls };
      const outcome = await calls.call(job, signal);
      if (!outcome.ok) throw new Error(outcome.error.message);
      return (outcome as { results: ToolResult[] }).results;
    },
    end: () => calls.forgetRun(runId),
  };
}

/** A distributed run's keys are read by each worker from its own environment: no inline key. */
export function checkDistributable(plan: Plan, localTools: number): void {
  // Keys and tool servers' settings travel to the workers (settings in every job): nothing inline that may be a secret.
  const issues = inlineSecretPaths(plan).map((path) => ({
    path,
    message: path.startsWith('providers.')
      ? 'a distributed run (--redis) needs keys from the environment ({"env": "NAME"}): each worker reads its own'
      : 'a distributed run (--redis) sends tool server settings through Redis: give this value as {"env": "NAME"} (each worker reads its own)',
  }));
  for (const [name, p] of Object.entries(plan.providers)) {
    if (p.type === 'custom' || p.type === 'ai-sdk') issues.push({ path: `providers.${name}.type`, message: `a distributed run (--redis) makes its calls on the workers: a "${p.type}" provider is an object in this process and cannot go there` });
  }
  if (localTools > 0) issues.push({ path: 'tools', message: 'a distributed run (--redis) runs tools on the workers: in-process tools (createSwarm({ tools })) cannot go there; serve them from an MCP server' });
  if (issues.length > 0) throw new PlanValidationError(issues);
}
