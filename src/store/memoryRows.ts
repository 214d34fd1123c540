/**
 * `MemoryStore`'s rows (memory.ts): the records it keeps per run, task and attempt, made when
 * first written like SQLite's upserts, and turned into the rows the `Store` contract returns
 * (opaque values through JSON, as the file store stores them). Apart so memory.ts holds the
 * store's writes only.
 */
import { checkedSummary, listedSummary, readAttempt, readTask } from './rows.js';
import { rowBytes } from './prune.js';
import { CONTAINER_KINDS, withoutContainers, type HeldLock } from './shared.js';
import type { AttemptRow, RunSummary, StoredRunStatus, StoredTaskStatus, TaskRow } from './types.js';

export interface RunState {
  seq: number;
  id: string;
  status: StoredRunStatus;
  createdAt: number;
  updatedAt: number;
  source: string | null;
  optionsJson: string | null;
  planJson: string | null;
  resultJson: string | null;
  tasksTotal: number;
  tasksDone: number;
  costUsd: number;
}

export interface TaskState {
  status: StoredTaskStatus;
  attempts: number;
  output: string | null;
  errorJson: string | null;
  reason: string | null;
  usageJson: string | null;
  costUsd: number | null;
  requests: number;
  retries: number;
  specJson: string | null;
  parent: string | null;
  extraJson: string | null;
  rejectedJson: string | null;
  updatedAt: number;
}

export interface AttemptState {
  taskId: string;
  attempt: number;
  route: string;
  startedAt: number;
  endedAt: number | null;
  status: AttemptRow['status'];
  requests: number;
  usageJson: string | null;
  costUsd: number | null;
}

/** Everything journaled under one run id (a run record need not exist, as in SQLite: no foreign keys). */
export interface RunData {
  tasks: Map<string, TaskState>;
  attempts: AttemptState[];
  attemptsOf: Map<string, Map<number, AttemptState>>;
  /** `${taskId}\0${model}` -> spend, summed like the SQL upsert. */
  spend: Map<string, { taskId: string; model: string; usd: number }>;
  tools: Map<string, { content: string; isError: boolean; at: number }>;
}

export function newTask(at: number): TaskState {
  return {
    status: 'pending',
    attempts: 0,
    output: null,
    errorJson: null,
    reason: null,
    usageJson: null,
    costUsd: null,
    requests: 0,
    retries: 0,
    specJson: null,
    parent: null,
    extraJson: null,
    rejectedJson: null,
    updatedAt: at,
  };
}

export function newRunData(): RunData {
  return { tasks: new Map(), attempts: [], attemptsOf: new Map(), spend: new Map(), tools: new Map() };
}

/** The task's state, made (`pending`) when first written, like the SQL upserts. */
export function taskOf(data: RunData, taskId: string, at: number): TaskState {
  let task = data.tasks.get(taskId);
  if (task === undefined) {
    task = newTask(at);
    data.tasks.set(taskId, task);
  }
  return task;
}

/** The attempt's state, made when first written: route '' and started when first seen. */
export function attemptOf(data: RunData, taskId: string, attempt: number, at: number): AttemptState {
  let ofTask = data.attemptsOf.get(taskId);
  if (ofTask === undefined) {
    ofTask = new Map();
    data.attemptsOf.set(taskId, ofTask);
  }
  let row = ofTask.get(attempt);
  if (row === undefined) {
    row = { taskId, attempt, route: '', startedAt: at, endedAt: null, status: null, requests: 0, usageJson: null, costUsd: null };
    ofTask.set(attempt, row);
    data.attempts.push(row);
  }
  return row;
}

/** The rows the contract returns, read as the file store reads its own (rows.ts): the same checks, the same errors. */
export function taskRowOf(path: string, runId: string, taskId: string, t: TaskState): TaskRow {
  return readTask(path, runId, taskId, t);
}

export function attemptRowOf(path: string, runId: string, row: AttemptState): AttemptRow {
  return readAttempt(path, runId, row);
}

export function summaryOf(path: string, run: RunState, data: RunData | undefined, listing = false): RunSummary {
  const summary = listing ? listedSummary(path, run) : checkedSummary(path, run);
  return summary.damaged ? summary : withoutContainers(summary, containersOf(run, data));
}

/** Each container's status, by the file store's rule (sqliteSchema.ts `containers`). */
function containersOf(run: RunState, data: RunData | undefined): string[] {
  const tasks = data?.tasks;
  if (tasks === undefined) return [];
  const parents = new Set([...tasks.values()].map((t) => t.parent).filter((p): p is string => p !== null));
  if (parents.size === 0) return [];
  const planned = new Map<string, unknown>();
  const plan = parsed(run.planJson) as { tasks?: unknown } | undefined;
  if (Array.isArray(plan?.tasks)) for (const t of plan.tasks as { id?: unknown; kind?: unknown }[]) if (typeof t?.id === 'string' && !planned.has(t.id)) planned.set(t.id, t.kind);
  const out: string[] = [];
  for (const id of parents) {
    const t = tasks.get(id);
    if (t === undefined) continue;
    const spec = parsed(t.specJson) as { kind?: unknown } | undefined;
    const kind = spec?.kind ?? planned.get(id);
    if ((CONTAINER_KINDS as readonly unknown[]).includes(kind)) out.push(t.status);
  }
  return out;
}

const parsed = (json: string | null): unknown => {
  if (json === null) return undefined;
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return undefined;
  }
};

/** A run's rows in bytes, as the file store counts its own (prune.ts RUN_TABLES, table by table). */
export function runBytes(run: RunState, data: RunData | undefined, lock: HeldLock | undefined): number {
  const id = run.id;
  let bytes = rowBytes([id, run.status, run.source, run.optionsJson], 5) + rowBytes([id, run.planJson], 0);
  if (run.resultJson !== null) bytes += rowBytes([id, run.resultJson], 0);
  for (const [taskId, t] of data?.tasks ?? []) {
    bytes += rowBytes([id, taskId, t.status, t.output, t.errorJson, t.reason, t.usageJson, t.specJson, t.parent, t.extraJson, t.rejectedJson], 5);
  }
  for (const a of data?.attempts ?? []) bytes += rowBytes([id, a.taskId, a.route, a.status, a.usageJson], 5);
  for (const [key, tool] of data?.tools ?? []) bytes += rowBytes([id, key, tool.content], 2);
  for (const spend of data?.spend.values() ?? []) bytes += rowBytes([id, spend.taskId, spend.model], 1);
  if (lock !== undefined) bytes += rowBytes([id, lock.owner, lock.host], 3);
  return bytes;
}
