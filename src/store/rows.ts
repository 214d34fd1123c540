/**
 * Journal rows read back at the store's boundary, one row at a time, by both stores: every
 * column checked for the type the contract promises (JSON that parses, a finite number, a known
 * status, a usage of four counts). A journal is a file anyone can edit (or a disk can damage), so
 * what comes back from it is outside input: a bad column is named (run, table, column, task) in
 * a `JournalRowError`, never a bare `JSON.parse` message or a string where a number goes.
 *
 * Two policies over one reader: a run's own rows (`getRun`, `loadTasks`...) throw at the first
 * bad column; a listing (`listRuns`) keeps going and marks the bad run (`damaged`), so one bad
 * row does not hide the others.
 */
import type { Usage } from '../../machines/protocol.js';
import {
  StoreError,
  type AttemptRow,
  type RejectedAnswer,
  type RowDamage,
  type RunSummary,
  type StoredRunStatus,
  type StoredTaskStatus,
  type TaskRow,
} from './types.js';

export const RUN_STATUSES: readonly StoredRunStatus[] = ['running', 'completed', 'partial', 'failed', 'cancelled', 'budget_exceeded', 'paused', 'interrupted'];
const TASK_STATUSES: readonly StoredTaskStatus[] = ['pending', 'queued', 'running', 'waiting', 'completed', 'failed', 'skipped', 'cancelled'];
const ATTEMPT_STATUSES: readonly AttemptRow['status'][] = ['completed', 'failed', 'cancelled', null];
const USAGE_KEYS: readonly (keyof Usage)[] = ['inputTokens', 'outputTokens', 'cacheWriteTokens', 'cacheReadTokens'];

/** A journal row a column of which is not what swarmstate wrote there (sqliteCode `bad-row`). */
export class JournalRowError extends StoreError {
  readonly runId: string;
  readonly table: string;
  readonly column: string;
  readonly taskId: string | undefined;

  constructor(path: string, damage: RowDamage & { runId: string }) {
    super(`run journal ${path}: run ${damage.runId}: ${damage.message}`, path, 'bad-row');
    this.name = 'JournalRowError';
    this.runId = damage.runId;
    this.table = damage.table;
    this.column = damage.column;
    this.taskId = damage.taskId;
  }
}

/** Where a row is: its run, its table, and the task it belongs to (tasks and attempts). */
export interface RowPlace {
  runId: string;
  table: string;
  taskId?: string;
}

/**
 * Reads one row's columns. Each read gives the column's value, or (a bad column) the fallback
 * and a note of the first problem, which `check` throws and `damage` hands to a listing.
 */
export class RowReader {
  private problem: RowDamage | undefined;

  constructor(
    private readonly path: string,
    private readonly place: RowPlace,
  ) {}

  /** The first bad column of the row, or undefined. */
  get damage(): RowDamage | undefined {
    return this.problem;
  }

  /** Throws the JournalRowError of the row's first bad column, if any. */
  check(): void {
    if (this.problem) throw new JournalRowError(this.path, { ...this.problem, runId: this.place.runId });
  }

  /** A JSON column (null stays null). Never quotes the text: a journal's values may hold anything. */
  json(column: string, value: unknown): unknown {
    if (value === null || value === undefined) return null;
    if (typeof value !== 'string') return this.bad(column, `holds ${kindOf(value)}, not JSON text`, null);
    try {
      return JSON.parse(value);
    } catch {
      return this.bad(column, `is not valid JSON (${value.length} characters)`, null);
    }
  }

  number(column: string, value: unknown): number {
    return typeof value === 'number' && Number.isFinite(value) ? value : this.bad(column, `holds ${kindOf(value)}, not a number`, 0);
  }

  numberOrNull(column: string, value: unknown): number | null {
    return value === null ? null : this.number(column, value);
  }

  /** A count: a whole number, 0 or more. */
  count(column: string, value: unknown): number {
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : this.bad(column, `holds ${kindOf(value)}, not a count`, 0);
  }

