/**
 * Distributed runs: what the coordinator and the workers say to each other through BullMQ.
 *
 * The coordinator keeps everything that must be exact in one place: the DAG, the journal, the
 * budget ledger, the key actors (so per-key limits hold across all workers: a worker only ever
 * sends a call the coordinator's key granted) and the breakers. What costs time is sent out: each
 * model call and each tool execution is a BullMQ job that any worker may run. A job's id is
 * derived from its content, so a call sent again (a resumed coordinator repeating an interrupted
 * attempt) finds the job already done and takes its result instead of running it twice.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../machines/canonical.js';
import type { ErrorInfo, ModelCallOutput, ToolResult } from '../../machines/protocol.js';
import type { Plan } from '../plan/index.js';
import type { ProviderRequest } from '../providers/types.js';

/** The one queue every run's calls go through. */
export const CALL_QUEUE = 'swarmstate-calls';
/** Pub/sub channel: the id of a job whose caller gave up (an attempt cancelled or past its deadline). */
export const CANCEL_CHANNEL = 'swarmstate:cancel';

/** What a worker needs of a run to make its calls: providers (keys by env name only) and tool servers. */
export interface RunConfig {
  providers: Plan['providers'];
  tools: Plan['tools'];
}

/** A model call: the provider request as the coordinator built it, with its key named by id only. */
export type ModelJob = {
  kind: 'model';
  runId: string;
  config: RunConfig;
  /** The lease's key (`<provider>:<fingerprint>`); the worker finds its secret in its own environment. */
  keyId: string;
} & Omit<ProviderRequest, 'key' | 'signal' | 'onResponseStart'>;

export interface ToolJob {
  kind: 'tool';
  runId: string;
  config: RunConfig;
  taskId?: string;
  name: string;
  args: unknown;
  idempotencyKey?: string;
}

export interface BatchJob {
  kind: 'batch';
  runId: string;
  config: RunConfig;
  name: string;
  calls: unknown[];
}

export type CallJob = ModelJob | ToolJob | BatchJob;

/** A job's return value: the call's answer, or its error (a failed call is a completed job). */
export type CallOutcome =
  /** `callMs`: how long the worker's call took (its own clock): the coordinator dates the send from it. */
  | { ok: true; model: ModelCallOutput; callMs?: number }
  | { ok: true; text: string }
  | { ok: true; results: ToolResult[] }
  | { ok: false; error: ErrorInfo & Record<string, unknown> };

/**
 * The identity of a call: its run, kind and content (not its attempt, key or turn number, which a
 * resume changes). Its job id is this and `.<n>`, n counting identical calls this coordinator made
 * before (a retry of the same request is a new job). BullMQ ids may not contain ":".
 */
export function callKeyOf(job: CallJob): string {
  const { config: _config, runId, ...content } = job;
  const stable = job.kind === 'model' ? { ...content, keyId: undefined, meta: { taskId: job.meta.taskId } } : content;
  const hash = createHash('sha256').update(canonicalJson(stable)).digest('hex').slice(0, 32);
  return `${runId}.${job.kind}.${hash}`;
}