  text(column: string, value: unknown): string {
    return typeof value === 'string' ? value : this.bad(column, `holds ${kindOf(value)}, not text`, '');
  }

  textOrNull(column: string, value: unknown): string | null {
    return value === null ? null : this.text(column, value);
  }

  oneOf<T extends string | null>(column: string, value: unknown, allowed: readonly T[], fallback: T): T {
    if ((allowed as readonly unknown[]).includes(value)) return value as T;
    return this.bad(column, typeof value === 'string' ? `holds an unknown status (${value.length} characters)` : `holds ${kindOf(value)}, not a status`, fallback);
  }

  usage(column: string, value: unknown): Usage | null {
    const parsed = this.json(column, value);
    if (parsed === null || this.problem?.column === column) return null;
    const ok = typeof parsed === 'object' && !Array.isArray(parsed) && USAGE_KEYS.every((k) => {
      const n = (parsed as Record<string, unknown>)[k];
      return typeof n === 'number' && Number.isFinite(n) && n >= 0;
    });
    return ok ? (parsed as Usage) : this.bad(column, 'is not a usage (four token counts)', null);
  }

  rejected(column: string, value: unknown): RejectedAnswer | null {
    const parsed = this.json(column, value) as { code?: unknown; problems?: unknown } | null;
    if (parsed === null || this.problem?.column === column) return null;
    const ok = typeof parsed === 'object' && typeof parsed.code === 'string' && Array.isArray(parsed.problems) && parsed.problems.every((p) => typeof p === 'string');
    return ok ? (parsed as RejectedAnswer) : this.bad(column, 'is not a rejected answer (a code and its problems)', null);
  }

  private bad<T>(column: string, what: string, fallback: T): T {
    if (this.problem === undefined) {
      const { table, taskId } = this.place;
      const of = taskId === undefined ? '' : ` of task ${taskId}`;
      this.problem = { table, column, ...(taskId !== undefined ? { taskId } : {}), message: `${table}.${column}${of} ${what}: the journal was changed outside swarmstate` };
    }
    return fallback;
  }
}

/** The type of a column's value, in words (never the value: it may be anything). */
function kindOf(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'string') return 'text';
  if (typeof value === 'number') return Number.isFinite(value) ? 'another number' : 'a number that is not finite';
  if (typeof value === 'bigint') return 'a number too large';
  if (value instanceof Uint8Array) return 'binary data';
  return typeof value;
}

/** A runs row as both stores hold it (the file's columns by their camel-case names). */
export interface RawSummary {
  id: string;
  status: unknown;
  createdAt: unknown;
  updatedAt: unknown;
  source: unknown;
  optionsJson: unknown;
  tasksTotal: unknown;
  tasksDone: unknown;
  costUsd: unknown;
}

/** A run's summary, read with `reader` (its table `runs`). */
export function readSummary(reader: RowReader, raw: RawSummary): RunSummary {
  return {
    id: raw.id,
    status: reader.oneOf('status', raw.status, RUN_STATUSES, 'failed'),
    createdAt: reader.number('created_at', raw.createdAt),
    updatedAt: reader.number('updated_at', raw.updatedAt),
    source: reader.textOrNull('source', raw.source),
    options: reader.json('options_json', raw.optionsJson),
    tasksTotal: reader.count('tasks_total', raw.tasksTotal),
    tasksDone: reader.count('tasks_done', raw.tasksDone),
    costUsd: reader.number('cost_usd', raw.costUsd),
  };
}

/** The summaries of a listing: a bad row is listed with what could be read and `damaged`. */
export function listedSummary(path: string, raw: RawSummary): RunSummary {
  const reader = new RowReader(path, { runId: raw.id, table: 'runs' });
  const summary = readSummary(reader, raw);
  return reader.damage ? { ...summary, damaged: reader.damage } : summary;
}

/** A run's own summary: a bad row throws. */
export function checkedSummary(path: string, raw: RawSummary): RunSummary {
  const reader = new RowReader(path, { runId: raw.id, table: 'runs' });
  const summary = readSummary(reader, raw);
  reader.check();
  return summary;
}

/** A single JSON column of a run's row elsewhere (its plan, its result): a bad one throws. */
export function checkedJson(path: string, runId: string, table: string, column: string, value: unknown): unknown {
  const reader = new RowReader(path, { runId, table });
  const parsed = reader.json(column, value);
  reader.check();
  return parsed;
}

export interface RawTask {
  status: unknown;
  attempts: unknown;
  output: unknown;
  errorJson: unknown;
  reason: unknown;
  usageJson: unknown;
  costUsd: unknown;
  requests: unknown;
  retries: unknown;
  specJson: unknown;
  parent: unknown;
  extraJson: unknown;
  rejectedJson: unknown;
  updatedAt: unknown;
}

export function readTask(path: string, runId: string, taskId: unknown, raw: RawTask): TaskRow {
  const id = typeof taskId === 'string' ? taskId : String(taskId);
  const r = new RowReader(path, { runId, table: 'tasks', taskId: id });
  r.text('task_id', taskId);
  const row: TaskRow = {
    taskId: id,
    status: r.oneOf('status', raw.status, TASK_STATUSES, 'failed'),
    attempts: r.count('attempts', raw.attempts),
    output: r.textOrNull('output', raw.output),
    error: r.json('error_json', raw.errorJson),
    reason: r.textOrNull('reason', raw.reason),
    usage: r.usage('usage_json', raw.usageJson),
    costUsd: r.numberOrNull('cost_usd', raw.costUsd),
    requests: r.count('requests', raw.requests),
    retries: r.count('retries', raw.retries),
    spec: r.json('spec_json', raw.specJson),
    parent: r.textOrNull('parent', raw.parent),
    extra: r.json('extra_json', raw.extraJson),
    rejected: r.rejected('rejected_json', raw.rejectedJson),
    updatedAt: r.number('updated_at', raw.updatedAt),
  };
  r.check();
  return row;
}

export interface RawAttempt {
  taskId: unknown;
  attempt: unknown;
  route: unknown;
  startedAt: unknown;
  endedAt: unknown;
  status: unknown;
  requests: unknown;
  usageJson: unknown;
  costUsd: unknown;
}

export function readAttempt(path: string, runId: string, raw: RawAttempt): AttemptRow {
  const taskId = typeof raw.taskId === 'string' ? raw.taskId : String(raw.taskId);
  const r = new RowReader(path, { runId, table: 'attempts', taskId });
  r.text('task_id', raw.taskId);
  const row: AttemptRow = {
    taskId,
    attempt: r.count('attempt', raw.attempt),
    route: r.text('route', raw.route),
    startedAt: r.number('started_at', raw.startedAt),
    endedAt: r.numberOrNull('ended_at', raw.endedAt),
    status: r.oneOf('status', raw.status, ATTEMPT_STATUSES, null),
    requests: r.count('requests', raw.requests),
    usage: r.usage('usage_json', raw.usageJson),
    costUsd: r.numberOrNull('cost_usd', raw.costUsd),
  };
  r.check();
  return row;
}

/** A spend row's task, model and dollars: a bad one throws. */
export function readSpend(path: string, runId: string, raw: { taskId: unknown; model: unknown; usd: unknown }): { taskId: string; model: string; usd: number } {
  const taskId = typeof raw.taskId === 'string' ? raw.taskId : String(raw.taskId);
  const r = new RowReader(path, { runId, table: 'spend', taskId });
  const row = { taskId: r.text('task_id', raw.taskId), model: r.text('model', raw.model), usd: r.number('usd', raw.usd) };
  r.check();
  return row;
}

/** A tool result's content and flag: a bad one throws. */
export function readToolResult(path: string, runId: string, raw: { content: unknown; isError: unknown }): { content: string; isError: boolean } {
  const r = new RowReader(path, { runId, table: 'tool_results' });
  const row = { content: r.text('content', raw.content), isError: r.number('is_error', raw.isError) !== 0 };
  r.check();
  return row;
}
